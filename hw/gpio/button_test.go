package gpio

import (
	"errors"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	down := func(ms int) Edge { return Edge{Time: at(ms), Pressed: true} }
	up := func(ms int) Edge { return Edge{Time: at(ms), Pressed: false} }
	r := PressRule{Debounce: 30 * time.Millisecond, LongPress: 1500 * time.Millisecond}
	for _, tc := range []struct {
		name    string
		atStart bool
		edges   []Edge
		now     int
		final   bool
		want    Press
	}{
		{"nothing", false, nil, 5000, false, PressNone},
		{"nothing at the end", false, nil, 5000, true, PressNone},
		{"short", false, []Edge{down(100), up(300)}, 400, false, PressShort},
		{"short, release too young to count", false, []Edge{down(100), up(300)}, 310, false, PressNone},
		{"short, bounces within debounce on both edges", false,
			[]Edge{down(100), up(103), down(106), up(110), down(112), up(400), down(405), up(409)}, 600, false, PressShort},
		{"a lone bounce is no press", false, []Edge{down(100), up(110)}, 600, true, PressNone},
		{"long at long_press, before the release", false, []Edge{down(100)}, 1600, false, PressLong},
		{"held but not yet long", false, []Edge{down(100)}, 1500, false, PressNone},
		{"long, released", false, []Edge{down(100), up(1700)}, 1800, false, PressLong},
		{"just under long is short", false, []Edge{down(100), up(1599)}, 1700, false, PressShort},
		{"release never seen before the end is long", false, []Edge{down(100)}, 500, true, PressLong},
		{"a press before the wait does not count", false, []Edge{down(-300), up(-100)}, 2000, true, PressNone},
		{"held from before the wait: its release is no press", true, []Edge{up(200)}, 2000, true, PressNone},
		{"held from before, released, pressed again", true, []Edge{up(200), down(400), up(500)}, 600, false, PressShort},
		{"held from before and never released", true, nil, 5000, true, PressNone},
		{"edges after now are not seen yet", false, []Edge{down(100), up(300)}, 200, false, PressNone},
		{"press bouncing on release, counted from the stable press", false,
			[]Edge{down(100), up(105), down(108), up(1650)}, 1700, false, PressLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Classify(tc.atStart, tc.edges, t0, at(tc.now), tc.final)
			if got != tc.want {
				t.Errorf("Classify = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestButtonConfigCheck(t *testing.T) {
	ok := ButtonConfig{Pin: 26, Pull: PullUp, ActiveLow: true, Debounce: 30 * time.Millisecond, LED: 21}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ButtonConfig{
		{Pin: -1, Pull: PullUp, Debounce: time.Millisecond, LED: -1},
		{Pin: 3, Pull: PullUp, Debounce: time.Millisecond, LED: 3},
		{Pin: 3, Pull: "sideways", Debounce: time.Millisecond, LED: -1},
		{Pin: 3, Pull: PullUp, Debounce: 0, LED: -1},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("Check(%+v) passed", bad)
		}
	}
}

func TestSimButton(t *testing.T) {
	o := NewSimButtons(28)
	if _, err := o.OpenButton(ButtonConfig{Pin: 40, Pull: PullUp, Debounce: time.Millisecond, LED: -1}); !errors.Is(err, ErrNoSuchPin) {
		t.Fatalf("pin 40 on 28 pins: %v", err)
	}
	if o.Current() != nil {
		t.Fatal("a failed open is current")
	}
	b, err := o.OpenButton(ButtonConfig{Pin: 26, Pull: PullUp, ActiveLow: true, Debounce: time.Millisecond, LED: 21})
	if err != nil {
		t.Fatal(err)
	}
	sb := o.Current()
	if sb == nil || Button(sb) != b {
		t.Fatal("Current is not the open button")
	}
	sb.Press(5 * time.Millisecond)
	e1, e2 := <-b.Edges(), <-b.Edges()
	if !e1.Pressed || e2.Pressed || e2.Time.Sub(e1.Time) < 5*time.Millisecond {
		t.Errorf("edges %+v %+v", e1, e2)
	}
	if p, err := b.Pressed(); err != nil || p {
		t.Errorf("Pressed after the press = %v, %v", p, err)
	}
	b.SetLED(true)
	b.SetLED(true)
	b.SetLED(false)
	b.SetLED(true)
	if on, n := sb.LED(); !on || n != 2 {
		t.Errorf("LED = %v, %d; want on, turned on twice", on, n)
	}
	b.Close()
	if _, ok := <-b.Edges(); ok {
		t.Error("edges open after Close")
	}
	if o.Current() != nil {
		t.Error("a closed button is current")
	}
}

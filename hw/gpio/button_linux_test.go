//go:build linux

package gpio

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warthog618/go-gpiocdev"
)

// TestButtonOnGPIOSim runs the approval button on the kernel's gpio-sim
// (the VM harness's chip has lines GPIO0..GPIO27) and skips elsewhere: the
// button on GPIO26, pulled up and active low, pressed by pulling the
// simulated line down through sysfs, and its LED on GPIO21, read back from
// the simulated line's value.
func TestButtonOnGPIOSim(t *testing.T) {
	if _, _, err := gpiocdev.FindLine("GPIO26"); err != nil {
		t.Skipf("no line named GPIO26 (no gpio-sim chip): %v", err)
	}
	l, err := NewLinux("raspi-mcp-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	_, _, btnDir := simLine(t, l, 26)
	_, _, ledDir := simLine(t, l, 21)
	pull := filepath.Join(btnDir, "pull")
	t.Cleanup(func() { os.WriteFile(pull, []byte("pull-down"), 0o644) }) // gpio-sim's default
	writeSysfs(t, pull, "pull-up")                                       // released

	cfg := ButtonConfig{Pin: 26, Pull: PullUp, ActiveLow: true, Debounce: 5 * time.Millisecond, LED: 21}
	b, err := LinuxButtons{}.OpenButton(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if p, err := b.Pressed(); err != nil || p {
		t.Fatalf("Pressed released = %v, %v", p, err)
	}
	// The kernel agrees on who holds both lines.
	if st, err := l.State(t.Context(), 26); err != nil || st.Consumer != ButtonConsumer {
		t.Errorf("State(26) = %s, %v", show(st), err)
	}
	if _, err := (LinuxButtons{}).OpenButton(cfg); !errors.Is(err, ErrBusy) {
		t.Errorf("a second open of a held button: %v, want busy", err)
	}

	rule := PressRule{Debounce: cfg.Debounce, LongPress: 300 * time.Millisecond}
	// press holds the simulated line down for hold and returns what
	// Classify makes of the edges the kernel reported.
	press := func(hold time.Duration) Press {
		t.Helper()
		start := time.Now()
		writeSysfs(t, pull, "pull-down")
		// With the kernel's debounce the level reads as pressed once it
		// has held for the debounce period: wait for that, not a time.
		held := false
		for wait := time.Now().Add(5 * time.Second); !held && time.Now().Before(wait); time.Sleep(time.Millisecond) {
			p, err := b.Pressed()
			if err != nil {
				t.Fatal(err)
			}
			held = p
		}
		if !held {
			t.Errorf("Pressed never read true while held")
		}
		time.Sleep(hold)
		writeSysfs(t, pull, "pull-up")
		var edges []Edge
		deadline := time.After(10 * time.Second)
		for len(edges) < 2 {
			select {
			case e := <-b.Edges():
				edges = append(edges, e)
			case <-deadline:
				t.Fatalf("edges after a press of %s: %+v", hold, edges)
			}
		}
		if !edges[0].Pressed || edges[1].Pressed || edges[1].Time.Sub(edges[0].Time) < hold/2 {
			t.Errorf("edges of a press of %s: %+v", hold, edges)
		}
		return rule.Classify(false, edges, start, time.Now().Add(time.Second), true)
	}
	if got := press(60 * time.Millisecond); got != PressShort {
		t.Errorf("a 60 ms press is %q, want short", got)
	}
	if got := press(500 * time.Millisecond); got != PressLong {
		t.Errorf("a 500 ms press is %q, want long", got)
	}

	// The LED drives its line while on, as the helper blinks it while a
	// call waits.
	value := filepath.Join(ledDir, "value")
	if got := readSysfs(t, value); got != "0" {
		t.Errorf("LED at open = %q, want 0", got)
	}
	for _, on := range []bool{true, false, true} {
		if err := b.SetLED(on); err != nil {
			t.Fatal(err)
		}
		want := "0"
		if on {
			want = "1"
		}
		if got := readSysfs(t, value); got != want {
			t.Errorf("LED after SetLED(%v) = %q", on, got)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := l.State(t.Context(), 26); err != nil || st.Consumer != "" {
		t.Errorf("State(26) after Close = %s, %v; want free", show(st), err)
	}
}

// A pin no gpiochip has is missing, named in the error.
func TestButtonMissingLine(t *testing.T) {
	_, err := LinuxButtons{}.OpenButton(ButtonConfig{Pin: 63, Pull: PullUp, ActiveLow: true, Debounce: 5 * time.Millisecond, LED: -1})
	if err == nil {
		t.Fatal("a button on GPIO63 opened")
	}
	if !errors.Is(err, ErrNoSuchPin) {
		t.Logf("GPIO63: %v (no gpiochip here)", err)
	}
}

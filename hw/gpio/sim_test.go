package gpio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func mustConfigure(t *testing.T, c Controller, pin int, mode Mode, pull Pull, initial int) PinState {
	t.Helper()
	st, err := c.Configure(t.Context(), pin, mode, pull, initial)
	if err != nil {
		t.Fatalf("Configure(%d, %s, %s, %d): %v", pin, mode, pull, initial, err)
	}
	return st
}

func mustRead(t *testing.T, c Controller, pin int) int {
	t.Helper()
	v, err := c.Read(t.Context(), pin)
	if err != nil {
		t.Fatalf("Read(%d): %v", pin, err)
	}
	return v
}

func mustState(t *testing.T, c Controller, pin int) PinState {
	t.Helper()
	st, err := c.State(t.Context(), pin)
	if err != nil {
		t.Fatalf("State(%d): %v", pin, err)
	}
	return st
}

// show renders a PinState with its value dereferenced, for comparisons.
func show(st PinState) string {
	v := "nil"
	if st.Value != nil {
		v = fmt.Sprint(*st.Value)
	}
	return fmt.Sprintf("{pin %d mode %s value %s pull %s consumer %q chip %s line %d}",
		st.Pin, st.Mode, v, st.Pull, st.Consumer, st.Chip, st.Line)
}

func wantState(t *testing.T, got PinState, want string) {
	t.Helper()
	if s := show(got); s != want {
		t.Errorf("state\n got %s\nwant %s", s, want)
	}
}

func wantLevel(t *testing.T, s *Sim, pin, want int) {
	t.Helper()
	got, err := s.Level(pin)
	if err != nil || got != want {
		t.Errorf("Level(%d) = %d, %v; want %d", pin, got, err, want)
	}
}

func TestSimConfigureOutput(t *testing.T) {
	s := NewSim(28)
	st := mustConfigure(t, s, 17, Output, PullNone, 1)
	wantState(t, st, `{pin 17 mode output value 1 pull none consumer "raspi-mcp" chip gpiochip0 line 17}`)
	wantLevel(t, s, 17, 1)
	st = mustConfigure(t, s, 27, Output, PullDown, 0)
	wantState(t, st, `{pin 27 mode output value 0 pull down consumer "raspi-mcp" chip gpiochip0 line 27}`)
	wantLevel(t, s, 27, 0)
}

func TestSimWriteReadPersist(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	mustConfigure(t, s, 17, Output, PullNone, 0)
	for _, v := range []int{1, 0, 1, 1} {
		if err := s.Write(ctx, 17, v); err != nil {
			t.Fatalf("Write(17, %d): %v", v, err)
		}
		// The value persists across calls: every later look sees it.
		for range 2 {
			if got := mustRead(t, s, 17); got != v {
				t.Fatalf("Read(17) = %d after Write %d", got, v)
			}
		}
		if st := mustState(t, s, 17); st.Value == nil || *st.Value != v {
			t.Fatalf("State(17) = %s after Write %d", show(st), v)
		}
		wantLevel(t, s, 17, v)
	}
	// An output ignores what is wired to it.
	if err := s.SetExternal(17, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, 17); got != 1 {
		t.Errorf("Read(17) = %d with external 0; an output reads its driven value 1", got)
	}
}

func TestSimInputPull(t *testing.T) {
	s := NewSim(28)
	for _, tc := range []struct {
		pull Pull
		want int
	}{{PullUp, 1}, {PullDown, 0}, {PullNone, 0}, {PullUp, 1}} {
		st := mustConfigure(t, s, 4, Input, tc.pull, 0)
		wantState(t, st, fmt.Sprintf(`{pin 4 mode input value %d pull %s consumer "raspi-mcp" chip gpiochip0 line 4}`, tc.want, tc.pull))
		if got := mustRead(t, s, 4); got != tc.want {
			t.Errorf("pull %s: Read = %d, want %d", tc.pull, got, tc.want)
		}
	}
	// Something wired to the pin beats the weak pull, until it lets go.
	if err := s.SetExternal(4, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, 4); got != 0 {
		t.Errorf("pull up, external 0: Read = %d, want 0", got)
	}
	if err := s.SetExternal(4, Floating); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, 4); got != 1 {
		t.Errorf("pull up, floating again: Read = %d, want 1", got)
	}
	if err := s.SetExternal(4, 2); err == nil || !strings.Contains(err.Error(), "gpio: pin 4: value 2") {
		t.Errorf("SetExternal(4, 2) = %v, want a value error naming pin 4", err)
	}
}

func TestSimReadFreeLineIsTransient(t *testing.T) {
	s := NewSim(28)
	if got := mustRead(t, s, 5); got != 0 {
		t.Errorf("free pin 5, no pull, floating: Read = %d, want 0", got)
	}
	if err := s.SetExternal(5, 1); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, s, 5); got != 1 {
		t.Errorf("free pin 5 driven high outside: Read = %d, want 1", got)
	}
	// Read did not keep the line, and a free line shows no value.
	wantState(t, mustState(t, s, 5), `{pin 5 mode input value nil pull none consumer "" chip gpiochip0 line 5}`)
	if err := s.Hold(5, "other"); err != nil {
		t.Errorf("another process cannot take pin 5 after a Read: %v", err)
	}
}

func TestSimBusy(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	if err := s.Hold(22, "pigpiod"); err != nil {
		t.Fatal(err)
	}
	wantState(t, mustState(t, s, 22), `{pin 22 mode input value nil pull none consumer "pigpiod" chip gpiochip0 line 22}`)

	_, cerr := s.Configure(ctx, 22, Output, PullNone, 1)
	_, rerr := s.Read(ctx, 22)
	werr := s.Write(ctx, 22, 1)
	for name, err := range map[string]error{"Configure": cerr, "Read": rerr, "Write": werr} {
		if !errors.Is(err, ErrBusy) {
			t.Errorf("%s on a held line: %v, want ErrBusy", name, err)
			continue
		}
		var be *BusyError
		if !errors.As(err, &be) || be.Consumer != "pigpiod" || be.Pin != 22 {
			t.Errorf("%s: %#v, want a BusyError naming pigpiod on pin 22", name, err)
		}
		if want := `gpio: pin 22: line busy: held by "pigpiod"`; err.Error() != want {
			t.Errorf("%s: message %q, want %q", name, err, want)
		}
	}
	wantLevel(t, s, 22, 0) // nothing was driven

	// A second process cannot take it either, nor one of ours.
	if err := s.Hold(22, "other"); !errors.Is(err, ErrBusy) {
		t.Errorf("Hold by a second consumer: %v, want ErrBusy", err)
	}
	mustConfigure(t, s, 17, Output, PullNone, 0)
	if err := s.Hold(17, "other"); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `"raspi-mcp"`) {
		t.Errorf("Hold of our line: %v, want ErrBusy naming raspi-mcp", err)
	}

	// Once let go, the line is ours to take.
	if err := s.Hold(22, ""); err != nil {
		t.Fatal(err)
	}
	mustConfigure(t, s, 22, Output, PullNone, 1)
	wantLevel(t, s, 22, 1)
}

func TestSimNoSuchPin(t *testing.T) {
	ctx := t.Context()
	s := NewSim(8)
	for _, pin := range []int{-1, 8, 53, 1000} {
		_, serr := s.State(ctx, pin)
		_, cerr := s.Configure(ctx, pin, Output, PullNone, 0)
		_, rerr := s.Read(ctx, pin)
		werr := s.Write(ctx, pin, 0)
		herr := s.Hold(pin, "x")
		xerr := s.SetExternal(pin, 1)
		_, lerr := s.Level(pin)
		for i, err := range []error{serr, cerr, rerr, werr, herr, xerr, lerr} {
			if !errors.Is(err, ErrNoSuchPin) {
				t.Errorf("pin %d, call %d: %v, want ErrNoSuchPin", pin, i, err)
			} else if want := fmt.Sprintf("gpio: pin %d: no such pin: no line named GPIO%d", pin, pin); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("pin %d, call %d: %q, want it to start with %q", pin, i, err, want)
			}
		}
	}
	if s := NewSim(-3); len(s.pins) != 0 {
		t.Errorf("NewSim(-3) has %d pins", len(s.pins))
	}
}

func TestSimWriteNeedsOutput(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	err := s.Write(ctx, 17, 1)
	if !errors.Is(err, ErrNotOutput) || !strings.Contains(err.Error(), "gpio: pin 17: not configured as output") {
		t.Errorf("Write to an unconfigured pin: %v, want ErrNotOutput naming pin 17", err)
	}
	// Write never configures: the pin is still free and undriven.
	wantState(t, mustState(t, s, 17), `{pin 17 mode input value nil pull none consumer "" chip gpiochip0 line 17}`)

	mustConfigure(t, s, 17, Input, PullUp, 0)
	if err := s.Write(ctx, 17, 0); !errors.Is(err, ErrNotOutput) || !strings.Contains(err.Error(), "input") {
		t.Errorf("Write to an input: %v, want ErrNotOutput saying it is an input", err)
	}
	wantLevel(t, s, 17, 1)
}

func TestSimReconfigure(t *testing.T) {
	s := NewSim(28)
	mustConfigure(t, s, 17, Output, PullNone, 1)
	st := mustConfigure(t, s, 17, Input, PullDown, 0)
	wantState(t, st, `{pin 17 mode input value 0 pull down consumer "raspi-mcp" chip gpiochip0 line 17}`)
	st = mustConfigure(t, s, 17, Output, PullNone, 1)
	wantState(t, st, `{pin 17 mode output value 1 pull none consumer "raspi-mcp" chip gpiochip0 line 17}`)
	// Configuring an output again drives its new initial value.
	st = mustConfigure(t, s, 17, Output, PullNone, 0)
	wantState(t, st, `{pin 17 mode output value 0 pull none consumer "raspi-mcp" chip gpiochip0 line 17}`)
}

func TestSimBadArguments(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	for _, tc := range []struct {
		mode    Mode
		pull    Pull
		initial int
		want    string
	}{
		{"pwm", PullNone, 0, `gpio: pin 17: mode "pwm" is not input or output`},
		{"", PullNone, 0, `gpio: pin 17: mode "" is not input or output`},
		{Output, "sideways", 0, `gpio: pin 17: pull "sideways" is not none, up or down`},
		{Output, "", 0, `gpio: pin 17: pull "" is not none, up or down`},
		{Output, PullNone, 2, `gpio: pin 17: value 2 is not 0 or 1`},
		{Input, PullNone, -1, `gpio: pin 17: value -1 is not 0 or 1`},
	} {
		_, err := s.Configure(ctx, 17, tc.mode, tc.pull, tc.initial)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Configure(17, %q, %q, %d) = %v, want %q", tc.mode, tc.pull, tc.initial, err, tc.want)
		}
	}
	mustConfigure(t, s, 17, Output, PullNone, 0)
	if err := s.Write(ctx, 17, 7); err == nil || err.Error() != "gpio: pin 17: value 7 is not 0 or 1" {
		t.Errorf("Write(17, 7) = %v", err)
	}
	wantLevel(t, s, 17, 0)
}

func TestSimCloseReleases(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	mustConfigure(t, s, 17, Output, PullNone, 1)
	mustConfigure(t, s, 4, Input, PullUp, 0)
	if err := s.Hold(5, "other"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Released lines are free inputs again; the pull stays in the hardware.
	wantState(t, mustState(t, s, 17), `{pin 17 mode input value nil pull none consumer "" chip gpiochip0 line 17}`)
	wantLevel(t, s, 17, 0)
	wantState(t, mustState(t, s, 4), `{pin 4 mode input value nil pull up consumer "" chip gpiochip0 line 4}`)
	// Another process's line is not ours to release.
	if st := mustState(t, s, 5); st.Consumer != "other" {
		t.Errorf("Close released another consumer's line: %s", show(st))
	}
	if err := s.Write(ctx, 17, 1); !errors.Is(err, ErrNotOutput) {
		t.Errorf("Write after Close: %v, want ErrNotOutput", err)
	}
	// Still usable, and Close is idempotent.
	mustConfigure(t, s, 17, Output, PullNone, 1)
	wantLevel(t, s, 17, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSimCanceledContext(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Configure(cctx, 17, Output, PullNone, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Configure: %v", err)
	}
	wantLevel(t, s, 17, 0)
	if _, err := s.State(cctx, 17); !errors.Is(err, context.Canceled) {
		t.Errorf("State: %v", err)
	}
	if _, err := s.Read(cctx, 17); !errors.Is(err, context.Canceled) {
		t.Errorf("Read: %v", err)
	}
	if err := s.Write(cctx, 17, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Write: %v", err)
	}
}

func TestSimConcurrent(t *testing.T) {
	ctx := t.Context()
	s := NewSim(28)
	var wg sync.WaitGroup
	for pin := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Configure(ctx, pin, Output, PullNone, 0); err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				if err := s.Write(ctx, pin, i%2); err != nil {
					t.Error(err)
				}
				if _, err := s.State(ctx, pin); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for pin := range 8 {
		wantLevel(t, s, pin, 1)
	}
}

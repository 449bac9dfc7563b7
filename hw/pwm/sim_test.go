package pwm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestSimSetGetDisable(t *testing.T) {
	s := NewSim()
	ctx := t.Context()
	st, err := s.Get(ctx, 18)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 18, Chip: "pwmchip0", Channel: 0})

	st, err = s.Set(ctx, 18, 25000, 40)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 18, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: true, Chip: "pwmchip0", Channel: 0})
	st, _ = s.Get(ctx, 18)
	wantState(t, st, State{Pin: 18, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: true, Chip: "pwmchip0", Channel: 0})

	// GPIO12 shares channel 0; GPIO19 is channel 1, untouched.
	st, _ = s.Get(ctx, 12)
	wantState(t, st, State{Pin: 12, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: true, Chip: "pwmchip0", Channel: 0})
	st, _ = s.Get(ctx, 19)
	wantState(t, st, State{Pin: 19, Chip: "pwmchip0", Channel: 1})

	if err := s.Disable(ctx, 18); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Get(ctx, 18)
	wantState(t, st, State{Pin: 18, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: false, Chip: "pwmchip0", Channel: 0})
	if err := s.Disable(ctx, 19); err != nil { // never set: no-op
		t.Fatal(err)
	}
	st, _ = s.Get(ctx, 19)
	wantState(t, st, State{Pin: 19, Chip: "pwmchip0", Channel: 1})

	st, err = s.Set(ctx, 13, 3, 100.0/3)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 13, FrequencyHz: 3, DutyCyclePercent: 33.333, Enabled: true, Chip: "pwmchip0", Channel: 1})
}

// TestSimMatchesSysfs: the same Set reports the same State from both.
func TestSimMatchesSysfs(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	s := NewSim()
	for _, tc := range []struct {
		pin        int
		freq, duty float64
	}{{18, 1, 0}, {18, 50000, 100}, {19, 7, 12.345}, {12, 333, 66.6}, {13, 49999.5, 0.01}} {
		want, err := f.s.Set(t.Context(), tc.pin, tc.freq, tc.duty)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Set(t.Context(), tc.pin, tc.freq, tc.duty)
		if err != nil || got != want {
			t.Errorf("Set(%d, %v, %v): sim %+v, %v; sysfs %+v", tc.pin, tc.freq, tc.duty, got, err, want)
		}
	}
}

func TestSimErrors(t *testing.T) {
	s := NewSim()
	ctx := t.Context()
	_, serr := s.Set(ctx, 17, 1000, 50)
	_, gerr := s.Get(ctx, 17)
	derr := s.Disable(ctx, 17)
	for i, err := range []error{serr, gerr, derr} {
		if !errors.Is(err, ErrNotPWMPin) || !strings.HasPrefix(err.Error(), "pwm: pin 17: no hardware PWM channel") {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if _, err := s.Set(ctx, 18, 0, 50); err == nil || err.Error() != "pwm: pin 18: frequency 0 Hz is outside 1..50000" {
		t.Errorf("Set(18, 0, 50) = %v", err)
	}
	if _, err := s.Set(ctx, 18, 100, 101); err == nil || err.Error() != "pwm: pin 18: duty cycle 101% is outside 0..100" {
		t.Errorf("Set(18, 100, 101) = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, serr = s.Set(cctx, 18, 1000, 50)
	_, gerr = s.Get(cctx, 18)
	derr = s.Disable(cctx, 18)
	for i, err := range []error{serr, gerr, derr} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled, call %d: %v", i, err)
		}
	}
	if st, _ := s.Get(ctx, 18); st.Enabled {
		t.Errorf("a failed Set changed the channel: %+v", st)
	}
}

func TestSimConcurrent(t *testing.T) {
	s := NewSim()
	var wg sync.WaitGroup
	for _, pin := range Pins() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := s.Set(t.Context(), pin, float64(100+i), 50); err != nil {
					t.Error(err)
				}
				if _, err := s.Get(t.Context(), pin); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

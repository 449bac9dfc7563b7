package gpio

import (
	"context"
	"sync"
)

// Floating is the SetExternal level of an input nothing drives: it then
// reads its pull (up 1, down or none 0).
const Floating = -1

// Sim is a Controller over simulated pins 0..n-1 of one chip, "gpiochip0",
// with line offset = pin like the Pi 4's header. It touches no hardware and
// follows the Linux contract, so agent code tested against it behaves the
// same on a board:
//
//   - each pin has a direction, a pull and, while output, a driven value;
//   - an input reads what drives it from outside (SetExternal), else its
//     pull: up 1, down 0, none 0;
//   - Hold makes "another process" hold a line, so ErrBusy can be shown;
//   - a line this Sim releases (Close) turns back into an input, as
//     pinctrl-bcm2835 does, so its level falls back to pull or external.
//
// Unlike Linux, Sim reports the pull of free lines (the kernel forgets it).
type Sim struct {
	mu   sync.Mutex
	pins []simPin
}

type simPin struct {
	mode     Mode
	pull     Pull
	value    int    // driven value while output
	external int    // Floating, 0 or 1
	holder   string // consumer holding the line, "" if free
	ours     bool   // holder is this Sim
}

var _ Controller = (*Sim)(nil)

// NewSim returns pins 0..pins-1, all free inputs with no pull and nothing
// wired to them.
func NewSim(pins int) *Sim {
	s := &Sim{pins: make([]simPin, max(pins, 0))}
	for i := range s.pins {
		s.pins[i] = simPin{mode: Input, pull: PullNone, external: Floating}
	}
	return s
}

// State reports the pin; Value is set only for lines this Sim holds.
func (s *Sim) State(ctx context.Context, pin int) (PinState, error) {
	if err := ctxErr(ctx, pin, "state"); err != nil {
		return PinState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return PinState{}, err
	}
	return p.state(pin), nil
}

// Configure takes the line and sets it up; an output starts at initial.
func (s *Sim) Configure(ctx context.Context, pin int, mode Mode, pull Pull, initial int) (PinState, error) {
	if err := checkConfig(pin, mode, pull, initial); err != nil {
		return PinState{}, err
	}
	if err := ctxErr(ctx, pin, "configure"); err != nil {
		return PinState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return PinState{}, err
	}
	if err := p.busy(pin); err != nil {
		return PinState{}, err
	}
	p.mode, p.pull, p.holder, p.ours = mode, pull, DefaultConsumer, true
	if mode == Output {
		p.value = initial
	}
	return p.state(pin), nil
}

// Read returns the level. A free line is briefly taken as input, which
// makes it an input, as on Linux.
func (s *Sim) Read(ctx context.Context, pin int) (int, error) {
	if err := ctxErr(ctx, pin, "read"); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return 0, err
	}
	if err := p.busy(pin); err != nil {
		return 0, err
	}
	if !p.ours {
		p.mode = Input
	}
	return p.level(), nil
}

// Write drives a line this Sim configured as output.
func (s *Sim) Write(ctx context.Context, pin int, value int) error {
	if err := checkValue(pin, value); err != nil {
		return err
	}
	if err := ctxErr(ctx, pin, "write"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return err
	}
	if err := p.busy(pin); err != nil {
		return err
	}
	switch {
	case !p.ours:
		return notOutput(pin, "it is not configured")
	case p.mode != Output:
		return notOutput(pin, "it is configured as input")
	}
	p.value = value
	return nil
}

// Close releases every line this Sim holds; they become inputs again. Lines
// held through Hold stay held. The Sim stays usable.
func (s *Sim) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.pins {
		if p := &s.pins[i]; p.ours {
			p.holder, p.ours, p.mode = "", false, Input
		}
	}
	return nil
}

// Hold simulates another process taking the line under consumer, or, with
// consumer "", letting it go. A line this Sim holds, or another consumer
// holds, is ErrBusy.
func (s *Sim) Hold(pin int, consumer string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return err
	}
	if p.ours || (p.holder != "" && consumer != "" && p.holder != consumer) {
		return &BusyError{Pin: pin, Consumer: p.holder}
	}
	p.holder = consumer
	return nil
}

// SetExternal sets what drives the pin from outside: 0, 1, or Floating for
// nothing. It decides what an input reads; an output ignores it.
func (s *Sim) SetExternal(pin, v int) error {
	if v != Floating {
		if err := checkValue(pin, v); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return err
	}
	p.external = v
	return nil
}

// Level returns the pin's electrical level whoever holds it, for demos and
// tests that need to see what an LED on the pin would show.
func (s *Sim) Level(pin int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.pin(pin)
	if err != nil {
		return 0, err
	}
	return p.level(), nil
}

// pin returns the pin's record. s.mu is held.
func (s *Sim) pin(pin int) (*simPin, error) {
	if pin < 0 || pin >= len(s.pins) {
		return nil, noSuchPin(pin)
	}
	return &s.pins[pin], nil
}

// state is the pin as State reports it: a value only for our own lines.
func (p *simPin) state(pin int) PinState {
	st := PinState{Pin: pin, Mode: string(p.mode), Pull: string(p.pull), Consumer: p.holder, Chip: "gpiochip0", Line: pin}
	if p.ours {
		st.Value = intPtr(p.level())
	}
	return st
}

// busy is the BusyError of a line someone else holds, else nil.
func (p *simPin) busy(pin int) error {
	if p.holder != "" && !p.ours {
		return &BusyError{Pin: pin, Consumer: p.holder}
	}
	return nil
}

// level is what the pin reads: the driven value of an output, else what is
// wired to it, else its pull.
func (p *simPin) level() int {
	switch {
	case p.mode == Output:
		return p.value
	case p.external != Floating:
		return p.external
	case p.pull == PullUp:
		return 1
	}
	return 0
}

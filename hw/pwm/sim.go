package pwm

import (
	"context"
	"sync"
)

// Sim is a Controller with no hardware, shaped like a Pi 4 with the
// pwm-2chan overlay: one "pwmchip0" (bcm2835-pwm) whose channel 0 reaches
// GPIO12 and GPIO18 and channel 1 GPIO13 and GPIO19. Pins on one channel
// share its setting, as on the board. Settings are quantised to whole
// nanoseconds like Sysfs, so both report the same State for the same Set.
type Sim struct {
	mu       sync.Mutex
	channels map[int]simChannel // by channel number
}

type simChannel struct {
	period, duty int64 // ns
	enabled      bool
}

var _ Controller = (*Sim)(nil)

// NewSim returns a Sim with both channels never set.
func NewSim() *Sim { return &Sim{channels: map[int]simChannel{}} }

// simChip is the controller Sim imitates.
func simChip() controller { return controllers()[0] }

// Set programs and enables the pin's channel.
func (s *Sim) Set(ctx context.Context, pin int, freqHz, dutyPercent float64) (State, error) {
	if err := checkSet(pin, freqHz, dutyPercent); err != nil {
		return State{}, err
	}
	if err := ctxErr(ctx, pin, "set"); err != nil {
		return State{}, err
	}
	ch, ok := simChip().channels[pin]
	if !ok { // a PWM pin of another board only
		return State{}, notPWMPin(pin)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	period, duty := nanos(freqHz, dutyPercent)
	s.channels[ch] = simChannel{period: period, duty: duty, enabled: true}
	return stateOf(pin, "pwmchip0", ch, period, duty, true), nil
}

// Get reads the pin's channel; one never set is disabled with no frequency.
func (s *Sim) Get(ctx context.Context, pin int) (State, error) {
	ch, err := s.channel(ctx, pin, "get")
	if err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[ch]
	return stateOf(pin, "pwmchip0", ch, c.period, c.duty, c.enabled), nil
}

// Disable stops the pin's channel, keeping its period and duty.
func (s *Sim) Disable(ctx context.Context, pin int) error {
	ch, err := s.channel(ctx, pin, "disable")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.channels[ch]; ok {
		c.enabled = false
		s.channels[ch] = c
	}
	return nil
}

func (s *Sim) channel(ctx context.Context, pin int, op string) (int, error) {
	ch, ok := simChip().channels[pin]
	if !ok {
		return 0, notPWMPin(pin)
	}
	return ch, ctxErr(ctx, pin, op)
}

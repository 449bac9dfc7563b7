package gpio

import (
	"fmt"
	"sync"
	"time"
)

// SimButtons opens simulated buttons on a board of n pins (0..n-1), as
// the simulated board's helper holds its button. It keeps the button last
// opened, so a "finger" (Press, the sim's button.press) reaches the one the
// helper holds, across a reopen after a reload.
type SimButtons struct {
	pins int

	mu      sync.Mutex
	cur     *SimButton
	atStart bool // the level the next button opens with
}

// StartPressed makes the next button opened read pressed from the start,
// as a stuck button does.
func (o *SimButtons) StartPressed(pressed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.atStart = pressed
}

// NewSimButtons returns an opener for a board of pins pins.
func NewSimButtons(pins int) *SimButtons { return &SimButtons{pins: pins} }

var _ ButtonOpener = (*SimButtons)(nil)

// OpenButton wires a simulated button; a pin or LED off the board is
// ErrNoSuchPin, as a wrong pin is on Linux.
func (o *SimButtons) OpenButton(cfg ButtonConfig) (Button, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	for _, p := range []int{cfg.Pin, cfg.LED} {
		if p >= o.pins {
			return nil, noSuchPin(p)
		}
	}
	o.mu.Lock()
	b := &SimButton{cfg: cfg, edges: make(chan Edge, edgeBuffer), pressed: o.atStart}
	o.cur = b
	o.mu.Unlock()
	return b, nil
}

// Current is the button last opened and not closed, or nil.
func (o *SimButtons) Current() *SimButton {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur == nil || o.cur.isClosed() {
		return nil
	}
	return o.cur
}

// SimButton is a simulated button and LED. Press and SetLevel are the
// owner's finger; LED reports what the LED shows.
type SimButton struct {
	cfg   ButtonConfig
	edges chan Edge

	mu      sync.Mutex
	pressed bool
	led     bool
	blinks  int // times the LED was turned on
	// shown is the LED's latest changes, oldest first, so a test reads
	// the pattern it showed rather than sampling it in time.
	shown  []LEDChange
	closed bool
}

// LEDChange is the simulated LED turning on or off.
type LEDChange struct {
	On bool
	At time.Time
}

// maxShown bounds SimButton's LED history.
const maxShown = 256

var _ Button = (*SimButton)(nil)

// Config is how the button was opened.
func (b *SimButton) Config() ButtonConfig { return b.cfg }

// Edges delivers the finger's edges.
func (b *SimButton) Edges() <-chan Edge { return b.edges }

// Pressed is the finger's level.
func (b *SimButton) Pressed() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false, fmt.Errorf("gpio: button pin %d: closed", b.cfg.Pin)
	}
	return b.pressed, nil
}

// SetLED records the LED's state.
func (b *SimButton) SetLED(on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cfg.LED < 0 || b.closed {
		return nil
	}
	if on && !b.led {
		b.blinks++
	}
	if on != b.led {
		if len(b.shown) == maxShown {
			b.shown = append(b.shown[:0], b.shown[1:]...)
		}
		b.shown = append(b.shown, LEDChange{On: on, At: time.Now()})
	}
	b.led = on
	return nil
}

// Shown is the LED's latest changes, oldest first.
func (b *SimButton) Shown() []LEDChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]LEDChange(nil), b.shown...)
}

// LED reports whether the LED is on and how many times it was turned on.
func (b *SimButton) LED() (on bool, turnedOn int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.led, b.blinks
}

// Close ends the edges.
func (b *SimButton) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.edges)
	}
	return nil
}

func (b *SimButton) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// SetLevel moves the finger: pressed or released, now. An unchanged
// level makes no edge, as on a real line.
func (b *SimButton) SetLevel(pressed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.pressed == pressed {
		return
	}
	b.pressed = pressed
	select {
	case b.edges <- Edge{Time: time.Now(), Pressed: pressed}:
	default: // a reader that fell behind loses edges, as on Linux
	}
}

// Press holds the button down for hold, then lets go. It takes hold in
// real time, so whoever waits on the edges sees a press as from a finger.
func (b *SimButton) Press(hold time.Duration) {
	b.SetLevel(true)
	time.Sleep(hold)
	b.SetLevel(false)
}

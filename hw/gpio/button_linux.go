//go:build linux

package gpio

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warthog618/go-gpiocdev"
	"golang.org/x/sys/unix"
)

// ButtonConsumer is the label the button's lines carry in the kernel, so
// `gpioinfo` shows who holds them.
const ButtonConsumer = "raspi-mcp-button"

// LinuxButtons opens the button on the GPIO character device. Lines are
// found by name (GPIO<n>), as Linux finds them.
type LinuxButtons struct{}

var _ ButtonOpener = LinuxButtons{}

// OpenButton requests the input with both edges and the kernel's debounce
// (gpiolib debounces in software where the chip cannot, from Linux 5.10);
// a kernel that refuses debounce gets the request without it, and
// Classify's own debounce does the work. The LED is requested as an output,
// off.
func (LinuxButtons) OpenButton(cfg ButtonConfig) (Button, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	chips, err := cdev{}.scan()
	if err != nil {
		return nil, fmt.Errorf("gpio: button pin %d: %w", cfg.Pin, err)
	}
	lines := newLineMap(chips)
	ref, ok := lines.lookup(cfg.Pin)
	if !ok {
		return nil, noSuchPin(cfg.Pin)
	}
	b := &linuxButton{cfg: cfg, edges: make(chan Edge, edgeBuffer)}
	// Kernel timestamps are CLOCK_MONOTONIC; an edge's Time is base plus
	// its distance from mono0, which keeps Go's monotonic reading, so a
	// step of the wall clock mid-press changes no verdict.
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return nil, fmt.Errorf("gpio: button pin %d: clock: %w", cfg.Pin, err)
	}
	b.base, b.mono0 = time.Now(), time.Duration(ts.Nano())
	opts := []gpiocdev.LineReqOption{gpiocdev.WithConsumer(ButtonConsumer), gpiocdev.AsInput,
		gpiocdev.WithBothEdges, gpiocdev.WithMonotonicEventClock, gpiocdev.WithEventHandler(b.event)}
	switch cfg.Pull {
	case PullUp:
		opts = append(opts, gpiocdev.WithPullUp)
	case PullDown:
		opts = append(opts, gpiocdev.WithPullDown)
	default:
		opts = append(opts, gpiocdev.WithBiasDisabled)
	}
	if cfg.ActiveLow {
		opts = append(opts, gpiocdev.AsActiveLow)
	}
	l, err := gpiocdev.RequestLine(ref.Chip, ref.Offset, append(opts, gpiocdev.WithDebounce(cfg.Debounce))...)
	if err != nil && !errors.Is(err, unix.EBUSY) {
		l, err = gpiocdev.RequestLine(ref.Chip, ref.Offset, opts...)
	}
	if err != nil {
		return nil, buttonLineErr(cfg.Pin, ref, "button", err)
	}
	b.in = l
	if cfg.LED >= 0 {
		lref, ok := lines.lookup(cfg.LED)
		if !ok {
			l.Close()
			return nil, noSuchPin(cfg.LED)
		}
		led, err := gpiocdev.RequestLine(lref.Chip, lref.Offset, gpiocdev.WithConsumer(ButtonConsumer), gpiocdev.AsOutput(0))
		if err != nil {
			l.Close()
			return nil, buttonLineErr(cfg.LED, lref, "button LED", err)
		}
		b.led = led
	}
	return b, nil
}

func buttonLineErr(pin int, ref lineRef, what string, err error) error {
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("gpio: %s pin %d (%s line %d): %w", what, pin, ref.Chip, ref.Offset, &BusyError{Pin: pin})
	}
	return fmt.Errorf("gpio: %s pin %d (%s line %d): %w", what, pin, ref.Chip, ref.Offset, err)
}

// linuxButton holds the two lines.
type linuxButton struct {
	cfg     ButtonConfig
	in, led *gpiocdev.Line
	base    time.Time
	mono0   time.Duration
	edges   chan Edge
	mu      sync.Mutex // guards closed against the event handler's send
	closed  bool
}

// event runs on go-gpiocdev's watcher goroutine: it must not block.
func (b *linuxButton) event(ev gpiocdev.LineEvent) {
	e := Edge{Time: b.base.Add(ev.Timestamp - b.mono0), Pressed: ev.Type == gpiocdev.LineEventRisingEdge}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	select {
	case b.edges <- e:
	default:
	}
}

func (b *linuxButton) Edges() <-chan Edge { return b.edges }

func (b *linuxButton) Pressed() (bool, error) {
	v, err := b.in.Value() // logical: AsActiveLow applied by the kernel
	if err != nil {
		return false, fmt.Errorf("gpio: button pin %d: %w", b.cfg.Pin, err)
	}
	return v == 1, nil
}

func (b *linuxButton) SetLED(on bool) error {
	if b.led == nil {
		return nil
	}
	v := 0
	if on {
		v = 1
	}
	if err := b.led.SetValue(v); err != nil {
		return fmt.Errorf("gpio: button LED pin %d: %w", b.cfg.LED, err)
	}
	return nil
}

func (b *linuxButton) Close() error {
	var errs []error
	errs = append(errs, b.in.Close())
	if b.led != nil {
		b.led.SetValue(0)
		errs = append(errs, b.led.Close())
	}
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.edges)
	}
	b.mu.Unlock()
	return errors.Join(errs...)
}

package gpio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// lineInfo is what the kernel reports about a line without requesting it.
type lineInfo struct {
	Used     bool
	Consumer string
	Mode     string // "input", "output" or "unknown"
	Pull     string // "none", "up", "down" or "unknown"
}

// lineConfig is a request or a reconfiguration. Pull "" leaves the bias as
// it is, which is what a transient Read needs: on gpio-sim and on a Pi the
// pull set from outside must keep deciding what a floating input reads.
type lineConfig struct {
	Mode    Mode
	Pull    Pull
	Initial int // output only
}

// backend is the kernel as Linux needs it. It is the only seam between Linux
// and the GPIO character device (cdev_linux.go, the one file that calls
// go-gpiocdev), so everything here is tested with a fake kernel.
type backend interface {
	// scan lists every gpiochip with its line names, chips in natural
	// order (gpiochip2 before gpiochip10).
	scan() ([]chipLines, error)
	// info reads one line's public information.
	info(ref lineRef) (lineInfo, error)
	// request takes a line for consumer; an error matching ErrBusy means
	// someone else holds it.
	request(ref lineRef, consumer string, cfg lineConfig) (requestedLine, error)
}

// requestedLine is a line this process holds.
type requestedLine interface {
	value() (int, error)
	setValue(v int) error
	reconfigure(cfg lineConfig) error
	close() error
}

// maxConsumer is the longest label the kernel keeps (GPIO_MAX_NAME_SIZE
// less the NUL); a longer one would be cut and no longer match our own.
const maxConsumer = 31

// Linux is the Controller over the GPIO character device. It holds every
// line it configured in a map, because a released line is the kernel's to
// reset: an output only keeps its level while its request is open.
type Linux struct {
	consumer string
	be       backend

	mu    sync.Mutex
	lines *lineMap
	held  map[int]*heldLine // by pin
}

// heldLine is a line Linux holds and how it configured it.
type heldLine struct {
	ref   lineRef
	line  requestedLine
	mode  Mode
	pull  Pull
	value int // the driven value, for outputs
}

var _ Controller = (*Linux)(nil)

func newLinux(consumer string, be backend) (*Linux, error) {
	if consumer == "" || len(consumer) > maxConsumer {
		return nil, fmt.Errorf("gpio: consumer label %q must be 1..%d bytes", consumer, maxConsumer)
	}
	chips, err := be.scan()
	if err != nil {
		return nil, err
	}
	return &Linux{consumer: consumer, be: be, lines: newLineMap(chips), held: map[int]*heldLine{}}, nil
}

// Consumer returns the label this controller's requests carry.
func (l *Linux) Consumer() string { return l.consumer }

// State reports the pin without requesting its line; see Controller.State.
func (l *Linux) State(ctx context.Context, pin int) (PinState, error) {
	if err := ctxErr(ctx, pin, "state"); err != nil {
		return PinState{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[pin]; ok {
		return l.heldState(pin, h)
	}
	ref, err := l.resolve(pin)
	if err != nil {
		return PinState{}, err
	}
	info, err := l.be.info(ref)
	if err != nil {
		return PinState{}, fmt.Errorf("gpio: pin %d: line info of %s line %d: %w", pin, ref.Chip, ref.Offset, err)
	}
	st := PinState{Pin: pin, Mode: info.Mode, Pull: info.Pull, Chip: ref.Chip, Line: ref.Offset}
	if info.Used {
		st.Consumer = info.Consumer
		if info.Consumer == "" {
			// In use with no label: pinctrl has the pin for another function.
			st.Mode = ModeAlt
		}
	}
	return st, nil
}

// Configure takes (or reconfigures) the line and holds it until Close.
func (l *Linux) Configure(ctx context.Context, pin int, mode Mode, pull Pull, initial int) (PinState, error) {
	if err := checkConfig(pin, mode, pull, initial); err != nil {
		return PinState{}, err
	}
	if err := ctxErr(ctx, pin, "configure"); err != nil {
		return PinState{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := lineConfig{Mode: mode, Pull: pull, Initial: initial}
	if h, ok := l.held[pin]; ok {
		// Reconfiguring in place never lets go of the line: no glitch, and
		// no window for another process to take it.
		if err := h.line.reconfigure(cfg); err != nil {
			return PinState{}, fmt.Errorf("gpio: pin %d: reconfigure %s line %d as %s, pull %s: %w", pin, h.ref.Chip, h.ref.Offset, mode, pull, err)
		}
		h.mode, h.pull, h.value = mode, pull, initial
		return l.heldState(pin, h)
	}
	ref, err := l.resolve(pin)
	if err != nil {
		return PinState{}, err
	}
	line, err := l.request(pin, ref, cfg)
	if err != nil {
		return PinState{}, err
	}
	h := &heldLine{ref: ref, line: line, mode: mode, pull: pull, value: initial}
	l.held[pin] = h
	return l.heldState(pin, h)
}

// Read returns the level; see Controller.Read.
func (l *Linux) Read(ctx context.Context, pin int) (int, error) {
	if err := ctxErr(ctx, pin, "read"); err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[pin]; ok {
		if h.mode == Output {
			return h.value, nil
		}
		v, err := h.line.value()
		if err != nil {
			return 0, fmt.Errorf("gpio: pin %d: read %s line %d: %w", pin, h.ref.Chip, h.ref.Offset, err)
		}
		return v, nil
	}
	ref, err := l.resolve(pin)
	if err != nil {
		return 0, err
	}
	line, err := l.request(pin, ref, lineConfig{Mode: Input})
	if err != nil {
		return 0, err
	}
	v, err := line.value()
	cerr := line.close()
	if err != nil {
		return 0, fmt.Errorf("gpio: pin %d: read %s line %d: %w", pin, ref.Chip, ref.Offset, err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("gpio: pin %d: release %s line %d: %w", pin, ref.Chip, ref.Offset, cerr)
	}
	return v, nil
}

// Write drives a line this controller configured as output.
func (l *Linux) Write(ctx context.Context, pin int, value int) error {
	if err := checkValue(pin, value); err != nil {
		return err
	}
	if err := ctxErr(ctx, pin, "write"); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.held[pin]; ok {
		if h.mode != Output {
			return notOutput(pin, "it is configured as input")
		}
		if err := h.line.setValue(value); err != nil {
			return fmt.Errorf("gpio: pin %d: write %d to %s line %d: %w", pin, value, h.ref.Chip, h.ref.Offset, err)
		}
		h.value = value
		return nil
	}
	ref, err := l.resolve(pin)
	if err != nil {
		return err
	}
	info, err := l.be.info(ref)
	if err != nil {
		return fmt.Errorf("gpio: pin %d: line info of %s line %d: %w", pin, ref.Chip, ref.Offset, err)
	}
	if info.Used {
		return &BusyError{Pin: pin, Consumer: info.Consumer}
	}
	return notOutput(pin, "it is not configured")
}

// Close releases every line this controller holds, in pin order.
func (l *Linux) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, pin := range slices.Sorted(maps.Keys(l.held)) {
		h := l.held[pin]
		if err := h.line.close(); err != nil {
			errs = append(errs, fmt.Errorf("gpio: pin %d: release %s line %d: %w", pin, h.ref.Chip, h.ref.Offset, err))
		}
		delete(l.held, pin)
	}
	return errors.Join(errs...)
}

// heldState is the state of a line this controller holds. l.mu is held.
func (l *Linux) heldState(pin int, h *heldLine) (PinState, error) {
	v := h.value
	if h.mode == Input {
		var err error
		if v, err = h.line.value(); err != nil {
			return PinState{}, fmt.Errorf("gpio: pin %d: read %s line %d: %w", pin, h.ref.Chip, h.ref.Offset, err)
		}
	}
	return PinState{Pin: pin, Mode: string(h.mode), Value: intPtr(v), Pull: string(h.pull),
		Consumer: l.consumer, Chip: h.ref.Chip, Line: h.ref.Offset}, nil
}

// resolve finds the line of pin. On a miss it scans again once, since a
// chip may have appeared since (gpio-sim created, overlay loaded). l.mu is
// held.
func (l *Linux) resolve(pin int) (lineRef, error) {
	if ref, ok := l.lines.lookup(pin); ok {
		return ref, nil
	}
	chips, err := l.be.scan()
	if err != nil {
		return lineRef{}, fmt.Errorf("gpio: pin %d: %w", pin, err)
	}
	l.lines = newLineMap(chips)
	if ref, ok := l.lines.lookup(pin); ok {
		return ref, nil
	}
	return lineRef{}, noSuchPin(pin)
}

// request takes a line, turning the kernel's EBUSY into a BusyError that
// names the holder. l.mu is held.
func (l *Linux) request(pin int, ref lineRef, cfg lineConfig) (requestedLine, error) {
	line, err := l.be.request(ref, l.consumer, cfg)
	if err == nil {
		return line, nil
	}
	if errors.Is(err, ErrBusy) {
		info, ierr := l.be.info(ref)
		if ierr != nil {
			return nil, fmt.Errorf("gpio: pin %d: %w: %s line %d (holder unknown: %v)", pin, ErrBusy, ref.Chip, ref.Offset, ierr)
		}
		return nil, &BusyError{Pin: pin, Consumer: info.Consumer}
	}
	return nil, fmt.Errorf("gpio: pin %d: request %s line %d as %s: %w", pin, ref.Chip, ref.Offset, cfg.Mode, err)
}

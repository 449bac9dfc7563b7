// Package gpio reads and drives the Raspberry Pi's GPIO header pins.
//
// Controller is the tiny interface the root helper drives. Linux is the real
// implementation, over the kernel's GPIO character device (uAPI v2, through
// go-gpiocdev); Sim is a side-effect-free stand-in for demos and tests. Both
// follow the same contract, so code tested against Sim behaves the same on a
// board:
//
//   - Pins are BCM numbers. Linux finds pin n as the line named "GPIO<n>" on
//     whichever gpiochip has it, because the header is on pinctrl-bcm2835 or
//     pinctrl-bcm2711 (gpiochip0) up to the Pi 4 but on pinctrl-rp1 on the
//     Pi 5, and the kernel's gpio-sim names its lines the same way.
//   - State never takes a line: it reports what the kernel says (mode, pull,
//     who holds it) and a value only for lines this controller holds.
//   - Configure takes the line and keeps holding it, so an output keeps its
//     level between calls. The kernel gives a line to one requester at a
//     time, so another process's line is ErrBusy, named in the error.
//   - Read of a line this controller does not hold behaves like gpioget:
//     request as input (pull left alone), sample, release.
//   - Write needs a line configured as output by this controller first;
//     there is no configure-on-write (see Controller.Write).
//   - Close releases every line.
package gpio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Mode is the direction a pin is configured for.
type Mode string

// The modes Configure accepts.
const (
	Input  Mode = "input"
	Output Mode = "output"
)

// Pull is the internal bias resistor of a pin.
type Pull string

// The pulls Configure accepts. PullNone disables the bias explicitly, so a
// pull left behind by someone else does not linger.
const (
	PullNone Pull = "none"
	PullUp   Pull = "up"
	PullDown Pull = "down"
)

// Values of PinState.Mode and PinState.Pull beyond the configurable ones.
const (
	// ModeAlt is a line the kernel reports in use with no consumer: the pin
	// is muxed to another function (I2C, SPI, UART, PWM...) by a driver.
	ModeAlt = "alt"
	// Unknown is a mode or pull the kernel does not report. The kernel
	// forgets a line's pull when it is released, so a free line's pull is
	// always unknown on Linux even though the resistor stays as it was.
	Unknown = "unknown"
)

// DefaultConsumer is the label this project's requests carry in the kernel
// (what `gpioinfo` shows), and the one Sim uses for its own lines.
const DefaultConsumer = "raspi-mcp"

// PinState is one pin as the kernel sees it.
type PinState struct {
	Pin      int
	Mode     string // "input", "output", "alt", "unknown"
	Value    *int   // 0/1; nil unless this controller holds the line
	Pull     string // "none", "up", "down", "unknown"
	Consumer string // who holds the line ("" if free), e.g. "raspi-mcp" or another process's label
	Chip     string // e.g. "gpiochip0"
	Line     int    // offset on that chip
}

// Controller operates GPIO pins by BCM number.
type Controller interface {
	// State reads a pin without taking it. Value is set only when this
	// controller holds the line: sampling a free line means requesting it,
	// and releasing a request can reset the pin to input (mainline
	// pinctrl-bcm2835 does), so a look must not risk changing what it
	// looks at.
	State(ctx context.Context, pin int) (PinState, error)

	// Configure takes the line (or reconfigures it if already held) and
	// keeps holding it until Close: an output keeps driving initial (0/1)
	// between calls. initial is ignored for inputs but must still be 0 or 1.
	Configure(ctx context.Context, pin int, mode Mode, pull Pull, initial int) (PinState, error)

	// Read returns the pin's level. A held input is sampled; a held output
	// returns the value it drives. A free line is requested as input with
	// its pull left alone, sampled and released at once, like gpioget: a
	// read should not claim a pin another program may want next.
	Read(ctx context.Context, pin int) (int, error)

	// Write drives a line this controller configured as output; anything
	// else is ErrNotOutput (or ErrBusy if another process holds it). There
	// is deliberately no configure-on-write: driving a pin wired as an input
	// of something else can short it, so turning a pin into an output is
	// always an explicit Configure.
	Write(ctx context.Context, pin int, value int) error

	// Close releases every line this controller holds. The controller
	// stays usable; a later Configure takes lines afresh.
	Close() error
}

// Errors, matched with errors.Is; the messages returned name the pin.
var (
	// ErrBusy is a line held by another consumer. The error is a *BusyError
	// naming that consumer.
	ErrBusy = errors.New("line busy")
	// ErrNoSuchPin is a pin with no line named GPIO<n> on any gpiochip.
	ErrNoSuchPin = errors.New("no such pin")
	// ErrNotOutput is a Write to a line not configured as output by this
	// controller.
	ErrNotOutput = errors.New("not configured as output")
)

// BusyError is a line held by someone else; errors.Is(err, ErrBusy) holds.
type BusyError struct {
	Pin      int
	Consumer string // "" when the kernel itself holds the pin for another function
}

func (e *BusyError) Error() string {
	who := strconv.Quote(e.Consumer)
	if e.Consumer == "" {
		who = "the kernel (pin muxed to another function such as I2C, SPI, UART or PWM)"
	}
	return fmt.Sprintf("gpio: pin %d: %v: held by %s", e.Pin, ErrBusy, who)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

func noSuchPin(pin int) error {
	return fmt.Errorf("gpio: pin %d: %w: no line named GPIO%d on any gpiochip", pin, ErrNoSuchPin, pin)
}

func notOutput(pin int, why string) error {
	return fmt.Errorf("gpio: pin %d: %w (%s); configure it as output first", pin, ErrNotOutput, why)
}

// checkConfig validates Configure's arguments before anything is touched.
func checkConfig(pin int, mode Mode, pull Pull, initial int) error {
	if pin < 0 {
		return noSuchPin(pin)
	}
	if mode != Input && mode != Output {
		return fmt.Errorf("gpio: pin %d: mode %q is not input or output", pin, mode)
	}
	if pull != PullNone && pull != PullUp && pull != PullDown {
		return fmt.Errorf("gpio: pin %d: pull %q is not none, up or down", pin, pull)
	}
	return checkValue(pin, initial)
}

func checkValue(pin, v int) error {
	if v != 0 && v != 1 {
		return fmt.Errorf("gpio: pin %d: value %d is not 0 or 1", pin, v)
	}
	return nil
}

func ctxErr(ctx context.Context, pin int, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("gpio: pin %d: %s: %w", pin, op, err)
	}
	return nil
}

func intPtr(v int) *int { return &v }

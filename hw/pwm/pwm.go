// Package pwm drives the Raspberry Pi's hardware PWM.
//
// Controller is the tiny interface the root helper drives. Sysfs is the real
// implementation, over the kernel's PWM class in /sys/class/pwm (rooted
// anywhere, so tests run on fixture trees); Sim is a side-effect-free
// stand-in for demos and tests.
//
// Pins are BCM numbers. Which pwmchip and channel reach a pin is board data,
// encoded in controllers below: the Pi 1-4 PWM block (bcm2835-pwm) has two
// channels, each reaching two header pins, and the Pi 5's RP1 PWM0 has four.
// Two pins on one channel (12 and 18 on a Pi 4) share its frequency and
// duty cycle: which one the signal comes out on is the pin mux, set by the
// device tree overlay, which this package does not change.
package pwm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// State is the effective PWM setting of a pin.
type State struct {
	Pin              int
	FrequencyHz      float64 // 1e9 / the period in ns, to 0.001 Hz; 0 when never set
	DutyCyclePercent float64 // duty / period * 100, to 0.001 %
	Enabled          bool
	Chip             string // e.g. "pwmchip0"
	Channel          int
}

// Controller sets hardware PWM on a pin.
type Controller interface {
	// Set programs freqHz (1..50000) and dutyPercent (0..100) on the pin's
	// channel and enables it. Period and duty are whole nanoseconds, so the
	// State returned is what the hardware was given.
	Set(ctx context.Context, pin int, freqHz, dutyPercent float64) (State, error)
	// Get reads the pin's channel without changing it.
	Get(ctx context.Context, pin int) (State, error)
	// Disable stops the pin's channel, keeping its period and duty so Get
	// still shows them. Disabling a channel never set is a no-op.
	Disable(ctx context.Context, pin int) error
}

// Frequency bounds of Set: 50 kHz is far above what fans, servos and LEDs
// need and well within both the bcm2835 and RP1 clocks' resolution.
const (
	MinFrequencyHz = 1
	MaxFrequencyHz = 50000
)

// EnableHint is the config.txt line that makes the PWM controller appear on
// GPIO18 and GPIO19 (both channels, alt5 / RP1 a3). It works on the Pi 5
// too, where the firmware maps the legacy function numbers to RP1's.
const EnableHint = "dtoverlay=pwm-2chan,pin=18,func=2,pin2=19,func2=2"

// Errors, matched with errors.Is; the messages returned name the pin.
var (
	// ErrNoPWM is no pwmchip reaching the pin: the PWM controller is off
	// until an overlay enables it. The message carries the fix.
	ErrNoPWM = errors.New("no PWM controller present: add the line \"" + EnableHint + "\" to /boot/firmware/config.txt and reboot")
	// ErrNotPWMPin is a pin no hardware PWM channel reaches.
	ErrNotPWMPin = errors.New("no hardware PWM channel")
)

// controller is a PWM block this package knows: how to recognise its
// pwmchip in sysfs and which BCM pins its channels reach.
type controller struct {
	compatible string      // device tree compatible of the pwmchip's parent device
	unit       string      // suffix of its device tree unit address, telling apart blocks with one compatible
	channels   map[int]int // BCM pin -> channel
}

// controllers returns the known PWM blocks; a function, not a variable, so
// nothing can change the table.
func controllers() []controller {
	return []controller{
		{
			// Pi 1-4, Zero, CM1-4 (BCM2835/6/7, BCM2711): PWM0 reaches
			// GPIO12 (alt0) and GPIO18 (alt5), PWM1 GPIO13 (alt0) and
			// GPIO19 (alt5). Source: Broadcom "BCM2835 ARM Peripherals",
			// §6.2 alternative function assignments, as listed for the
			// pwm and pwm-2chan overlays in the Raspberry Pi overlays
			// README. Node pwm@7e20c000; the BCM2711's second block,
			// pwm@7e20c800, only reaches GPIO40/41/45 and is left out.
			compatible: "brcm,bcm2835-pwm",
			unit:       "7e20c000",
			channels:   map[int]int{12: 0, 18: 0, 13: 1, 19: 1},
		},
		{
			// Pi 5, CM5 (RP1 PWM0): GPIO12 a0 PWM0_CHAN0, GPIO13 a0
			// PWM0_CHAN1, GPIO18 a3 PWM0_CHAN2, GPIO19 a3 PWM0_CHAN3.
			// Source: RP1 peripherals datasheet, GPIO function table (and
			// what `pinctrl get 12-19` prints on a Pi 5). Node pwm@98000
			// in the Raspberry Pi kernel, pwm@40098000 in mainline; RP1's
			// PWM1 (…9c000) only drives the fan connector.
			compatible: "raspberrypi,rp1-pwm",
			unit:       "98000",
			channels:   map[int]int{12: 0, 13: 1, 18: 2, 19: 3},
		},
	}
}

// Pins returns the BCM pins a hardware PWM channel reaches on some known
// board, ascending.
func Pins() []int {
	var pins []int
	for _, c := range controllers() {
		for p := range c.channels {
			if !slices.Contains(pins, p) {
				pins = append(pins, p)
			}
		}
	}
	slices.Sort(pins)
	return pins
}

func isPWMPin(pin int) bool { return slices.Contains(Pins(), pin) }

func notPWMPin(pin int) error {
	s := make([]string, 0, 4)
	for _, p := range Pins() {
		s = append(s, fmt.Sprint(p))
	}
	return fmt.Errorf("pwm: pin %d: %w (PWM pins: %s)", pin, ErrNotPWMPin, strings.Join(s, ", "))
}

// checkSet validates Set's arguments before anything is touched.
func checkSet(pin int, freqHz, dutyPercent float64) error {
	if !isPWMPin(pin) {
		return notPWMPin(pin)
	}
	if !(freqHz >= MinFrequencyHz && freqHz <= MaxFrequencyHz) { // also rejects NaN
		return fmt.Errorf("pwm: pin %d: frequency %v Hz is outside %d..%d", pin, freqHz, MinFrequencyHz, MaxFrequencyHz)
	}
	if !(dutyPercent >= 0 && dutyPercent <= 100) {
		return fmt.Errorf("pwm: pin %d: duty cycle %v%% is outside 0..100", pin, dutyPercent)
	}
	return nil
}

func ctxErr(ctx context.Context, pin int, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pwm: pin %d: %s: %w", pin, op, err)
	}
	return nil
}

// nanos converts a validated setting to the period and duty the kernel
// takes, in whole nanoseconds.
func nanos(freqHz, dutyPercent float64) (period, duty int64) {
	period = int64(math.Round(1e9 / freqHz))
	duty = int64(math.Round(float64(period) * dutyPercent / 100))
	return period, duty
}

// stateOf is the State of a channel given in nanoseconds.
func stateOf(pin int, chip string, channel int, period, duty int64, enabled bool) State {
	st := State{Pin: pin, Enabled: enabled, Chip: chip, Channel: channel}
	if period > 0 {
		st.FrequencyHz = round3(1e9 / float64(period))
		st.DutyCyclePercent = round3(float64(duty) / float64(period) * 100)
	}
	return st
}

// round3 rounds to 0.001, so 3 Hz (period 333333333 ns) reads back as 3,
// not 3.000000003.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

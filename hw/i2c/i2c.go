// Package i2c lists, scans, reads and writes I2C buses for the root helper.
//
// A bus is periph's conn/v3/i2c.Bus, so periph device drivers (bmxx80 and
// friends) run unchanged on a real adapter (Linux, over /dev/i2c-N) and on a
// SimBus of register-level fake chips. The one thing periph's Bus cannot say
// is i2cdetect's probe: an SMBus quick write has no data, and periph's sysfs
// bus turns Tx(addr, nil, nil) into a no-op that always succeeds. Buses that
// can probe properly therefore also implement Prober, and Scan uses it.
//
// The package keeps no state of its own: everything lives in the values the
// constructors return.
package i2c

import (
	"context"
	"errors"
	"fmt"

	"periph.io/x/conn/v3/i2c"
)

// Bus is periph's conn/v3/i2c.Bus, so periph device drivers run on real and
// simulated buses alike. The alias saves callers an import of periph.
type Bus = i2c.Bus

// BusCloser is periph's conn/v3/i2c.BusCloser: what an Opener hands out.
type BusCloser = i2c.BusCloser

// Opener finds and opens the buses of one machine (or of a simulation).
type Opener interface {
	// Buses lists the adapters, ordered by bus number.
	Buses(ctx context.Context) ([]BusInfo, error)
	// Open opens bus number bus; the caller closes it.
	Open(bus int) (i2c.BusCloser, error)
}

// BusInfo is one adapter: its number (N in /dev/i2c-N) and the kernel's name
// for it, which is how a user tells the GPIO header's bus from a HAT EEPROM
// or display bus ("bcm2835 (i2c@7e804000)", "SMBus stub driver").
type BusInfo struct {
	Bus  int
	Name string
}

// ProbeOp is one of the two transfers i2cdetect uses to look for a device.
type ProbeOp int

const (
	// ProbeQuickWrite is an SMBus quick write: the address with the write bit
	// and no data. It is the least intrusive probe for most chips, but some
	// EEPROMs (AT24RF08) take it as the start of a write and corrupt data.
	ProbeQuickWrite ProbeOp = iota
	// ProbeReadByte is an SMBus receive byte: the address with the read bit,
	// then one byte read. Safe for EEPROMs, it may confuse write-only chips.
	ProbeReadByte
)

func (o ProbeOp) String() string {
	switch o {
	case ProbeQuickWrite:
		return "quick write"
	case ProbeReadByte:
		return "read byte"
	}
	return fmt.Sprintf("ProbeOp(%d)", int(o))
}

// Presence is what a probe found at an address.
type Presence int

const (
	// Absent: nothing acknowledged (or the transfer failed in any other way,
	// which is how i2cdetect reads it too).
	Absent Presence = iota
	// Present: a device acknowledged its address.
	Present
	// Busy: the kernel refused to let us address it because a driver holds
	// it (i2cdetect's "UU"); the device was not touched.
	Busy
)

func (p Presence) String() string {
	switch p {
	case Absent:
		return "absent"
	case Present:
		return "present"
	case Busy:
		return "busy"
	}
	return fmt.Sprintf("Presence(%d)", int(p))
}

// Prober is implemented by buses that can do i2cdetect's probes, which
// periph's Bus cannot express (see the package comment).
type Prober interface {
	// Probe addresses the 7-bit address addr with op. A NACK is (Absent,
	// nil); an error means the bus itself failed (it could not be opened,
	// it was closed) and scanning should stop. An adapter that cannot do op
	// returns an error wrapping errors.ErrUnsupported.
	Probe(addr uint16, op ProbeOp) (Presence, error)
}

// MaxTransfer is the most ReadReg and WriteReg move at once: the SMBus/I2C
// block limit, which the kernel's SMBus emulation and i2c-stub also have.
const MaxTransfer = 32

// FirstAddr and LastAddr bound the addresses ReadReg and WriteReg accept.
// 0x00-0x02 are general call, CBUS and reserved (a write to 0x00 can reset
// every chip on the bus); 0x78-0x7F are 10-bit addressing and reserved.
const (
	FirstAddr = 0x03
	LastAddr  = 0x77
)

// ReadReg reads n bytes (1..MaxTransfer) from the device at addr. With reg
// set, it first writes the register number and then reads after a repeated
// start, which is how register-based chips are read; with reg nil it is a
// plain read from wherever the chip's pointer is.
func ReadReg(b i2c.Bus, addr uint16, reg *uint8, n int) ([]byte, error) {
	if err := checkAddr(addr); err != nil {
		return nil, fmt.Errorf("i2c: %s addr 0x%02x: %w", b, addr, err)
	}
	if n < 1 || n > MaxTransfer {
		return nil, fmt.Errorf("i2c: %s addr 0x%02x: read length %d is outside 1..%d", b, addr, n, MaxTransfer)
	}
	var w []byte
	if reg != nil {
		w = []byte{*reg}
	}
	r := make([]byte, n)
	if err := b.Tx(addr, w, r); err != nil {
		return nil, fmt.Errorf("i2c: %s addr 0x%02x%s: read %d bytes: %w", b, addr, regSuffix(reg), n, err)
	}
	return r, nil
}

// WriteReg writes data (1..MaxTransfer bytes) to the device at addr, after
// the register number when reg is set, all in one transfer.
func WriteReg(b i2c.Bus, addr uint16, reg *uint8, data []byte) error {
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("i2c: %s addr 0x%02x: %w", b, addr, err)
	}
	if len(data) < 1 || len(data) > MaxTransfer {
		return fmt.Errorf("i2c: %s addr 0x%02x: write length %d is outside 1..%d", b, addr, len(data), MaxTransfer)
	}
	w := make([]byte, 0, len(data)+1)
	if reg != nil {
		w = append(w, *reg)
	}
	w = append(w, data...)
	if err := b.Tx(addr, w, nil); err != nil {
		return fmt.Errorf("i2c: %s addr 0x%02x%s: write %d bytes: %w", b, addr, regSuffix(reg), len(data), err)
	}
	return nil
}

func checkAddr(addr uint16) error {
	if addr < FirstAddr || addr > LastAddr {
		return fmt.Errorf("address is outside 0x%02x..0x%02x", FirstAddr, LastAddr)
	}
	return nil
}

func regSuffix(reg *uint8) string {
	if reg == nil {
		return ""
	}
	return fmt.Sprintf(" reg 0x%02x", *reg)
}

// errUnsupportedf builds an error that wraps errors.ErrUnsupported, which is
// how Scan learns that an adapter lacks a probe operation.
func errUnsupportedf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errors.ErrUnsupported)
}

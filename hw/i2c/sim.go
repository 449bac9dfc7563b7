package i2c

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
)

// Chip is a simulated device on a SimBus, emulated at register level so
// that real drivers (periph's bmxx80, this repo's sensors) can be tested
// without hardware.
type Chip interface {
	// Addr is the chip's 7-bit address.
	Addr() uint16
	// Tx is one transaction addressed to the chip: w is written, then r is
	// filled after a repeated start. Both empty is an SMBus quick write; w
	// empty is a plain read. A nil error is an ACK.
	Tx(w, r []byte) error
}

// SimTx is one transaction a SimBus carried, for tests that care how a
// device was addressed (Scan must read, not write, EEPROM addresses).
type SimTx struct {
	Addr uint16
	W    []byte // what was written (a copy)
	R    int    // how many bytes were read
	Ack  bool   // whether a chip answered
}

// Kind names the transaction as i2cdetect and SMBus would: "quick" (no
// data), "read", "write" or "write-read".
func (t SimTx) Kind() string {
	switch {
	case len(t.W) == 0 && t.R == 0:
		return "quick"
	case len(t.W) == 0:
		return "read"
	case t.R == 0:
		return "write"
	}
	return "write-read"
}

// simLogMax bounds SimBus's transaction log so a long demo does not grow it
// without end; tests look at far fewer.
const simLogMax = 4096

// SimBus is an I2C bus of simulated chips. It implements periph's
// i2c.BusCloser and Prober, so drivers, ReadReg/WriteReg and Scan all run on
// it. An address without a chip NACKs. Unlike periph's sysfs bus, which
// skips an empty Tx, an empty Tx here reaches the chip as a quick write, as
// it would on the wire. It is safe for concurrent use.
type SimBus struct {
	mu     sync.Mutex
	chips  map[uint16]Chip
	log    []SimTx
	fault  error
	closed bool
}

var (
	_ i2c.BusCloser = (*SimBus)(nil)
	_ Prober        = (*SimBus)(nil)
)

// NewSimBus returns a bus with chips on it. Two chips at one address is a
// programming error and panics, as two real ones would simply not work.
func NewSimBus(chips ...Chip) *SimBus {
	b := &SimBus{chips: map[uint16]Chip{}}
	for _, c := range chips {
		if _, dup := b.chips[c.Addr()]; dup {
			panic(fmt.Sprintf("i2c: sim: two chips at addr 0x%02x", c.Addr()))
		}
		b.chips[c.Addr()] = c
	}
	return b
}

func (b *SimBus) String() string { return "sim-i2c" }

// Tx sends one transaction to the chip at addr.
func (b *SimBus) Tx(addr uint16, w, r []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.txLocked(addr, w, r)
}

func (b *SimBus) txLocked(addr uint16, w, r []byte) error {
	if b.closed {
		return fmt.Errorf("i2c: sim: addr 0x%02x: bus is closed", addr)
	}
	if b.fault != nil {
		return fmt.Errorf("i2c: sim: addr 0x%02x: %w", addr, b.fault)
	}
	if addr > 0x7F {
		return fmt.Errorf("i2c: sim: addr 0x%x is not a 7-bit address", addr)
	}
	c, ok := b.chips[addr]
	var err error
	if !ok {
		err = fmt.Errorf("i2c: sim: addr 0x%02x: no acknowledge", addr)
	} else if cerr := c.Tx(w, r); cerr != nil {
		err = fmt.Errorf("i2c: sim: addr 0x%02x: %w", addr, cerr)
	}
	if len(b.log) == simLogMax {
		b.log = slices.Delete(b.log, 0, simLogMax/2)
	}
	b.log = append(b.log, SimTx{Addr: addr, W: slices.Clone(w), R: len(r), Ack: err == nil})
	return err
}

// Probe does the probe as a real adapter would put it on the wire. A fault
// set with SetFault is a bus failure, not a NACK, and is returned.
func (b *SimBus) Probe(addr uint16, op ProbeOp) (Presence, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Absent, fmt.Errorf("i2c: sim: bus is closed")
	}
	if b.fault != nil {
		return Absent, fmt.Errorf("i2c: sim: %w", b.fault)
	}
	var r []byte
	switch op {
	case ProbeQuickWrite:
	case ProbeReadByte:
		r = make([]byte, 1)
	default:
		return Absent, fmt.Errorf("i2c: sim: unknown probe %v", op)
	}
	if b.txLocked(addr, nil, r) != nil {
		return Absent, nil
	}
	return Present, nil
}

// SetSpeed accepts any speed; the simulation has no clock.
func (b *SimBus) SetSpeed(physic.Frequency) error { return nil }

// Close makes every later transaction fail, as on a closed /dev/i2c-N.
func (b *SimBus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}

// SetFault makes every transaction fail with err (wrapped) until it is
// called with nil: a stuck bus, an unplugged HAT, an adapter error.
func (b *SimBus) SetFault(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fault = err
}

// Transactions returns the transactions carried so far, oldest first (the
// most recent few thousand).
func (b *SimBus) Transactions() []SimTx {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.log)
}

// ResetTransactions forgets the transactions carried so far.
func (b *SimBus) ResetTransactions() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = nil
}

// SimOpener is an Opener over SimBuses, for demos and for tests of code that
// lists and opens buses. Open hands out a handle whose Close does not close
// the shared SimBus, as closing one file of /dev/i2c-N leaves others open.
type SimOpener struct {
	buses map[int]*SimBus
}

var _ Opener = (*SimOpener)(nil)

// NewSimOpener returns an Opener with the given buses by number.
func NewSimOpener(buses map[int]*SimBus) *SimOpener {
	o := &SimOpener{buses: map[int]*SimBus{}}
	for n, b := range buses {
		o.buses[n] = b
	}
	return o
}

// Buses lists the buses by number, each named "sim-i2c".
func (o *SimOpener) Buses(ctx context.Context) ([]BusInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("i2c: sim: list buses: %w", err)
	}
	out := make([]BusInfo, 0, len(o.buses))
	for n, b := range o.buses {
		out = append(out, BusInfo{Bus: n, Name: b.String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bus < out[j].Bus })
	return out, nil
}

// Open returns a handle on bus n.
func (o *SimOpener) Open(n int) (i2c.BusCloser, error) {
	b, ok := o.buses[n]
	if !ok {
		return nil, fmt.Errorf("i2c: sim: bus %d: open: no such bus", n)
	}
	return &simHandle{bus: b}, nil
}

// simHandle is one opening of a SimBus.
type simHandle struct {
	bus *SimBus

	mu     sync.Mutex
	closed bool
}

var (
	_ i2c.BusCloser = (*simHandle)(nil)
	_ Prober        = (*simHandle)(nil)
)

func (h *simHandle) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

func (h *simHandle) String() string { return h.bus.String() }

func (h *simHandle) Tx(addr uint16, w, r []byte) error {
	if h.isClosed() {
		return fmt.Errorf("i2c: sim: addr 0x%02x: handle is closed", addr)
	}
	return h.bus.Tx(addr, w, r)
}

func (h *simHandle) Probe(addr uint16, op ProbeOp) (Presence, error) {
	if h.isClosed() {
		return Absent, fmt.Errorf("i2c: sim: handle is closed")
	}
	return h.bus.Probe(addr, op)
}

func (h *simHandle) SetSpeed(f physic.Frequency) error { return h.bus.SetSpeed(f) }

func (h *simHandle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	return nil
}

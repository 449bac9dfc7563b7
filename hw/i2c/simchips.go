package i2c

import (
	"math"
	"sync"
)

// MemChip is 256 plain byte registers behind an auto-incrementing pointer,
// like a chip of the kernel's i2c-stub: a write sets the pointer from its
// first byte and stores the rest from there; a read returns bytes from the
// pointer on. The pointer wraps from 0xFF to 0x00. It is what read/write
// tests and "unknown device" cases run against.
type MemChip struct {
	addr uint16

	mu   sync.Mutex
	regs [256]byte
	ptr  uint8
}

var _ Chip = (*MemChip)(nil)

// NewMemChip returns a MemChip at addr with every register zero.
func NewMemChip(addr uint16) *MemChip { return &MemChip{addr: addr} }

// Addr implements Chip.
func (m *MemChip) Addr() uint16 { return m.addr }

// Tx implements Chip.
func (m *MemChip) Tx(w, r []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(w) > 0 {
		m.ptr = w[0]
		for _, v := range w[1:] {
			m.regs[m.ptr] = v
			m.ptr++
		}
	}
	for i := range r {
		r[i] = m.regs[m.ptr]
		m.ptr++
	}
	return nil
}

// Set stores data from register reg on, as a test fixture would.
func (m *MemChip) Set(reg uint8, data ...byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range data {
		m.regs[reg] = v
		reg++
	}
}

// Get returns n registers from reg on, without moving the pointer.
func (m *MemChip) Get(reg uint8, n int) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]byte, n)
	for i := range out {
		out[i] = m.regs[reg]
		reg++
	}
	return out
}

// TMP102 register pointers and configuration bits (TI SBOS397, 7.5).
const (
	tmp102RegTemp   = 0x00
	tmp102RegConfig = 0x01
	tmp102RegTLow   = 0x02
	tmp102RegTHigh  = 0x03

	tmp102CfgOS       = 0x8000 // one-shot; reads 1 once a one-shot conversion is done
	tmp102CfgR1R0     = 0x6000 // converter resolution, read-only 11
	tmp102CfgSD       = 0x0100 // shutdown
	tmp102CfgAL       = 0x0020 // alert, read-only
	tmp102CfgEM       = 0x0010 // extended (13-bit) mode
	tmp102CfgWritable = 0x1FD0 // F1 F0 POL TM SD CR1 CR0 EM
	tmp102CfgReset    = 0x60A0
)

// TMP102 is TI's digital thermometer: a pointer register selecting one of
// four 16-bit big-endian registers. Temperature (0x00, read-only) is 12-bit
// two's complement at 0.0625 °C/LSB, left-justified (13-bit with bit 0 set
// in extended mode). Configuration (0x01) resets to 0x60A0, with R1R0
// always 11. TLOW/THIGH (0x02/0x03) reset to 75 and 80 °C. In continuous
// mode the temperature register follows SetTemp; after shutdown (SD) it
// holds the last conversion until a one-shot (OS) converts again.
// Conversions are instantaneous; the alert logic is not simulated.
type TMP102 struct {
	addr uint16

	mu        sync.Mutex
	ptr       uint8
	ambient   float64 // °C, what SetTemp set
	converted float64 // °C, the last conversion
	config    uint16
	oneShot   bool // a one-shot conversion completed: OS reads 1
	tLow      uint16
	tHigh     uint16
}

var _ Chip = (*TMP102)(nil)

// NewTMP102 returns a TMP102 at addr (0x48-0x4B on real parts) in its
// power-on state, reading 25 °C.
func NewTMP102(addr uint16) *TMP102 {
	return &TMP102{addr: addr, ambient: 25, converted: 25, config: tmp102CfgReset, tLow: 75 << 8, tHigh: 80 << 8}
}

// Addr implements Chip.
func (t *TMP102) Addr() uint16 { return t.addr }

// SetTemp sets the temperature the chip senses, in °C. Values beyond the
// register's range read as its limit.
func (t *TMP102) SetTemp(c float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ambient = c
}

// Tx implements Chip: w[0] is the pointer, w[1:3] a register value
// (MSB first; a single byte updates the MSB only). Reads return the pointed
// register's two bytes, repeating.
func (t *TMP102) Tx(w, r []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(w) > 0 {
		t.ptr = w[0] & 0x03
		if len(w) > 1 {
			old := t.reg(t.ptr)
			v := uint16(w[1])<<8 | old&0xFF
			if len(w) > 2 {
				v = uint16(w[1])<<8 | uint16(w[2])
			}
			t.write(t.ptr, v)
		}
	}
	if len(r) > 0 {
		v := t.reg(t.ptr)
		for i := range r {
			if i%2 == 0 {
				r[i] = byte(v >> 8)
			} else {
				r[i] = byte(v)
			}
		}
	}
	return nil
}

func (t *TMP102) write(ptr uint8, v uint16) {
	switch ptr {
	case tmp102RegConfig:
		t.oneShot = false
		t.config = v&tmp102CfgWritable | tmp102CfgR1R0 | tmp102CfgAL
		if v&tmp102CfgOS != 0 && t.config&tmp102CfgSD != 0 {
			t.converted = t.ambient
			t.oneShot = true
		}
	case tmp102RegTLow:
		t.tLow = v & t.limitMask()
	case tmp102RegTHigh:
		t.tHigh = v & t.limitMask()
	} // the temperature register is read-only
}

func (t *TMP102) limitMask() uint16 {
	if t.config&tmp102CfgEM != 0 {
		return 0xFFF8
	}
	return 0xFFF0
}

func (t *TMP102) reg(ptr uint8) uint16 {
	switch ptr {
	case tmp102RegTemp:
		if t.config&tmp102CfgSD == 0 {
			t.converted = t.ambient
		}
		return tmp102Encode(t.converted, t.config&tmp102CfgEM != 0)
	case tmp102RegConfig:
		if t.oneShot {
			return t.config | tmp102CfgOS
		}
		return t.config
	case tmp102RegTLow:
		return t.tLow
	}
	return t.tHigh
}

// tmp102Encode is the temperature register for c °C: 12-bit counts shifted
// left by 4, or in extended mode 13-bit counts shifted left by 3 with bit 0
// set (which is how the datasheet tells the formats apart).
func tmp102Encode(c float64, extended bool) uint16 {
	counts := math.Round(c / 0.0625)
	if extended {
		counts = max(-4096, min(4095, counts))
		return uint16(int16(counts))<<3 | 1
	}
	counts = max(-2048, min(2047, counts))
	return uint16(int16(counts)) << 4
}

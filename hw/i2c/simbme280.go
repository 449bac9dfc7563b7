package i2c

import (
	"math"
	"sync"
)

// BME280/BMP280 registers (Bosch BST-BME280-DS002, section 5).
const (
	bmeRegCalib0   = 0x88 // calib00..25: T1..T3, P1..P9, reserved, H1
	bmeRegChipID   = 0xD0
	bmeRegReset    = 0xE0
	bmeRegCalib26  = 0xE1 // calib26..32: H2..H6
	bmeRegCtrlHum  = 0xF2
	bmeRegStatus   = 0xF3
	bmeRegCtrlMeas = 0xF4
	bmeRegConfig   = 0xF5
	bmeRegPress    = 0xF7 // press_msb, lsb, xlsb, temp_msb, lsb, xlsb, hum_msb, lsb

	bmeChipIDBME280 = 0x60
	bmeChipIDBMP280 = 0x58
	bmeResetWord    = 0xB6

	bmeSkipped20 = 0x80000 // what a skipped pressure or temperature reads
	bmeSkipped16 = 0x8000  // what a skipped humidity reads
)

// bmeTrim is the factory calibration of one chip.
type bmeTrim struct {
	t1                             uint16
	t2, t3                         int16
	p1                             uint16
	p2, p3, p4, p5, p6, p7, p8, p9 int16
	h1, h3                         uint8
	h2, h4, h5                     int16
	h6                             int8
}

// simTrim is the calibration of every simulated chip: T and P are the
// worked example of the BMP280 datasheet (BST-BMP280-DS001, 3.12), the
// humidity values are typical of real BME280s (H5 is non-zero so the
// nibble-packed 0xE4..0xE6 layout is exercised).
func simTrim() bmeTrim {
	return bmeTrim{
		t1: 27504, t2: 26435, t3: -1000,
		p1: 36477, p2: -10685, p3: 3024, p4: 2855, p5: 140, p6: -7, p7: 15500, p8: -14600, p9: 6000,
		h1: 75, h2: 366, h3: 0, h4: 309, h5: 50, h6: 30,
	}
}

// store lays the calibration out in the chip's registers.
func (c bmeTrim) store(regs *[256]byte) {
	le := func(reg int, v uint16) { regs[reg], regs[reg+1] = byte(v), byte(v>>8) }
	le(0x88, c.t1)
	le(0x8A, uint16(c.t2))
	le(0x8C, uint16(c.t3))
	le(0x8E, c.p1)
	for i, p := range []int16{c.p2, c.p3, c.p4, c.p5, c.p6, c.p7, c.p8, c.p9} {
		le(0x90+2*i, uint16(p))
	}
	regs[0xA1] = c.h1
	le(0xE1, uint16(c.h2))
	regs[0xE3] = c.h3
	regs[0xE4] = byte(c.h4 >> 4)                 // H4 bits 11:4
	regs[0xE5] = byte(c.h4&0x0F) | byte(c.h5<<4) // H4 bits 3:0, H5 bits 3:0
	regs[0xE6] = byte(c.h5 >> 4)                 // H5 bits 11:4
	regs[0xE7] = byte(c.h6)
}

// The datasheet's integer compensation (BME280 4.2.3), which is also what
// periph's driver runs; the sim searches these in reverse.

// tFine is the fine temperature for a raw reading; °C = tFine / 5120.
func (c bmeTrim) tFine(adcT int32) int32 {
	v1 := ((adcT>>3 - int32(c.t1)<<1) * int32(c.t2)) >> 11
	d := adcT>>4 - int32(c.t1)
	v2 := (((d * d) >> 12) * int32(c.t3)) >> 14
	return v1 + v2
}

// pressure is Pa in Q24.8.
func (c bmeTrim) pressure(adcP, tFine int32) int64 {
	v1 := int64(tFine) - 128000
	v2 := v1 * v1 * int64(c.p6)
	v2 += (v1 * int64(c.p5)) << 17
	v2 += int64(c.p4) << 35
	v1 = (v1*v1*int64(c.p3))>>8 + (v1*int64(c.p2))<<12
	v1 = ((int64(1)<<47 + v1) * int64(c.p1)) >> 33
	if v1 == 0 {
		return 0
	}
	p := int64(1048576 - adcP)
	p = ((p<<31 - v2) * 3125) / v1
	v1 = (int64(c.p9) * (p >> 13) * (p >> 13)) >> 25
	v2 = (int64(c.p8) * p) >> 19
	return (p+v1+v2)>>8 + int64(c.p7)<<4
}

// humidity is %RH in Q22.10.
func (c bmeTrim) humidity(adcH, tFine int32) int32 {
	v := tFine - 76800
	x1 := (adcH<<14 - int32(c.h4)<<20 - int32(c.h5)*v + 16384) >> 15
	x2 := (v * int32(c.h6)) >> 10
	x3 := (v*int32(c.h3))>>11 + 32768
	x4 := ((x2*x3)>>10+2097152)*int32(c.h2) + 8192
	v = x1 * (x4 >> 14)
	v -= (((v >> 15) * (v >> 15)) >> 7) * int32(c.h1) >> 4
	v = max(0, min(419430400, v))
	return v >> 12
}

// searchRaw returns the raw value in [0, hi] whose f is nearest target,
// for f non-decreasing in raw.
func searchRaw(hi int32, target float64, f func(int32) float64) int32 {
	lo, up := int32(0), hi
	for lo < up { // first raw with f(raw) >= target
		mid := lo + (up-lo)/2
		if f(mid) >= target {
			up = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > 0 && math.Abs(f(lo-1)-target) <= math.Abs(f(lo)-target) {
		return lo - 1
	}
	return lo
}

// BME280 simulates a Bosch BME280 (or, from NewBMP280, a BMP280) closely
// enough for periph's bmxx80 driver: chip id at 0xD0, calibration at
// 0x88..0xA1 and 0xE1..0xE7, soft reset, ctrl_hum/ctrl_meas/config, status,
// and the ADC registers 0xF7..0xFE.
//
// Writes are register/value pairs and reads auto-increment, as on the real
// chip's I2C interface. A measurement happens when ctrl_meas selects forced
// mode (the chip then returns to sleep), and before every read in normal
// mode; it is instantaneous, so status never shows "measuring". A channel
// with oversampling off reads the datasheet's skipped value, and the
// pressure and temperature ADC values are rounded to the resolution the
// oversampling gives (16 bits at ×1 up to 20 at ×16 or with the IIR filter).
// The filter's smoothing itself is not simulated.
//
// The ADC values are not stored but derived from the environment set with
// SetEnv: SetEnv searches the datasheet's compensation formulas for the raw
// values that compensate back to it, so any driver implementing the
// datasheet reads the environment back.
type BME280 struct {
	addr uint16
	bme  bool // BME280 (humidity) rather than BMP280

	mu               sync.Mutex
	trim             bmeTrim
	regs             [256]byte
	ptr              uint8
	humOS            byte // ctrl_hum as latched by the last ctrl_meas write
	rawT, rawP, rawH int32
	tempC, hPa, rh   float64
}

var _ Chip = (*BME280)(nil)

// NewBME280 returns a BME280 at addr (0x76 or 0x77 on real parts) after
// power-on, sensing 21.5 °C, 1013.25 hPa and 45 %RH.
func NewBME280(addr uint16) *BME280 { return newBMx280(addr, true) }

// NewBMP280 returns a BMP280 at addr: a BME280 without humidity, chip id
// 0x58.
func NewBMP280(addr uint16) *BME280 { return newBMx280(addr, false) }

func newBMx280(addr uint16, bme bool) *BME280 {
	c := &BME280{addr: addr, bme: bme, trim: simTrim()}
	c.regs[bmeRegChipID] = bmeChipIDBMP280
	if bme {
		c.regs[bmeRegChipID] = bmeChipIDBME280
	}
	c.trim.store(&c.regs)
	if !bme { // a BMP280 has no humidity calibration
		c.regs[0xA1] = 0
		clear(c.regs[bmeRegCalib26 : bmeRegCalib26+7])
	}
	c.reset()
	c.setEnv(21.5, 1013.25, 45)
	return c
}

// Addr implements Chip.
func (c *BME280) Addr() uint16 { return c.addr }

// SetEnv sets what the chip senses, clamped to its operating range
// (-40..85 °C, 300..1100 hPa, 0..100 %RH). It takes effect at the next
// measurement, as on the real chip. A BMP280 ignores rh.
func (c *BME280) SetEnv(tempC, hPa, rh float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setEnv(tempC, hPa, rh)
}

// Env returns the environment the chip senses, after clamping.
func (c *BME280) Env() (tempC, hPa, rh float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tempC, c.hPa, c.rh
}

func (c *BME280) setEnv(tempC, hPa, rh float64) {
	c.tempC = max(-40, min(85, tempC))
	c.hPa = max(300, min(1100, hPa))
	c.rh = max(0, min(100, rh))
	const max20 = 1<<20 - 1
	c.rawT = searchRaw(max20, c.tempC*5120, func(raw int32) float64 { return float64(c.trim.tFine(raw)) })
	tf := c.trim.tFine(c.rawT)
	// Pressure falls as the raw value rises: search its negation.
	c.rawP = searchRaw(max20, -c.hPa*100*256, func(raw int32) float64 { return -float64(c.trim.pressure(raw, tf)) })
	c.rawH = searchRaw(1<<16-1, c.rh*1024, func(raw int32) float64 { return float64(c.trim.humidity(raw, tf)) })
}

// reset is the power-on (and soft reset) state of the control and data
// registers.
func (c *BME280) reset() {
	c.regs[bmeRegCtrlHum] = 0
	c.regs[bmeRegStatus] = 0
	c.regs[bmeRegCtrlMeas] = 0
	c.regs[bmeRegConfig] = 0
	c.humOS = 0
	c.storeADC(bmeSkipped20, bmeSkipped20, bmeSkipped16)
}

func (c *BME280) storeADC(p, t, h int32) {
	r := c.regs[bmeRegPress:]
	r[0], r[1], r[2] = byte(p>>12), byte(p>>4), byte(p<<4)
	r[3], r[4], r[5] = byte(t>>12), byte(t>>4), byte(t<<4)
	if c.bme {
		r[6], r[7] = byte(h>>8), byte(h)
	}
}

// Tx implements Chip.
func (c *BME280) Tx(w, r []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(w) > 0 {
		for i := 0; i+1 < len(w); i += 2 {
			c.write(w[i], w[i+1])
		}
		// The pointer is the last register named: the read register of a
		// write-then-read, or the last one written.
		c.ptr = w[(len(w)-1)&^1]
	}
	if len(r) > 0 {
		if c.regs[bmeRegCtrlMeas]&3 == 3 { // normal mode: always a fresh sample
			c.measure()
		}
		for i := range r {
			r[i] = c.regs[c.ptr]
			c.ptr++
		}
	}
	return nil
}

// write stores one register; read-only registers ignore writes.
func (c *BME280) write(reg, v byte) {
	switch reg {
	case bmeRegReset:
		if v == bmeResetWord {
			c.reset()
		}
	case bmeRegCtrlHum:
		if c.bme {
			c.regs[reg] = v & 0x07
		}
	case bmeRegCtrlMeas:
		c.regs[reg] = v
		c.humOS = c.regs[bmeRegCtrlHum] // ctrl_hum takes effect on a ctrl_meas write
		switch v & 3 {
		case 1, 2: // forced: one measurement, then sleep
			c.measure()
			c.regs[reg] &^= 3
		case 3:
			c.measure()
		}
	case bmeRegConfig:
		c.regs[reg] = v &^ 0x02 // bit 1 is reserved
	}
}

// measure latches the ADC registers from the environment, as ctrl_meas
// and config ask.
func (c *BME280) measure() {
	meas, filter := c.regs[bmeRegCtrlMeas], c.regs[bmeRegConfig]>>2&7
	adc := func(raw int32, os byte) int32 {
		if os == 0 {
			return bmeSkipped20
		}
		bits := int32(20)
		if filter == 0 {
			bits = 15 + int32(min(os, 5))
		}
		step := int32(1) << (20 - bits)
		return min((raw+step/2)/step*step, (1<<20-1)&^(step-1))
	}
	t := adc(c.rawT, meas>>5)
	p := adc(c.rawP, meas>>2&7)
	h := int32(bmeSkipped16)
	if c.humOS != 0 {
		h = c.rawH
	}
	c.storeADC(p, t, h)
}

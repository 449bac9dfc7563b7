// Package sensors reads the known I2C sensors a configuration declares and
// converts their readings to units.
//
// BME280 and BMP280 go through periph's bmxx80 driver, which already
// implements Bosch's compensation. periph has no TMP102 driver, and the chip
// needs only two register reads, so that one is done here. Every read
// checks first that the chip at the address is the declared type, so a
// wrong address gives "chip id 0x00, want 0x60" rather than a plausible but
// meaningless temperature. The LM75 family (LM75, LM75A, TMP75, TMP105,
// TMP275) has no id register at all: its reads check only what the family
// shares (the address range, the unused low bits), so another chip there can
// still read as a temperature, and nothing here claims to detect one.
package sensors

import (
	"context"
	"fmt"
	"math"
	"time"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/devices/v3/bmxx80"
)

// Spec is one declared sensor.
type Spec struct {
	Name string
	Type string // one of Types(): "bme280", "bmp280", "tmp102", "lm75", "tmp75", "tmp105", "tmp275"
	Bus  int    // only for messages: the caller opens the bus
	Addr int
}

// Reading is one converted reading. Fields the sensor type does not measure
// are nil, so "no humidity sensor" is never confused with 0 %RH.
type Reading struct {
	Name, Type      string
	TemperatureC    *float64
	PressureHPa     *float64
	HumidityPercent *float64
	Time            time.Time // when the measurement was taken
}

// The sensor types.
const (
	BME280 = "bme280"
	BMP280 = "bmp280"
	TMP102 = "tmp102"
	LM75   = "lm75"   // LM75 (9-bit, 0.5 °C) and LM75A (11-bit, 0.125 °C)
	TMP75  = "tmp75"  // the 12-bit LM75s: 0.0625 °C
	TMP105 = "tmp105" // what QEMU emulates
	TMP275 = "tmp275"
)

// Types lists the sensor types Read understands.
func Types() []string { return []string{BME280, BMP280, TMP102, LM75, TMP75, TMP105, TMP275} }

// Read takes one measurement of s on b, which must be the bus s.Bus names.
func Read(ctx context.Context, b i2c.Bus, s Spec) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, s.errorf("%w", err)
	}
	var read func(context.Context, i2c.Bus, Spec, *Reading) error
	switch s.Type {
	case BME280, BMP280:
		read = readBMx280
	case TMP102:
		read = readTMP102
	case LM75, TMP75, TMP105, TMP275:
		read = readLM75
	default:
		return Reading{}, s.errorf("unknown type %q, want one of %q", s.Type, Types())
	}
	if s.Addr < 0x03 || s.Addr > 0x77 {
		return Reading{}, s.errorf("address is outside 0x03..0x77")
	}
	r := Reading{Name: s.Name, Type: s.Type}
	if err := read(ctx, b, s, &r); err != nil {
		return Reading{}, err
	}
	return r, nil
}

// errorf prefixes errors with the sensor, its type and where it is.
func (s Spec) errorf(format string, args ...any) error {
	return fmt.Errorf("sensors: %q (%s on bus %d addr 0x%02x): %w", s.Name, s.Type, s.Bus, s.Addr, fmt.Errorf(format, args...))
}

// bmxOpts are 4× oversampling on every channel and no filter: periph's
// defaults, about 26 ms per forced measurement, noise well under the
// sensor's absolute accuracy (±1 °C, ±1 hPa, ±3 %RH).
func bmxOpts() bmxx80.Opts {
	return bmxx80.Opts{Temperature: bmxx80.O4x, Pressure: bmxx80.O4x, Humidity: bmxx80.O4x}
}

// Chip ids at register 0xD0.
const (
	bmxRegChipID = 0xD0
	bmxIDBMP280  = 0x58
	bmxIDBME280  = 0x60
)

func readBMx280(_ context.Context, b i2c.Bus, s Spec, r *Reading) error {
	if s.Addr != 0x76 && s.Addr != 0x77 {
		return s.errorf("a %s answers only at 0x76 or 0x77", s.Type)
	}
	var id [1]byte
	if err := b.Tx(uint16(s.Addr), []byte{bmxRegChipID}, id[:]); err != nil {
		return s.errorf("read chip id: %w", err)
	}
	switch {
	case s.Type == BME280 && id[0] == bmxIDBMP280:
		return s.errorf("chip id 0x58 is a BMP280, which has no humidity sensor; declare it as bmp280")
	case s.Type == BME280 && id[0] != bmxIDBME280:
		return s.errorf("chip id 0x%02x, want 0x60 (BME280): another kind of device is at this address", id[0])
	case s.Type == BMP280 && id[0] != bmxIDBMP280 && id[0] != bmxIDBME280:
		// A BME280 declared as bmp280 is read as one: its temperature and
		// pressure are the same chip and registers.
		return s.errorf("chip id 0x%02x, want 0x58 (BMP280): another kind of device is at this address", id[0])
	}
	opts := bmxOpts()
	if s.Type == BMP280 {
		opts.Humidity = bmxx80.Off
	}
	dev, err := bmxx80.NewI2C(b, uint16(s.Addr), &opts)
	if err != nil {
		return s.errorf("%w", err)
	}
	// A forced measurement: the chip goes back to sleep by itself, so there
	// is nothing to Halt.
	var e physic.Env
	if err := dev.Sense(&e); err != nil {
		return s.errorf("%w", err)
	}
	r.Time = time.Now()
	r.TemperatureC = ptr(round(e.Temperature.Celsius(), 2))                       // 0.01 °C resolution
	r.PressureHPa = ptr(round(float64(e.Pressure)/float64(100*physic.Pascal), 2)) // Pa/256 resolution
	if s.Type == BME280 {
		r.HumidityPercent = ptr(round(float64(e.Humidity)/float64(physic.PercentRH), 2)) // %/1024 resolution
	}
	return nil
}

// TMP102 registers and configuration bits (TI SBOS397).
const (
	tmpRegTemp   = 0x00
	tmpRegConfig = 0x01

	tmpCfgOS   = 0x8000 // one-shot: write 1 in shutdown to convert; reads 1 when done
	tmpCfgR1R0 = 0x6000 // resolution, read-only 11 on a TMP102
	tmpCfgSD   = 0x0100 // shutdown
	tmpCfgEM   = 0x0010 // extended mode: 13-bit temperature

	tmpLSB          = 0.0625                // °C per count
	tmpConversion   = 30 * time.Millisecond // 26 ms typical, 35 ms max
	tmpOneShotPolls = 4
)

// readTMP102 reads the configuration (which tells 12- from 13-bit format,
// whether the chip is shut down, and through R1R0 whether it is a TMP102 at
// all), then the temperature. A shut-down chip's temperature register holds
// its last conversion, possibly hours old, so it gets a one-shot first.
func readTMP102(ctx context.Context, b i2c.Bus, s Spec, r *Reading) error {
	if s.Addr < 0x48 || s.Addr > 0x4B {
		return s.errorf("a tmp102 answers only at 0x48..0x4b")
	}
	addr := uint16(s.Addr)
	cfg, err := readWord(b, addr, tmpRegConfig)
	if err != nil {
		return s.errorf("read config: %w", err)
	}
	if cfg&tmpCfgR1R0 != tmpCfgR1R0 {
		return s.errorf("config 0x%04x has resolution bits R1R0 = %02b, which a TMP102 hardwires to 11: another kind of device is at this address", cfg, cfg>>13&3)
	}
	if cfg&tmpCfgSD != 0 {
		if err := oneShot(ctx, b, addr, cfg); err != nil {
			return s.errorf("%w", err)
		}
	}
	raw, err := readWord(b, addr, tmpRegTemp)
	if err != nil {
		return s.errorf("read temperature: %w", err)
	}
	r.Time = time.Now()
	r.TemperatureC = ptr(tmp102Celsius(raw, cfg&tmpCfgEM != 0))
	return nil
}

// oneShot starts a single conversion of a shut-down TMP102 and waits for OS
// to read 1.
func oneShot(ctx context.Context, b i2c.Bus, addr uint16, cfg uint16) error {
	cfg |= tmpCfgOS
	if err := b.Tx(addr, []byte{tmpRegConfig, byte(cfg >> 8), byte(cfg)}, nil); err != nil {
		return fmt.Errorf("start one-shot conversion: %w", err)
	}
	for range tmpOneShotPolls {
		c, err := readWord(b, addr, tmpRegConfig)
		if err != nil {
			return fmt.Errorf("one-shot conversion: %w", err)
		}
		if c&tmpCfgOS != 0 {
			return nil
		}
		t := time.NewTimer(tmpConversion)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return fmt.Errorf("one-shot conversion did not finish in %v", tmpOneShotPolls*tmpConversion)
}

// readWord reads a TMP102 register: pointer write, repeated start, two
// bytes MSB first.
func readWord(b i2c.Bus, addr uint16, reg byte) (uint16, error) {
	var v [2]byte
	if err := b.Tx(addr, []byte{reg}, v[:]); err != nil {
		return 0, err
	}
	return uint16(v[0])<<8 | uint16(v[1]), nil
}

// tmp102Celsius decodes the temperature register: two's complement,
// left-justified, 12 bits (13 in extended mode) of 0.0625 °C.
func tmp102Celsius(raw uint16, extended bool) float64 {
	if extended {
		return float64(int16(raw)>>3) * tmpLSB
	}
	return float64(int16(raw)>>4) * tmpLSB
}

// LM75-family registers (TI SNOS808 LM75, SBOS231 TMP75/TMP175, SBOS323
// TMP105, SBOS363 TMP275): the temperature at 0x00 as in the TMP102, an
// 8-bit configuration at 0x01 whose bit 0 shuts the chip down.
const (
	lmRegConfig = 0x01
	lmCfgSD     = 0x01
)

// readLM75 reads an LM75-family chip. There is no id register to check,
// so a wrong address or another chip cannot be told apart for sure; what
// is checked is the family's address range, that the configuration answers
// and that the temperature's unused low bits are zero. A shut-down chip
// holds its last conversion, of unknown age, so it is refused rather than
// read: the TMP75/105/275 one-shot bit does not exist on the LM75.
func readLM75(_ context.Context, b i2c.Bus, s Spec, r *Reading) error {
	if s.Addr < 0x48 || s.Addr > 0x4F {
		return s.errorf("an LM75-family chip answers only at 0x48..0x4f")
	}
	addr := uint16(s.Addr)
	var cfg [1]byte
	if err := b.Tx(addr, []byte{lmRegConfig}, cfg[:]); err != nil {
		return s.errorf("read config: %w", err)
	}
	if cfg[0]&lmCfgSD != 0 {
		return s.errorf("config 0x%02x: the chip is shut down (SD), so its temperature register holds an old conversion; clear bit 0 of register 0x01", cfg[0])
	}
	raw, err := readWord(b, addr, tmpRegTemp)
	if err != nil {
		return s.errorf("read temperature: %w", err)
	}
	c, ok := lm75Celsius(raw, s.Type)
	if !ok {
		return s.errorf("temperature register 0x%04x has low bits set that no %s has (it has no id register: this is all that tells another device at this address)", raw, s.Type)
	}
	r.Time = time.Now()
	r.TemperatureC = ptr(c)
	return nil
}

// lm75Celsius decodes an LM75-family temperature: two's complement,
// left-justified in 16 bits; 11 bits of 0.125 °C for lm75 (an LM75's 9
// bits leave the two below zero), 12 bits of 0.0625 °C for the TMP75, 105
// and 275 (at a lower configured resolution the unused bits read 0). ok is
// false when bits below the resolution are set.
func lm75Celsius(raw uint16, typ string) (c float64, ok bool) {
	if typ == LM75 {
		return float64(int16(raw)>>5) * 0.125, raw&0x1F == 0
	}
	return float64(int16(raw)>>4) * tmpLSB, raw&0x0F == 0
}

func ptr(v float64) *float64 { return &v }

// round keeps the digits the sensor resolves, so 21.5 does not print as
// 21.499999999999996.
func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

package i2c

import (
	"math"
	"testing"

	"periph.io/x/conn/v3/physic"
	"periph.io/x/devices/v3/bmxx80"
)

// senseWithPeriph reads chip through periph's real bmxx80 driver.
func senseWithPeriph(t *testing.T, b *SimBus, addr uint16, opts bmxx80.Opts) physic.Env {
	t.Helper()
	dev, err := bmxx80.NewI2C(b, addr, &opts)
	if err != nil {
		t.Fatalf("bmxx80.NewI2C: %v", err)
	}
	var e physic.Env
	if err := dev.Sense(&e); err != nil {
		t.Fatalf("Sense: %v", err)
	}
	return e
}

func hPa(p physic.Pressure) float64               { return float64(p) / float64(100*physic.Pascal) }
func rhPercent(h physic.RelativeHumidity) float64 { return float64(h) / float64(physic.PercentRH) }

func TestBME280ThroughPeriph(t *testing.T) {
	cases := []struct{ temp, hpa, rh float64 }{
		{21.5, 1013.25, 45},
		{-12.25, 980.4, 80},
		{0, 1013.25, 0},
		{37.8, 850, 100},
		{-40, 300, 10},
		{85, 1100, 95},
		{25.01, 1000.01, 50.5},
	}
	opts := []bmxx80.Opts{
		bmxx80.DefaultOpts,
		{Temperature: bmxx80.O1x, Pressure: bmxx80.O1x, Humidity: bmxx80.O1x},
		{Temperature: bmxx80.O16x, Pressure: bmxx80.O16x, Humidity: bmxx80.O16x},
	}
	for _, c := range cases {
		for _, o := range opts {
			chip := NewBME280(0x76)
			chip.SetEnv(c.temp, c.hpa, c.rh)
			e := senseWithPeriph(t, NewSimBus(chip), 0x76, o)
			gotT, gotP, gotH := e.Temperature.Celsius(), hPa(e.Pressure), rhPercent(e.Humidity)
			t.Logf("want %.2f °C %.2f hPa %.1f%% (os %v): got %.4f °C %.4f hPa %.4f%%", c.temp, c.hpa, c.rh, o.Pressure, gotT, gotP, gotH)
			if math.Abs(gotT-c.temp) > 0.02 || math.Abs(gotP-c.hpa) > 0.05 || math.Abs(gotH-c.rh) > 0.1 {
				t.Errorf("want %.2f °C %.2f hPa %.1f%%, got %.4f °C %.4f hPa %.4f%%", c.temp, c.hpa, c.rh, gotT, gotP, gotH)
			}
		}
	}
}

// The formulas behind the search must be the datasheet's: the BMP280
// datasheet's worked example (3.12) with the same trim gives 25.08 °C and
// 100653.27 Pa (the 64-bit integer path rounds to 100653.26).
func TestBMETrimDatasheetExample(t *testing.T) {
	c := simTrim()
	tf := c.tFine(519888)
	if got := (tf*5 + 128) >> 8; got != 2508 {
		t.Errorf("T = %d centi-°C, want 2508", got)
	}
	if got := float64(c.pressure(415148, tf)) / 256; math.Abs(got-100653.27) > 0.02 {
		t.Errorf("P = %.3f Pa, want 100653.27", got)
	}
}

func TestBME280Registers(t *testing.T) {
	chip := NewBME280(0x77)
	b := NewSimBus(chip)
	rd := func(reg uint8, n int) []byte {
		t.Helper()
		got, err := ReadReg(b, 0x77, &reg, n)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if id := rd(0xD0, 1)[0]; id != 0x60 {
		t.Errorf("chip id 0x%02x, want 0x60", id)
	}
	// H4/H5 share 0xE5: H4 = 309 = 0x135, H5 = 50 = 0x032.
	if got := rd(0xE4, 3); got[0] != 0x13 || got[1] != 0x25 || got[2] != 0x03 {
		t.Errorf("0xE4..0xE6 = % x, want 13 25 03", got)
	}
	// Before any measurement the ADC registers hold the skipped values.
	if got := rd(0xF7, 8); string(got) != string([]byte{0x80, 0, 0, 0x80, 0, 0, 0x80, 0}) {
		t.Errorf("ADC after power-on = % x", got)
	}
	// Forced mode with pressure skipped: temperature measured, pressure
	// 0x80000, humidity measured (ctrl_hum latched by the ctrl_meas write),
	// and the chip back in sleep mode.
	if err := b.Tx(0x77, []byte{0xF2, 0x01, 0xF4, 0x01<<5 | 0x00<<2 | 0x01}, nil); err != nil {
		t.Fatal(err)
	}
	got := rd(0xF4, 1)[0]
	if got&3 != 0 {
		t.Errorf("ctrl_meas after forced = 0x%02x, want sleep mode", got)
	}
	adc := rd(0xF7, 8)
	if adc[0] != 0x80 || adc[1] != 0 || adc[2] != 0 {
		t.Errorf("skipped pressure = % x", adc[:3])
	}
	if adc[3] == 0x80 && adc[4] == 0 {
		t.Errorf("temperature was not measured: % x", adc[3:6])
	}
	if adc[5]&0xF0 != 0 {
		t.Errorf("temperature at 1x oversampling has 16-bit resolution, got xlsb 0x%02x", adc[5])
	}
	if adc[6] == 0x80 && adc[7] == 0 {
		t.Errorf("humidity was not measured: % x", adc[6:])
	}
	// Soft reset brings the skipped values back; writes to read-only
	// registers are ignored.
	if err := b.Tx(0x77, []byte{0xE0, 0xB6, 0xD0, 0x12}, nil); err != nil {
		t.Fatal(err)
	}
	if got := rd(0xF7, 8); got[3] != 0x80 || got[6] != 0x80 {
		t.Errorf("ADC after reset = % x", got)
	}
	if id := rd(0xD0, 1)[0]; id != 0x60 {
		t.Errorf("chip id after a write = 0x%02x", id)
	}
}

func TestBMP280ThroughPeriph(t *testing.T) {
	chip := NewBMP280(0x76)
	chip.SetEnv(-5.5, 990, 60)
	e := senseWithPeriph(t, NewSimBus(chip), 0x76, bmxx80.DefaultOpts)
	if got := e.Temperature.Celsius(); math.Abs(got+5.5) > 0.02 {
		t.Errorf("temperature %.3f, want -5.5", got)
	}
	if got := hPa(e.Pressure); math.Abs(got-990) > 0.05 {
		t.Errorf("pressure %.3f, want 990", got)
	}
	if e.Humidity != 0 {
		t.Errorf("a BMP280 reported humidity %v", e.Humidity)
	}
}

func TestBME280EnvClamped(t *testing.T) {
	chip := NewBME280(0x76)
	chip.SetEnv(200, 5000, -3)
	if tc, p, rh := chip.Env(); tc != 85 || p != 1100 || rh != 0 {
		t.Errorf("Env() = %v %v %v, want 85 1100 0", tc, p, rh)
	}
}

func TestBME280NormalModeFollowsEnv(t *testing.T) {
	chip := NewBME280(0x76)
	b := NewSimBus(chip)
	opts := bmxx80.Opts{Temperature: bmxx80.O2x, Pressure: bmxx80.O2x, Humidity: bmxx80.O2x, Filter: bmxx80.F2, Standby: 10e6}
	dev, err := bmxx80.NewI2C(b, 0x76, &opts) // normal mode from the start
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []float64{10, 30.25} {
		chip.SetEnv(want, 1000, 50)
		var e physic.Env
		if err := dev.Sense(&e); err != nil {
			t.Fatal(err)
		}
		if got := e.Temperature.Celsius(); math.Abs(got-want) > 0.02 {
			t.Errorf("normal mode: %.3f °C, want %v", got, want)
		}
	}
}

package sensors

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	hwi2c "github.com/raspi-mcp/raspi-mcp/hw/i2c"
)

// lm75Chip is a fake LM75-family chip on a SimBus: a pointer register,
// the 16-bit temperature at 0x00 and the 8-bit configuration at 0x01, as
// the datasheets (and QEMU's tmp105) lay them out. bits is the chip's
// resolution: 9 (LM75), 11 (LM75A) or 12 (TMP75/105/275).
type lm75Chip struct {
	mu   sync.Mutex
	addr uint16
	bits int
	temp uint16
	cfg  byte
	ptr  byte
}

var _ hwi2c.Chip = (*lm75Chip)(nil)

func (c *lm75Chip) Addr() uint16 { return c.addr }

// set stores c °C as the chip would: rounded down to its resolution.
func (c *lm75Chip) set(celsius float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := int16(math.Floor(celsius * float64(int(1)<<(c.bits-8))))
	c.temp = uint16(counts << (16 - c.bits))
}

func (c *lm75Chip) Tx(w, r []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(w) > 0 {
		c.ptr = w[0] & 0x03
		if len(w) > 1 && c.ptr == 0x01 {
			c.cfg = w[1]
		}
	}
	for i := range r {
		switch {
		case c.ptr == 0x01:
			r[i] = c.cfg // an 8-bit register repeats
		case i%2 == 0:
			r[i] = byte(c.temp >> 8)
		default:
			r[i] = byte(c.temp)
		}
	}
	return nil
}

// The LM75 family reads at its resolution on every type name, negative
// temperatures included.
func TestReadLM75Family(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		bits  int
		temps []float64
	}{
		{"tmp105", 12, []float64{25, 0.0625, -0.0625, -12.75, -55, 127.9375, 21.3125}},
		{"tmp75", 12, []float64{47.5625, -40}},
		{"tmp275", 12, []float64{100.5, -0.5}},
		{"lm75", 9, []float64{25, 24.5, -0.5, -55, 125}},
		{"lm75", 11, []float64{25.125, -25.375, 0.125}}, // an LM75A
	} {
		chip := &lm75Chip{addr: 0x48, bits: tc.bits}
		b := hwi2c.NewSimBus(chip)
		for _, c := range tc.temps {
			chip.set(c)
			r, err := Read(context.Background(), b, Spec{Name: "qemu", Type: tc.typ, Bus: 1, Addr: 0x48})
			if err != nil {
				t.Fatalf("%s %v °C: %v", tc.typ, c, err)
			}
			if r.TemperatureC == nil || *r.TemperatureC != c || r.Type != tc.typ || r.PressureHPa != nil || r.HumidityPercent != nil || r.Time.IsZero() {
				t.Errorf("%s %v °C: %+v", tc.typ, c, r)
			}
		}
	}
}

// Without an id register, the driver refuses only what no LM75 does, and
// says that it cannot tell more.
func TestReadLM75Refusals(t *testing.T) {
	ctx := context.Background()
	chip := &lm75Chip{addr: 0x4C, bits: 12}
	chip.set(30)
	if _, err := Read(ctx, hwi2c.NewSimBus(chip), Spec{Name: "x", Type: "tmp105", Bus: 1, Addr: 0x50}); err == nil ||
		!strings.Contains(err.Error(), "only at 0x48..0x4f") {
		t.Errorf("address: %v", err)
	}
	chip.cfg = 0x01 // shut down
	if _, err := Read(ctx, hwi2c.NewSimBus(chip), Spec{Name: "x", Type: "tmp105", Bus: 1, Addr: 0x4C}); err == nil ||
		!strings.Contains(err.Error(), "shut down") {
		t.Errorf("shut down: %v", err)
	}
	chip.cfg = 0x60 // 12-bit resolution, running
	chip.temp = 0x1907
	if _, err := Read(ctx, hwi2c.NewSimBus(chip), Spec{Name: "x", Type: "tmp105", Bus: 1, Addr: 0x4C}); err == nil ||
		!strings.Contains(err.Error(), "no id register") {
		t.Errorf("low bits: %v", err)
	}
	// a TMP105's 12 bits are not an LM75's 11
	chip.temp = 0x1910
	if _, err := Read(ctx, hwi2c.NewSimBus(chip), Spec{Name: "x", Type: "lm75", Bus: 1, Addr: 0x4C}); err == nil {
		t.Error("a 12-bit reading passed as an LM75's")
	}
	if _, err := Read(ctx, hwi2c.NewSimBus(), Spec{Name: "gone", Type: "lm75", Bus: 1, Addr: 0x48}); err == nil ||
		!strings.Contains(err.Error(), "read config") || !strings.Contains(err.Error(), "no acknowledge") {
		t.Errorf("nothing there: %v", err)
	}
}

func TestLM75Celsius(t *testing.T) {
	for _, c := range []struct {
		raw  uint16
		typ  string
		want float64
	}{
		{0x1900, "lm75", 25}, {0x1980, "lm75", 25.5}, {0xFF80, "lm75", -0.5}, {0xC900, "lm75", -55}, {0x7D00, "lm75", 125},
		{0x1920, "lm75", 25.125}, {0xE6A0, "lm75", -25.375},
		{0x1910, "tmp105", 25.0625}, {0xFFF0, "tmp275", -0.0625}, {0x7FF0, "tmp75", 127.9375}, {0x8000, "tmp105", -128},
	} {
		if got, ok := lm75Celsius(c.raw, c.typ); !ok || got != c.want {
			t.Errorf("lm75Celsius(0x%04x, %s) = %v, %v; want %v", c.raw, c.typ, got, ok, c.want)
		}
	}
}

// Every type Read understands is one a configuration may declare, so a
// model name the driver knows is never refused by the config file.
func TestConfigAcceptsEveryType(t *testing.T) {
	for _, typ := range Types() {
		toml := "[i2c]\nsensors = [{ name = \"s\", type = \"" + typ + "\", bus = 1, address = 0x48 }]\n"
		if _, err := config.Parse([]byte(toml)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

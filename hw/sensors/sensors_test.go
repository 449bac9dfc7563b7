package sensors

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	hwi2c "github.com/raspi-mcp/raspi-mcp/hw/i2c"
)

func within(t *testing.T, what string, got *float64, want, tol float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: nil, want %v", what, want)
		return
	}
	if math.Abs(*got-want) > tol {
		t.Errorf("%s: %v, want %v ± %v", what, *got, want, tol)
	}
}

func TestReadBME280(t *testing.T) {
	chip := hwi2c.NewBME280(0x76)
	b := hwi2c.NewSimBus(chip)
	for _, env := range []struct{ temp, hpa, rh float64 }{
		{21.5, 1013.25, 45},
		{-8.3, 995.7, 88.5},
		{31.06, 1021.4, 12},
	} {
		chip.SetEnv(env.temp, env.hpa, env.rh)
		r, err := Read(context.Background(), b, Spec{Name: "greenhouse", Type: "bme280", Bus: 1, Addr: 0x76})
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != "greenhouse" || r.Type != "bme280" || r.Time.IsZero() {
			t.Errorf("reading %+v", r)
		}
		within(t, "temperature", r.TemperatureC, env.temp, 0.1)
		within(t, "pressure", r.PressureHPa, env.hpa, 0.1)
		within(t, "humidity", r.HumidityPercent, env.rh, 0.5)
	}
}

func TestReadBMP280(t *testing.T) {
	chip := hwi2c.NewBMP280(0x77)
	chip.SetEnv(4.25, 1002, 0)
	r, err := Read(context.Background(), hwi2c.NewSimBus(chip), Spec{Name: "loft", Type: "bmp280", Bus: 1, Addr: 0x77})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "temperature", r.TemperatureC, 4.25, 0.1)
	within(t, "pressure", r.PressureHPa, 1002, 0.1)
	if r.HumidityPercent != nil {
		t.Errorf("a BMP280 reported humidity %v", *r.HumidityPercent)
	}
	// A BME280 declared as bmp280 reads as one, without humidity.
	r, err = Read(context.Background(), hwi2c.NewSimBus(hwi2c.NewBME280(0x76)), Spec{Name: "x", Type: "bmp280", Bus: 1, Addr: 0x76})
	if err != nil || r.HumidityPercent != nil || r.TemperatureC == nil {
		t.Errorf("BME280 as bmp280: %+v, %v", r, err)
	}
}

func TestReadTMP102(t *testing.T) {
	chip := hwi2c.NewTMP102(0x48)
	b := hwi2c.NewSimBus(chip)
	spec := Spec{Name: "case", Type: "tmp102", Bus: 1, Addr: 0x48}
	for _, c := range []float64{25, 0.0625, 47.5625, 0, -0.0625, -12.75, -40, 127.9375} {
		chip.SetTemp(c)
		r, err := Read(context.Background(), b, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.TemperatureC == nil || *r.TemperatureC != c || r.PressureHPa != nil || r.HumidityPercent != nil || r.Time.IsZero() {
			t.Errorf("%v °C: %+v", c, r)
		}
	}
	// Extended mode (13 bits) reaches 150 °C.
	reg := uint8(1)
	if err := hwi2c.WriteReg(b, 0x48, &reg, []byte{0x60, 0xB0}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []float64{150, -55, 21.125} {
		chip.SetTemp(c)
		r, err := Read(context.Background(), b, spec)
		if err != nil || *r.TemperatureC != c {
			t.Errorf("extended %v °C: %v, %v", c, r.TemperatureC, err)
		}
	}
}

func TestReadTMP102ShutDownGetsOneShot(t *testing.T) {
	chip := hwi2c.NewTMP102(0x49)
	b := hwi2c.NewSimBus(chip)
	reg := uint8(1)
	if err := hwi2c.WriteReg(b, 0x49, &reg, []byte{0x61, 0xA0}); err != nil { // SD
		t.Fatal(err)
	}
	chip.SetTemp(-3.5) // not converted yet: the register still says 25 °C
	r, err := Read(context.Background(), b, Spec{Name: "probe", Type: "tmp102", Bus: 1, Addr: 0x49})
	if err != nil {
		t.Fatal(err)
	}
	if *r.TemperatureC != -3.5 {
		t.Errorf("shut-down TMP102 read %v, want a fresh -3.5", *r.TemperatureC)
	}
}

func TestReadWrongChip(t *testing.T) {
	ctx := context.Background()
	t.Run("memory chip claiming to be a BME280", func(t *testing.T) {
		_, err := Read(ctx, hwi2c.NewSimBus(hwi2c.NewMemChip(0x76)), Spec{Name: "greenhouse", Type: "bme280", Bus: 1, Addr: 0x76})
		if err == nil || !strings.Contains(err.Error(), `sensors: "greenhouse" (bme280 on bus 1 addr 0x76): chip id 0x00, want 0x60 (BME280)`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("BMP280 declared as a BME280", func(t *testing.T) {
		_, err := Read(ctx, hwi2c.NewSimBus(hwi2c.NewBMP280(0x76)), Spec{Name: "g", Type: "bme280", Bus: 1, Addr: 0x76})
		if err == nil || !strings.Contains(err.Error(), "is a BMP280") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("memory chip claiming to be a BMP280", func(t *testing.T) {
		mem := hwi2c.NewMemChip(0x77)
		mem.Set(0xD0, 0x55) // a BMP180
		_, err := Read(ctx, hwi2c.NewSimBus(mem), Spec{Name: "g", Type: "bmp280", Bus: 1, Addr: 0x77})
		if err == nil || !strings.Contains(err.Error(), "chip id 0x55, want 0x58") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("memory chip claiming to be a TMP102", func(t *testing.T) {
		_, err := Read(ctx, hwi2c.NewSimBus(hwi2c.NewMemChip(0x48)), Spec{Name: "case", Type: "tmp102", Bus: 1, Addr: 0x48})
		if err == nil || !strings.Contains(err.Error(), `sensors: "case" (tmp102 on bus 1 addr 0x48): config 0x0000`) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("nothing there", func(t *testing.T) {
		_, err := Read(ctx, hwi2c.NewSimBus(), Spec{Name: "gone", Type: "bme280", Bus: 1, Addr: 0x77})
		if err == nil || !strings.Contains(err.Error(), "read chip id") || !strings.Contains(err.Error(), "no acknowledge") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestReadBadSpec(t *testing.T) {
	b := hwi2c.NewSimBus(hwi2c.NewBME280(0x76), hwi2c.NewTMP102(0x48))
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "x", Type: "dht22", Bus: 1, Addr: 0x76}, `unknown type "dht22", want one of ["bme280" "bmp280" "tmp102" "lm75" "tmp75" "tmp105" "tmp275"]`},
		{Spec{Name: "x", Type: "BME280", Bus: 1, Addr: 0x76}, `unknown type "BME280"`},
		{Spec{Name: "x", Type: "bme280", Bus: 1, Addr: 0x48}, "only at 0x76 or 0x77"},
		{Spec{Name: "x", Type: "tmp102", Bus: 1, Addr: 0x76}, "only at 0x48..0x4b"},
		{Spec{Name: "x", Type: "tmp102", Bus: 1, Addr: 0x90}, "outside 0x03..0x77"},
	} {
		if _, err := Read(context.Background(), b, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.spec, err, c.want)
		}
	}
	if n := len(b.Transactions()); n != 0 {
		t.Errorf("bad specs reached the bus %d times", n)
	}
}

func TestReadBusError(t *testing.T) {
	fault := errors.New("remote I/O error")
	for _, typ := range Types() {
		addr := 0x76
		if typ != "bme280" && typ != "bmp280" {
			addr = 0x48
		}
		b := hwi2c.NewSimBus(hwi2c.NewBME280(0x76), hwi2c.NewTMP102(0x48))
		b.SetFault(fault)
		_, err := Read(context.Background(), b, Spec{Name: "s", Type: typ, Bus: 3, Addr: addr})
		if !errors.Is(err, fault) || !strings.Contains(err.Error(), "bus 3") {
			t.Errorf("%s: err %v, want the bus fault wrapped", typ, err)
		}
	}
	// A fault in the middle of the driver's sequence, after both chip id
	// reads (periph formats the cause with %v, so only the text survives).
	b := hwi2c.NewSimBus(&faultAfter{Chip: hwi2c.NewBME280(0x76), n: 2, err: fault})
	if _, err := Read(context.Background(), b, Spec{Name: "s", Type: "bme280", Bus: 1, Addr: 0x76}); err == nil || !strings.Contains(err.Error(), "remote I/O error") {
		t.Errorf("mid-read fault: %v", err)
	}
}

// faultAfter is a chip that fails after n good transactions. SimBus
// serialises a chip's transactions, so n needs no lock.
type faultAfter struct {
	hwi2c.Chip
	n   int
	err error
}

func (f *faultAfter) Tx(w, r []byte) error {
	if f.n == 0 {
		return f.err
	}
	f.n--
	return f.Chip.Tx(w, r)
}

func TestReadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := hwi2c.NewSimBus(hwi2c.NewBME280(0x76))
	if _, err := Read(ctx, b, Spec{Name: "s", Type: "bme280", Bus: 1, Addr: 0x76}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
}

func TestTypes(t *testing.T) {
	got := Types()
	if !slices.Equal(got, []string{"bme280", "bmp280", "tmp102", "lm75", "tmp75", "tmp105", "tmp275"}) {
		t.Errorf("Types() = %v", got)
	}
	got[0] = "x"
	if Types()[0] != "bme280" {
		t.Error("Types shares its slice")
	}
}

func TestTMP102Celsius(t *testing.T) {
	for _, c := range []struct {
		raw  uint16
		ext  bool
		want float64
	}{
		{0x7FF0, false, 127.9375}, {0x6400, false, 100}, {0x1900, false, 25}, {0x0010, false, 0.0625},
		{0x0000, false, 0}, {0xFFF0, false, -0.0625}, {0xE700, false, -25}, {0xC900, false, -55},
		{0x4B01, true, 150}, {0x0C81, true, 25}, {0xE481, true, -55},
	} {
		if got := tmp102Celsius(c.raw, c.ext); got != c.want {
			t.Errorf("tmp102Celsius(0x%04x, %v) = %v, want %v", c.raw, c.ext, got, c.want)
		}
	}
}

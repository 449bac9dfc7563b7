package privhelper_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// fakeHW records what reached the hardware; the tests check that nothing
// the helper's config forbids ever does.
type fakeHW struct {
	mu   sync.Mutex
	pins map[int]int
	ops  []string
	i2c  map[[3]int]int
}

func newFakeHW() *fakeHW { return &fakeHW{pins: map[int]int{}, i2c: map[[3]int]int{}} }

func (f *fakeHW) hardware() privhelper.Hardware {
	return privhelper.Hardware{GPIO: fakeGPIO{f}, PWM: fakePWM{f}, I2C: fakeI2C{f}, Camera: fakeCamera{f}, Button: gpio.NewSimButtons(28)}
}

func (f *fakeHW) op(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, s)
}

func (f *fakeHW) opsSeen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

type fakeGPIO struct{ f *fakeHW }

func (g fakeGPIO) State(_ context.Context, pin int) (proto.GPIOPin, error) {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	v := g.f.pins[pin]
	return proto.GPIOPin{Pin: pin, Mode: "output", Value: &v}, nil
}
func (g fakeGPIO) Configure(ctx context.Context, pin int, mode, pull string, initial int) (proto.GPIOPin, error) {
	g.f.op("configure")
	g.f.mu.Lock()
	g.f.pins[pin] = initial
	g.f.mu.Unlock()
	return g.State(ctx, pin)
}
func (g fakeGPIO) Read(ctx context.Context, pin int) (proto.GPIOPin, error) { return g.State(ctx, pin) }
func (g fakeGPIO) Write(ctx context.Context, pin, value int) (proto.GPIOPin, error) {
	g.f.op("write")
	g.f.mu.Lock()
	prev := g.f.pins[pin]
	g.f.pins[pin] = value
	g.f.mu.Unlock()
	st, err := g.State(ctx, pin)
	st.Previous = &prev
	return st, err
}

type fakePWM struct{ f *fakeHW }

func (p fakePWM) Set(_ context.Context, pin int, hz, duty float64) (proto.PWMState, error) {
	p.f.op("pwm")
	return proto.PWMState{Pin: pin, FrequencyHz: hz, DutyCyclePercent: duty, Enabled: true}, nil
}

type fakeI2C struct{ f *fakeHW }

func (i fakeI2C) Buses(context.Context) ([]proto.I2CBus, error) {
	return []proto.I2CBus{{Bus: 1, Name: "bcm2835 (i2c@7e804000)"}, {Bus: 2, Name: "other"}}, nil
}
func (i fakeI2C) Scan(_ context.Context, bus int) (proto.I2CScanResp, error) {
	i.f.op("scan")
	return proto.I2CScanResp{Bus: bus, Addresses: []int{0x48, 0x76}, InUse: []int{}}, nil
}
func (i fakeI2C) Read(_ context.Context, bus, addr int, reg *int, n int) ([]int, error) {
	i.f.op("read")
	return make([]int, n), nil
}
func (i fakeI2C) Write(_ context.Context, bus, addr int, reg *int, data []int) error {
	i.f.op("i2cwrite")
	return nil
}
func (i fakeI2C) Sensor(_ context.Context, s config.Sensor) (proto.SensorReading, error) {
	i.f.op("sensor")
	t := 21.5
	return proto.SensorReading{Name: s.Name, Type: s.Type, TemperatureC: &t}, nil
}

// hwPolicy is defaultPolicy with GPIO and I²C on, their writes included.
func hwPolicy() privhelper.Policy {
	p := defaultPolicy()
	p.Config.GPIO, p.Config.I2C = hwGPIO(), hwI2C()
	return p
}

func hwGPIO() config.GPIO {
	return config.GPIO{Enabled: true, Writes: true, Revert: "previous", Pins: []config.Pin{
		{Pin: 17, Mode: "output", Value: 0}, {Pin: 18, Mode: "output", PWM: true}, {Pin: 4, Mode: "input", Pull: "up"}}}
}

func hwI2C() config.I2C {
	return config.I2C{Enabled: true, Writes: true, Read: []string{"1:0x76", "1:0x48"}, Write: []string{"1:0x48"},
		Sensors: []config.Sensor{{Name: "greenhouse", Type: "bme280", Bus: 1, Address: 0x76}, {Name: "declared", Type: "tmp102", Bus: 2, Address: 0x48}}}
}

func code(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// The helper enforces its own allowlists: with the agent bypassed, a forbidden
// pin, bus, address or write is refused and never reaches the hardware.
func TestHelperEnforcesHardwareAllowlists(t *testing.T) {
	fh := newFakeHW()
	pol := hwPolicy()
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Hardware: fh.hardware()})
	c := newClient(t, h.sock)
	ctx := context.Background()
	reg := 5
	for name, call := range map[string]func() error{
		"read forbidden pin": func() error { _, err := client.Call(ctx, c, proto.GPIORead, proto.GPIOReadReq{Pin: 5}); return err },
		"write forbidden pin": func() error {
			_, err := client.Call(ctx, c, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 5, Value: 1})
			return err
		},
		"configure forbidden pin": func() error {
			_, err := client.Call(ctx, c, proto.GPIOConfigure, proto.GPIOConfigureReq{Pin: 22, Mode: "output", Pull: "none"})
			return err
		},
		"state of forbidden pin": func() error {
			_, err := client.Call(ctx, c, proto.GPIOState, proto.GPIOStateReq{Pins: []int{17, 5}})
			return err
		},
		"pwm on a non-pwm pin": func() error {
			_, err := client.Call(ctx, c, proto.PWMSet, proto.PWMSetReq{Pin: 17, FrequencyHz: 100, DutyCyclePercent: 50})
			return err
		},
		"scan a forbidden bus": func() error { _, err := client.Call(ctx, c, proto.I2CScan, proto.I2CScanReq{Bus: 2}); return err },
		"read a forbidden addr": func() error {
			_, err := client.Call(ctx, c, proto.I2CRead, proto.I2CReadReq{Bus: 1, Address: 0x50, Length: 1})
			return err
		},
		"write a read-only addr": func() error {
			_, err := client.Call(ctx, c, proto.I2CWrite, proto.I2CWriteReq{Bus: 1, Address: 0x76, Register: &reg, Data: []int{1}})
			return err
		},
	} {
		if err := call(); code(err) != proto.CodePermissionDenied || !strings.Contains(err.Error(), "helper's config") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if ops := fh.opsSeen(); len(ops) != 0 {
		t.Fatalf("forbidden calls reached the hardware: %v", ops)
	}
	// And the allowed ones go through.
	st, err := client.Call(ctx, c, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 17, Value: 1})
	if err != nil || *st.Value != 1 || *st.Previous != 0 {
		t.Fatalf("write: %+v %v", st, err)
	}
	if _, err := client.Call(ctx, c, proto.PWMSet, proto.PWMSetReq{Pin: 18, FrequencyHz: 100, DutyCyclePercent: 50}); err != nil {
		t.Fatal(err)
	}
	sc, err := client.Call(ctx, c, proto.I2CScan, proto.I2CScanReq{Bus: 1})
	if err != nil || len(sc.Addresses) != 2 {
		t.Fatalf("scan: %+v %v", sc, err)
	}
	if _, err := client.Call(ctx, c, proto.I2CWrite, proto.I2CWriteReq{Bus: 1, Address: 0x48, Data: []int{1, 2}}); err != nil {
		t.Fatal(err)
	}
	buses, _ := client.Call(ctx, c, proto.I2CBuses, proto.I2CBusesReq{})
	if len(buses.Buses) != 1 || buses.Buses[0].Bus != 1 {
		t.Fatalf("buses beyond the allowlist: %+v", buses)
	}
	// A declared sensor is readable without a read-allowlist entry: declaring it is the consent.
	if r, err := client.Call(ctx, c, proto.SensorRead, proto.SensorReadReq{Name: "declared"}); err != nil || *r.TemperatureC != 21.5 {
		t.Fatalf("declared sensor: %+v %v", r, err)
	}
	if _, err := client.Call(ctx, c, proto.SensorRead, proto.SensorReadReq{Name: "nope"}); code(err) != proto.CodeNotFound {
		t.Fatalf("unknown sensor: %v", err)
	}
	if h.logs.find(t, "INFO", "gpio written") == nil {
		t.Error("write not logged")
	}
}

func TestHelperWritesSwitchedOff(t *testing.T) {
	fh := newFakeHW()
	pol := hwPolicy()
	pol.Config.GPIO.Writes, pol.Config.I2C.Writes = false, false
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Hardware: fh.hardware()})
	c := newClient(t, h.sock)
	ctx := context.Background()
	if _, err := client.Call(ctx, c, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 17, Value: 1}); code(err) != proto.CodePermissionDenied {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, proto.I2CWrite, proto.I2CWriteReq{Bus: 1, Address: 0x48, Data: []int{1}}); code(err) != proto.CodePermissionDenied {
		t.Fatal(err)
	}
	// Reads still work.
	if _, err := client.Call(ctx, c, proto.GPIORead, proto.GPIOReadReq{Pin: 17}); err != nil {
		t.Fatal(err)
	}
	if ops := fh.opsSeen(); len(ops) != 0 {
		t.Fatalf("%v", ops)
	}
}

func TestApplySafeStates(t *testing.T) {
	fh := newFakeHW()
	fh.pins[17] = 1 // left on before a reboot
	srv := privhelper.NewServer(privhelper.Options{Policy: hwPolicy(), Hardware: fh.hardware()})
	if err := srv.ApplySafeStates(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fh.pins[17] != 0 || len(fh.opsSeen()) != 3 {
		t.Fatalf("pins %v ops %v", fh.pins, fh.opsSeen())
	}
}

type fakeCamera struct{ f *fakeHW }

func (c fakeCamera) Capture(_ context.Context, r proto.CameraCaptureReq) (proto.CameraPhoto, error) {
	c.f.op("photo")
	return proto.CameraPhoto{Path: "/media/p.jpg", Width: r.Width, Height: r.Height, Format: r.Format}, nil
}

func TestHelperCameraSwitch(t *testing.T) {
	fh := newFakeHW()
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: hwPolicy(), Hardware: fh.hardware()})
	c := newClient(t, h.sock)
	req := proto.CameraCaptureReq{Width: 640, Height: 480, Format: "jpeg", Quality: 85}
	if _, err := client.Call(context.Background(), c, proto.CameraCapture, req); code(err) != proto.CodePermissionDenied {
		t.Fatalf("camera off by config, helper took a photo: %v", err)
	}
	if len(fh.opsSeen()) != 0 {
		t.Fatal("reached the camera")
	}
	req.Width = 800
	if _, err := client.Call(context.Background(), c, proto.CameraCapture, req); code(err) != proto.CodeInvalidArgument {
		t.Fatalf("bad size: %v", err)
	}
}

package privhelper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	hwi2c "github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/sensors"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Adapters from the hw packages to the helper's interfaces. They turn
// hardware errors into protocol errors a model can act on: a line another
// process holds names that process, a missing PWM chip names the config.txt
// line that enables it.

// GPIOFrom adapts a hw/gpio controller.
func GPIOFrom(c gpio.Controller) GPIO { return gpioAdapter{c} }

type gpioAdapter struct{ c gpio.Controller }

func pinOf(s gpio.PinState) proto.GPIOPin {
	return proto.GPIOPin{Pin: s.Pin, Mode: s.Mode, Value: s.Value, Pull: s.Pull, Consumer: s.Consumer, Chip: s.Chip, Line: s.Line}
}

func gpioErr(pin int, err error) error {
	var busy *gpio.BusyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &busy):
		return proto.Errorf(proto.CodeFailedPrecondition, "%v", err).With("pin", pin).With("consumer", busy.Consumer)
	case errors.Is(err, gpio.ErrNoSuchPin):
		return proto.Errorf(proto.CodeNotFound, "%v", err).With("pin", pin)
	case errors.Is(err, gpio.ErrNotOutput):
		return proto.Errorf(proto.CodeFailedPrecondition, "%v", err).With("pin", pin)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return proto.Errorf(proto.CodeUnavailable, "%v", err).With("pin", pin)
	}
	return proto.Errorf(proto.CodeInternal, "%v", err).With("pin", pin)
}

func (a gpioAdapter) State(ctx context.Context, pin int) (proto.GPIOPin, error) {
	s, err := a.c.State(ctx, pin)
	return pinOf(s), gpioErr(pin, err)
}

func (a gpioAdapter) Configure(ctx context.Context, pin int, mode, pull string, initial int) (proto.GPIOPin, error) {
	s, err := a.c.Configure(ctx, pin, gpio.Mode(mode), gpio.Pull(pull), initial)
	return pinOf(s), gpioErr(pin, err)
}

func (a gpioAdapter) Read(ctx context.Context, pin int) (proto.GPIOPin, error) {
	v, err := a.c.Read(ctx, pin)
	if err != nil {
		return proto.GPIOPin{}, gpioErr(pin, err)
	}
	s, err := a.c.State(ctx, pin)
	p := pinOf(s)
	p.Value = &v
	return p, gpioErr(pin, err)
}

func (a gpioAdapter) Write(ctx context.Context, pin, value int) (proto.GPIOPin, error) {
	before, err := a.c.State(ctx, pin)
	if err != nil {
		return proto.GPIOPin{}, gpioErr(pin, err)
	}
	if err := a.c.Write(ctx, pin, value); err != nil {
		return proto.GPIOPin{}, gpioErr(pin, err)
	}
	s, err := a.c.State(ctx, pin)
	p := pinOf(s)
	p.Previous = before.Value
	return p, gpioErr(pin, err)
}

// PWMFrom adapts a hw/pwm controller.
func PWMFrom(c pwm.Controller) PWM { return pwmAdapter{c} }

type pwmAdapter struct{ c pwm.Controller }

func (a pwmAdapter) Set(ctx context.Context, pin int, hz, duty float64) (proto.PWMState, error) {
	s, err := a.c.Set(ctx, pin, hz, duty)
	switch {
	case err == nil:
		return proto.PWMState{Pin: s.Pin, FrequencyHz: s.FrequencyHz, DutyCyclePercent: s.DutyCyclePercent, Enabled: s.Enabled, Chip: s.Chip, Channel: s.Channel}, nil
	case errors.Is(err, pwm.ErrNoPWM):
		return proto.PWMState{}, proto.Errorf(proto.CodeFailedPrecondition, "%v", err).With("fix_hint", "add "+pwm.EnableHint+" to /boot/firmware/config.txt and reboot")
	case errors.Is(err, pwm.ErrNotPWMPin):
		return proto.PWMState{}, proto.Errorf(proto.CodeFailedPrecondition, "%v", err).With("pwm_pins", pwm.Pins())
	}
	return proto.PWMState{}, proto.Errorf(proto.CodeInternal, "%v", err)
}

// I2CFrom adapts a hw/i2c opener; sysRoot locates /sys for driver bindings.
// Buses stay open once used: sensors are read again and again.
func I2CFrom(o hwi2c.Opener, sysRoot string) *I2CAdapter {
	return &I2CAdapter{o: o, sysRoot: sysRoot, open: map[int]hwi2c.BusCloser{}}
}

// I2CAdapter implements I2C over hw/i2c and hw/sensors.
type I2CAdapter struct {
	o       hwi2c.Opener
	sysRoot string
	mu      sync.Mutex
	open    map[int]hwi2c.BusCloser
}

func (a *I2CAdapter) bus(bus int) (hwi2c.BusCloser, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b, ok := a.open[bus]; ok {
		return b, nil
	}
	b, err := a.o.Open(bus)
	if err != nil {
		return nil, proto.Errorf(proto.CodeNotFound, "%v", err).With("bus", bus)
	}
	a.open[bus] = b
	return b, nil
}

// Close closes every open bus.
func (a *I2CAdapter) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for n, b := range a.open {
		errs = append(errs, b.Close())
		delete(a.open, n)
	}
	return errors.Join(errs...)
}

// driverBound reports the kernel driver holding bus:addr, if any: such an
// address belongs to the kernel, and raw access could confuse its driver.
func (a *I2CAdapter) driverBound(bus, addr int) string {
	link, err := os.Readlink(filepath.Join(a.sysRoot, "sys/bus/i2c/devices", fmt.Sprintf("%d-%04x", bus, addr), "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(link)
}

func i2cErr(bus, addr int, err error) error {
	if err == nil {
		return nil
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	// No answer, NACK or an operation the adapter cannot do: the device or
	// bus is not in a state to serve it, which the caller can act on.
	return proto.Errorf(proto.CodeFailedPrecondition, "%v", err).With("bus", bus).With("address", addr)
}

func (a *I2CAdapter) Buses(ctx context.Context) ([]proto.I2CBus, error) {
	bs, err := a.o.Buses(ctx)
	if err != nil {
		return nil, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	out := make([]proto.I2CBus, 0, len(bs))
	for _, b := range bs {
		out = append(out, proto.I2CBus{Bus: b.Bus, Name: b.Name})
	}
	return out, nil
}

func (a *I2CAdapter) Scan(ctx context.Context, bus int) (proto.I2CScanResp, error) {
	b, err := a.bus(bus)
	if err != nil {
		return proto.I2CScanResp{}, err
	}
	res, err := hwi2c.Scan(ctx, b, bus, a.sysRoot)
	if err != nil {
		return proto.I2CScanResp{}, i2cErr(bus, 0, err)
	}
	out := proto.I2CScanResp{Bus: bus, Addresses: res.Addresses, InUse: []int{}}
	for addr := range res.Drivers {
		out.InUse = append(out.InUse, addr)
	}
	slices.Sort(out.InUse)
	if out.Addresses == nil {
		out.Addresses = []int{}
	}
	return out, nil
}

func reg8(r *int) *uint8 {
	if r == nil {
		return nil
	}
	v := uint8(*r)
	return &v
}

func (a *I2CAdapter) Read(ctx context.Context, bus, addr int, reg *int, n int) ([]int, error) {
	if d := a.driverBound(bus, addr); d != "" {
		return nil, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: i2c bus %d address 0x%02x is held by the kernel driver %q", bus, addr, d)
	}
	b, err := a.bus(bus)
	if err != nil {
		return nil, err
	}
	data, err := hwi2c.ReadReg(b, uint16(addr), reg8(reg), n)
	if err != nil {
		return nil, i2cErr(bus, addr, err)
	}
	out := make([]int, len(data))
	for i, x := range data {
		out[i] = int(x)
	}
	return out, nil
}

func (a *I2CAdapter) Write(ctx context.Context, bus, addr int, reg *int, data []int) error {
	if d := a.driverBound(bus, addr); d != "" {
		return proto.Errorf(proto.CodeFailedPrecondition, "privhelper: i2c bus %d address 0x%02x is held by the kernel driver %q", bus, addr, d)
	}
	b, err := a.bus(bus)
	if err != nil {
		return err
	}
	buf := make([]byte, len(data))
	for i, x := range data {
		buf[i] = byte(x)
	}
	return i2cErr(bus, addr, hwi2c.WriteReg(b, uint16(addr), reg8(reg), buf))
}

func (a *I2CAdapter) Sensor(ctx context.Context, s config.Sensor) (proto.SensorReading, error) {
	b, err := a.bus(s.Bus)
	if err != nil {
		return proto.SensorReading{}, err
	}
	r, err := sensors.Read(ctx, b, sensors.Spec{Name: s.Name, Type: s.Type, Bus: s.Bus, Addr: s.Address})
	if err != nil {
		return proto.SensorReading{}, i2cErr(s.Bus, s.Address, err)
	}
	return proto.SensorReading{Name: r.Name, Type: r.Type, TemperatureC: r.TemperatureC, PressureHPa: r.PressureHPa, HumidityPercent: r.HumidityPercent}, nil
}

// CameraFrom adapts a hw/camera camera. Photos are handed to owner uid (the
// agent's) so the agent can read them back for an inline image.
func CameraFrom(c camera.Camera, owner int) Camera { return cameraAdapter{c, owner} }

type cameraAdapter struct {
	c     camera.Camera
	owner int
}

func (a cameraAdapter) Capture(ctx context.Context, r proto.CameraCaptureReq) (proto.CameraPhoto, error) {
	p, err := a.c.Capture(ctx, camera.Request{Width: r.Width, Height: r.Height, Format: r.Format, Quality: r.Quality})
	var busy *camera.BusyError
	switch {
	case err == nil:
	case errors.As(err, &busy):
		return proto.CameraPhoto{}, proto.Errorf(proto.CodeResourceExhausted, "%v", err).With("in_use_by", busy.Holder)
	case errors.Is(err, camera.ErrBusy):
		return proto.CameraPhoto{}, proto.Errorf(proto.CodeResourceExhausted, "%v", err)
	case errors.Is(err, camera.ErrNoCamera):
		return proto.CameraPhoto{}, proto.Errorf(proto.CodeFailedPrecondition, "%v", err).
			With("fix_hint", "connect a camera module and check `rpicam-hello --list-cameras` on the device")
	case errors.Is(err, camera.ErrInvalidRequest):
		return proto.CameraPhoto{}, proto.Errorf(proto.CodeInvalidArgument, "%v", err)
	default:
		return proto.CameraPhoto{}, proto.Errorf(proto.CodeInternal, "%v", err)
	}
	if os.Geteuid() == 0 && a.owner > 0 {
		_ = os.Chown(p.Path, a.owner, -1)
	}
	return proto.CameraPhoto{Path: p.Path, Width: p.Width, Height: p.Height, Format: p.Format, SizeBytes: p.SizeBytes, Taken: p.Taken}, nil
}

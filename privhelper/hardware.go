package privhelper

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The helper's view of the hardware: small interfaces the hw packages are
// adapted to (see adapters.go), so this file is only policy and plumbing.

// GPIO drives pins by BCM number.
type GPIO interface {
	State(ctx context.Context, pin int) (proto.GPIOPin, error)
	Configure(ctx context.Context, pin int, mode, pull string, initial int) (proto.GPIOPin, error)
	Read(ctx context.Context, pin int) (proto.GPIOPin, error)
	// Write drives a configured output and reports the value before.
	Write(ctx context.Context, pin, value int) (proto.GPIOPin, error)
}

// PWM drives hardware PWM channels by the GPIO they are routed to.
type PWM interface {
	Set(ctx context.Context, pin int, hz, duty float64) (proto.PWMState, error)
}

// I2C reaches the buses.
type I2C interface {
	Buses(ctx context.Context) ([]proto.I2CBus, error)
	Scan(ctx context.Context, bus int) (proto.I2CScanResp, error)
	Read(ctx context.Context, bus, addr int, reg *int, n int) ([]int, error)
	Write(ctx context.Context, bus, addr int, reg *int, data []int) error
	Sensor(ctx context.Context, s config.Sensor) (proto.SensorReading, error)
}

// Camera takes photos into the media root.
type Camera interface {
	Capture(ctx context.Context, r proto.CameraCaptureReq) (proto.CameraPhoto, error)
}

// Hardware groups the backends; nil members are not served (not_found).
type Hardware struct {
	GPIO   GPIO
	PWM    PWM
	I2C    I2C
	Camera Camera
	// Button opens the approval button's lines ([guard.button]; the
	// Linux character device, or the simulated board's, which alone also
	// serves button.press). nil: button.* is not served.
	Button gpio.ButtonOpener
}

func (s *Server) registerHardware() {
	if s.hw.GPIO != nil {
		handle(s.mux, proto.GPIOState, s.gpioState)
		handle(s.mux, proto.GPIOConfigure, s.gpioConfigure)
		handle(s.mux, proto.GPIORead, s.gpioRead)
		handle(s.mux, proto.GPIOWrite, s.gpioWrite)
	}
	if s.hw.PWM != nil {
		handle(s.mux, proto.PWMSet, s.pwmSet)
	}
	if s.hw.I2C != nil {
		handle(s.mux, proto.I2CBuses, s.i2cBuses)
		handle(s.mux, proto.I2CScan, s.i2cScan)
		handle(s.mux, proto.I2CRead, s.i2cRead)
		handle(s.mux, proto.I2CWrite, s.i2cWrite)
		handle(s.mux, proto.SensorRead, s.sensorRead)
	}
	if s.hw.Camera != nil {
		handle(s.mux, proto.CameraCapture, s.cameraCapture)
	}
}

func (s *Server) cameraCapture(ctx context.Context, r proto.CameraCaptureReq) (proto.CameraPhoto, error) {
	if err := s.require(config.SwitchCameraEnabled, "the camera is disabled"); err != nil {
		return proto.CameraPhoto{}, err
	}
	p, err := s.hw.Camera.Capture(ctx, r)
	if err == nil {
		s.logOp(ctx, "photo taken", "path", p.Path, "bytes", p.SizeBytes)
	}
	return p, err
}

func denied(format string, args ...any) *proto.Error {
	return proto.Errorf(proto.CodePermissionDenied, "privhelper: "+format+" by the helper's config", args...)
}

func (s *Server) pin(pin int) (config.Pin, error) {
	if err := s.reserved(pin); err != nil {
		return config.Pin{}, err
	}
	if err := s.require(config.SwitchGPIOEnabled, "gpio is disabled"); err != nil {
		return config.Pin{}, err
	}
	p, ok := s.rules().policy.Config.GPIO.Pin(pin)
	if !ok {
		return config.Pin{}, denied("GPIO%d is not allowed", pin).With("pin", pin)
	}
	return p, nil
}

func (s *Server) gpioWritable(pin int) (config.Pin, error) {
	p, err := s.pin(pin)
	if err == nil {
		err = s.require(config.SwitchGPIOWrites, "gpio writes are disabled")
	}
	return p, err
}

func (s *Server) gpioState(ctx context.Context, r proto.GPIOStateReq) (proto.GPIOStateResp, error) {
	pins := r.Pins
	if len(pins) == 0 {
		// All pins means all the caller may see: never the button's.
		reserved := s.rules().policy.Config.Guard.ReservedPins()
		for _, p := range s.rules().policy.Config.GPIO.Pins {
			if !slices.Contains(reserved, p.Pin) {
				pins = append(pins, p.Pin)
			}
		}
	}
	out := proto.GPIOStateResp{Pins: []proto.GPIOPin{}}
	for _, n := range pins {
		if _, err := s.pin(n); err != nil {
			return out, err
		}
		st, err := s.hw.GPIO.State(ctx, n)
		if err != nil {
			return out, err
		}
		out.Pins = append(out.Pins, st)
	}
	return out, nil
}

func (s *Server) gpioConfigure(ctx context.Context, r proto.GPIOConfigureReq) (proto.GPIOPin, error) {
	p, err := s.gpioWritable(r.Pin)
	if err != nil {
		return proto.GPIOPin{}, err
	}
	// A new output starts at the pin's safe value, never at a random level.
	st, err := s.hw.GPIO.Configure(ctx, r.Pin, r.Mode, r.Pull, p.Value)
	if err == nil {
		s.logOp(ctx, "gpio configured", "pin", r.Pin, "mode", r.Mode, "pull", r.Pull)
	}
	return st, err
}

func (s *Server) gpioRead(ctx context.Context, r proto.GPIOReadReq) (proto.GPIOPin, error) {
	if _, err := s.pin(r.Pin); err != nil {
		return proto.GPIOPin{}, err
	}
	return s.hw.GPIO.Read(ctx, r.Pin)
}

func (s *Server) gpioWrite(ctx context.Context, r proto.GPIOWriteReq) (proto.GPIOPin, error) {
	if _, err := s.gpioWritable(r.Pin); err != nil {
		return proto.GPIOPin{}, err
	}
	st, err := s.hw.GPIO.Write(ctx, r.Pin, r.Value)
	if err == nil {
		s.logOp(ctx, "gpio written", "pin", r.Pin, "value", r.Value)
	}
	return st, err
}

func (s *Server) pwmSet(ctx context.Context, r proto.PWMSetReq) (proto.PWMState, error) {
	p, err := s.gpioWritable(r.Pin)
	if err != nil {
		return proto.PWMState{}, err
	}
	if !p.PWM {
		return proto.PWMState{}, denied("PWM on GPIO%d is not allowed", r.Pin).With("pin", r.Pin)
	}
	st, err := s.hw.PWM.Set(ctx, r.Pin, r.FrequencyHz, r.DutyCyclePercent)
	if err == nil {
		s.logOp(ctx, "pwm set", "pin", r.Pin, "hz", r.FrequencyHz, "duty", r.DutyCyclePercent)
	}
	return st, err
}

func (s *Server) i2cAllowed(list []string, what string, bus, addr int) error {
	if err := s.require(config.SwitchI2CEnabled, "i2c is disabled"); err != nil {
		return err
	}
	if what == "write" {
		if err := s.require(config.SwitchI2CWrites, "i2c writes are disabled"); err != nil {
			return err
		}
	}
	ok := config.I2CAllowed(list, bus, addr)
	if addr < 0 {
		ok = slices.ContainsFunc(list, func(e string) bool { b, _, err := config.ParseI2CAddr(e); return err == nil && b == bus })
	}
	if !ok {
		return denied("i2c %s of bus %d address 0x%02x is not allowed", what, bus, max(addr, 0)).With("bus", bus).With("address", addr)
	}
	return nil
}

// i2cBuses lists only the buses the read allowlist names.
func (s *Server) i2cBuses(ctx context.Context, _ proto.I2CBusesReq) (proto.I2CBusesResp, error) {
	all, err := s.hw.I2C.Buses(ctx)
	if err != nil {
		return proto.I2CBusesResp{}, err
	}
	out := proto.I2CBusesResp{Buses: []proto.I2CBus{}}
	for _, b := range all {
		if s.i2cAllowed(s.rules().policy.Config.I2C.Read, "read", b.Bus, -1) == nil {
			out.Buses = append(out.Buses, b)
		}
	}
	return out, nil
}

func (s *Server) i2cScan(ctx context.Context, r proto.I2CScanReq) (proto.I2CScanResp, error) {
	if err := s.i2cAllowed(s.rules().policy.Config.I2C.Read, "read", r.Bus, -1); err != nil {
		return proto.I2CScanResp{}, err
	}
	res, err := s.hw.I2C.Scan(ctx, r.Bus)
	if err != nil {
		return res, err
	}
	// Report only what the allowlist lets the caller address.
	res.Addresses = slices.DeleteFunc(res.Addresses, func(a int) bool { return !config.I2CAllowed(s.rules().policy.Config.I2C.Read, r.Bus, a) })
	return res, nil
}

func (s *Server) i2cRead(ctx context.Context, r proto.I2CReadReq) (proto.I2CData, error) {
	if err := s.i2cAllowed(s.rules().policy.Config.I2C.Read, "read", r.Bus, r.Address); err != nil {
		return proto.I2CData{}, err
	}
	data, err := s.hw.I2C.Read(ctx, r.Bus, r.Address, r.Register, r.Length)
	return proto.I2CData{Bus: r.Bus, Address: r.Address, Register: r.Register, Data: data}, err
}

func (s *Server) i2cWrite(ctx context.Context, r proto.I2CWriteReq) (proto.I2CData, error) {
	if err := s.i2cAllowed(s.rules().policy.Config.I2C.Write, "write", r.Bus, r.Address); err != nil {
		return proto.I2CData{}, err
	}
	if err := s.hw.I2C.Write(ctx, r.Bus, r.Address, r.Register, r.Data); err != nil {
		return proto.I2CData{}, err
	}
	s.logOp(ctx, "i2c written", "bus", r.Bus, "address", r.Address, "register", r.Register, "bytes", len(r.Data))
	return proto.I2CData{Bus: r.Bus, Address: r.Address, Register: r.Register, Data: r.Data}, nil
}

func (s *Server) sensorRead(ctx context.Context, r proto.SensorReadReq) (proto.SensorReading, error) {
	if err := s.require(config.SwitchI2CEnabled, "i2c is disabled"); err != nil {
		return proto.SensorReading{}, err
	}
	// Declaring a sensor in [i2c] sensors is the owner's consent to read it:
	// it needs no separate entry in the read allowlist.
	for _, sn := range s.rules().policy.Config.I2C.Sensors {
		if sn.Name == r.Name {
			return s.hw.I2C.Sensor(ctx, sn)
		}
	}
	return proto.SensorReading{}, proto.Errorf(proto.CodeNotFound, "privhelper: no sensor %q in the helper's config", r.Name)
}

func (s *Server) logOp(ctx context.Context, msg string, args ...any) {
	p := peerFrom(ctx)
	s.log.Info("privhelper: "+msg, append(args, "uid", p.UID, "pid", p.PID)...)
}

// ApplySafeStates puts every allowed pin into its configured safe state, so a
// relay is off after a reboot or a helper restart until someone says otherwise.
func (s *Server) ApplySafeStates(ctx context.Context) error {
	pol := &s.rules().policy
	if s.hw.GPIO == nil || !pol.Allows(config.SwitchGPIOEnabled) {
		return nil
	}
	var errs []error
	for _, p := range pol.Config.GPIO.Pins {
		if slices.Contains(pol.Config.Guard.ReservedPins(), p.Pin) {
			continue // the button holds it; config.Validate refuses the overlap anyway
		}
		pull := p.Pull
		if pull == "" {
			pull = "none"
		}
		if _, err := s.hw.GPIO.Configure(ctx, p.Pin, p.Mode, pull, p.Value); err != nil {
			errs = append(errs, fmt.Errorf("GPIO%d: %w", p.Pin, err))
			continue
		}
		s.log.Info("privhelper: safe state applied", "pin", p.Pin, "mode", p.Mode, "value", p.Value, "pull", pull)
	}
	return errors.Join(errs...)
}

package proto

import (
	"fmt"
	"time"
)

// The hardware part of the table: GPIO, PWM, I2C and named sensors. The
// helper re-checks every pin, bus and address against its own allowlists.
var (
	GPIOState     = Method[GPIOStateReq, GPIOStateResp]{"gpio.state", Quick}
	GPIOConfigure = Method[GPIOConfigureReq, GPIOPin]{"gpio.configure", Quick}
	GPIORead      = Method[GPIOReadReq, GPIOPin]{"gpio.read", Quick}
	GPIOWrite     = Method[GPIOWriteReq, GPIOPin]{"gpio.write", Quick}
	PWMSet        = Method[PWMSetReq, PWMState]{"pwm.set", Quick}
	I2CBuses      = Method[I2CBusesReq, I2CBusesResp]{"i2c.buses", Quick}
	I2CScan       = Method[I2CScanReq, I2CScanResp]{"i2c.scan", Quick}
	I2CRead       = Method[I2CReadReq, I2CData]{"i2c.read", Quick}
	I2CWrite      = Method[I2CWriteReq, I2CData]{"i2c.write", Quick}
	SensorRead    = Method[SensorReadReq, SensorReading]{"sensor.read", Quick}
)

// hardwareMethods lists the hardware methods for Methods.
func hardwareMethods() []Info {
	return []Info{GPIOState.Info(), GPIOConfigure.Info(), GPIORead.Info(), GPIOWrite.Info(), PWMSet.Info(),
		I2CBuses.Info(), I2CScan.Info(), I2CRead.Info(), I2CWrite.Info(), SensorRead.Info(), CameraCapture.Info()}
}

// Bounds shared by agent and helper.
const (
	MaxPin      = 53 // BCM numbers on the Pi's two GPIO banks
	MaxI2CBytes = 32 // per read or write
	MaxPWMHz    = 50000
)

// GPIOPin is one pin as the helper sees it.
type GPIOPin struct {
	Pin      int    `json:"pin"`
	Mode     string `json:"mode"` // input, output, alt, unknown
	Value    *int   `json:"value,omitempty"`
	Pull     string `json:"pull,omitempty"`
	Consumer string `json:"consumer,omitempty"`
	Chip     string `json:"chip,omitempty"`
	Line     int    `json:"line"`
	Previous *int   `json:"previous,omitempty"` // gpio.write: the value before the write
}

// GPIOStateReq asks for the allowed pins' state (all when Pins is empty).
type GPIOStateReq struct {
	Pins []int `json:"pins"`
}

// GPIOStateResp lists them.
type GPIOStateResp struct {
	Pins []GPIOPin `json:"pins"`
}

// GPIOConfigureReq sets a pin's mode and pull.
type GPIOConfigureReq struct {
	Pin  int    `json:"pin"`
	Mode string `json:"mode"` // input, output
	Pull string `json:"pull"` // none, up, down
}

// GPIOReadReq reads a pin.
type GPIOReadReq struct {
	Pin int `json:"pin"`
}

// GPIOWriteReq drives an output pin.
type GPIOWriteReq struct {
	Pin   int `json:"pin"`
	Value int `json:"value"`
}

// PWMSetReq sets hardware PWM on a pin.
type PWMSetReq struct {
	Pin              int     `json:"pin"`
	FrequencyHz      float64 `json:"frequency_hz"`
	DutyCyclePercent float64 `json:"duty_cycle_percent"`
}

// PWMState is the effective PWM state.
type PWMState struct {
	Pin              int     `json:"pin"`
	FrequencyHz      float64 `json:"frequency_hz"`
	DutyCyclePercent float64 `json:"duty_cycle_percent"`
	Enabled          bool    `json:"enabled"`
	Chip             string  `json:"chip"`
	Channel          int     `json:"channel"`
}

// I2CBusesReq lists buses.
type I2CBusesReq struct{}

// I2CBus is one adapter.
type I2CBus struct {
	Bus  int    `json:"bus"`
	Name string `json:"name"`
}

// I2CBusesResp lists the adapters the helper may read.
type I2CBusesResp struct {
	Buses []I2CBus `json:"buses"`
}

// I2CScanReq scans one bus.
type I2CScanReq struct {
	Bus int `json:"bus"`
}

// I2CScanResp is what answered, and what a kernel driver holds.
type I2CScanResp struct {
	Bus       int   `json:"bus"`
	Addresses []int `json:"addresses"`
	InUse     []int `json:"in_use"` // bound to a kernel driver: not probed
}

// I2CReadReq reads Length bytes, from Register when set.
type I2CReadReq struct {
	Bus      int  `json:"bus"`
	Address  int  `json:"address"`
	Register *int `json:"register"`
	Length   int  `json:"length"`
}

// I2CWriteReq writes Data, to Register when set.
type I2CWriteReq struct {
	Bus      int   `json:"bus"`
	Address  int   `json:"address"`
	Register *int  `json:"register"`
	Data     []int `json:"data"`
}

// I2CData is what was read or written.
type I2CData struct {
	Bus      int   `json:"bus"`
	Address  int   `json:"address"`
	Register *int  `json:"register,omitempty"`
	Data     []int `json:"data"`
}

// SensorReadReq names a configured sensor.
type SensorReadReq struct {
	Name string `json:"name"`
}

// SensorReading is a converted reading.
type SensorReading struct {
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	TemperatureC    *float64 `json:"temperature_celsius,omitempty"`
	PressureHPa     *float64 `json:"pressure_hpa,omitempty"`
	HumidityPercent *float64 `json:"humidity_percent,omitempty"`
}

func checkPin(pin int) error {
	if pin < 0 || pin > MaxPin {
		return invalid("pin", pin, fmt.Sprintf("proto: pin %d is outside 0..%d", pin, MaxPin)).With("max", MaxPin)
	}
	return nil
}

func checkAddr(bus, addr int) error {
	if bus < 0 || bus > 255 {
		return invalid("bus", bus, fmt.Sprintf("proto: i2c bus %d is outside 0..255", bus))
	}
	if addr < 0x03 || addr > 0x77 {
		return invalid("address", addr, fmt.Sprintf("proto: i2c address 0x%02x is outside 0x03..0x77", addr))
	}
	return nil
}

func checkRegister(r *int) error {
	if r != nil && (*r < 0 || *r > 255) {
		return invalid("register", *r, fmt.Sprintf("proto: register %d is outside 0..255", *r))
	}
	return nil
}

// Validate checks the pins.
func (r GPIOStateReq) Validate() error {
	if len(r.Pins) > MaxPin+1 {
		return invalid("pins", len(r.Pins), "proto: too many pins")
	}
	for _, p := range r.Pins {
		if err := checkPin(p); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks pin, mode and pull.
func (r GPIOConfigureReq) Validate() error {
	if err := checkPin(r.Pin); err != nil {
		return err
	}
	if r.Mode != "input" && r.Mode != "output" {
		return invalid("mode", r.Mode, fmt.Sprintf("proto: mode %q is not input or output", r.Mode))
	}
	switch r.Pull {
	case "none", "up", "down":
	default:
		return invalid("pull", r.Pull, fmt.Sprintf("proto: pull %q is not none, up or down", r.Pull))
	}
	return nil
}

// Validate checks the pin.
func (r GPIOReadReq) Validate() error { return checkPin(r.Pin) }

// Validate checks pin and value.
func (r GPIOWriteReq) Validate() error {
	if err := checkPin(r.Pin); err != nil {
		return err
	}
	if r.Value != 0 && r.Value != 1 {
		return invalid("value", r.Value, fmt.Sprintf("proto: value %d is not 0 or 1", r.Value))
	}
	return nil
}

// Validate checks pin, frequency and duty cycle.
func (r PWMSetReq) Validate() error {
	if err := checkPin(r.Pin); err != nil {
		return err
	}
	if !(r.FrequencyHz >= 1 && r.FrequencyHz <= MaxPWMHz) {
		return invalid("frequency_hz", r.FrequencyHz, fmt.Sprintf("proto: frequency %v Hz is outside 1..%d", r.FrequencyHz, MaxPWMHz))
	}
	if !(r.DutyCyclePercent >= 0 && r.DutyCyclePercent <= 100) {
		return invalid("duty_cycle_percent", r.DutyCyclePercent, fmt.Sprintf("proto: duty cycle %v%% is outside 0..100", r.DutyCyclePercent))
	}
	return nil
}

// Validate accepts every I2CBusesReq.
func (I2CBusesReq) Validate() error { return nil }

// Validate checks the bus.
func (r I2CScanReq) Validate() error {
	if r.Bus < 0 || r.Bus > 255 {
		return invalid("bus", r.Bus, fmt.Sprintf("proto: i2c bus %d is outside 0..255", r.Bus))
	}
	return nil
}

// Validate checks bus, address, register and length.
func (r I2CReadReq) Validate() error {
	if err := checkAddr(r.Bus, r.Address); err != nil {
		return err
	}
	if err := checkRegister(r.Register); err != nil {
		return err
	}
	if r.Length < 1 || r.Length > MaxI2CBytes {
		return invalid("length", r.Length, fmt.Sprintf("proto: length %d is outside 1..%d", r.Length, MaxI2CBytes))
	}
	return nil
}

// Validate checks bus, address, register and data.
func (r I2CWriteReq) Validate() error {
	if err := checkAddr(r.Bus, r.Address); err != nil {
		return err
	}
	if err := checkRegister(r.Register); err != nil {
		return err
	}
	if len(r.Data) < 1 || len(r.Data) > MaxI2CBytes {
		return invalid("data", len(r.Data), fmt.Sprintf("proto: %d bytes; write 1..%d", len(r.Data), MaxI2CBytes))
	}
	for _, b := range r.Data {
		if b < 0 || b > 255 {
			return invalid("data", b, fmt.Sprintf("proto: byte %d is outside 0..255", b))
		}
	}
	return nil
}

// Validate checks the name.
func (r SensorReadReq) Validate() error {
	if r.Name == "" {
		return invalid("name", r.Name, "proto: sensor name is empty")
	}
	return checkText("name", r.Name, 64)
}

// CameraCapture takes one photo into the helper's media root.
var CameraCapture = Method[CameraCaptureReq, CameraPhoto]{"camera.capture", Quick}

// CameraCaptureReq is the photo to take.
type CameraCaptureReq struct {
	Width   int    `json:"width"`
	Height  int    `json:"height"`
	Format  string `json:"format"` // jpeg, png
	Quality int    `json:"quality"`
}

// CameraPhoto is where it went.
type CameraPhoto struct {
	Path      string    `json:"path"`
	Width     int       `json:"width"`
	Height    int       `json:"height"`
	Format    string    `json:"format"`
	SizeBytes int64     `json:"size_bytes"`
	Taken     time.Time `json:"taken"`
}

// Validate checks the size against the spec's set, format and quality.
func (r CameraCaptureReq) Validate() error {
	switch fmt.Sprintf("%dx%d", r.Width, r.Height) {
	case "640x480", "1280x720", "1920x1080":
	default:
		return invalid("width", fmt.Sprintf("%dx%d", r.Width, r.Height), "proto: resolution must be 640x480, 1280x720 or 1920x1080")
	}
	if r.Format != "jpeg" && r.Format != "png" {
		return invalid("format", r.Format, fmt.Sprintf("proto: format %q is not jpeg or png", r.Format))
	}
	if r.Quality < 1 || r.Quality > 100 {
		return invalid("quality", r.Quality, fmt.Sprintf("proto: quality %d is outside 1..100", r.Quality))
	}
	return nil
}

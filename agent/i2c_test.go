package agent

import (
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestI2CAndSensorsOnTheSimBoard(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Write = []string{"1:0x50"} })
	scan, _ := callAs[i2cScanOut](t, r, reader, "i2c_scan_bus", map[string]any{"bus": 1})
	diff(t, "scan", i2cScanOut{Bus: 1, Addresses: []int{0x48, 0x50, 0x76}, InUse: []int{}}, scan)
	_, e := callAs[i2cScanOut](t, r, reader, "i2c_scan_bus", map[string]any{"bus": 3})
	wantErr(t, e, CodePermissionDenied, map[string]any{"address": -1.0, "allowed": []any{"1:*"}, "bus": 3.0}) // outside the allowlist
	// BME280 chip id through a register read.
	reg := func(v int) *int { return &v }
	read, _ := callAs[i2cReadOut](t, r, reader, "i2c_read", map[string]any{"bus": 1, "address": 0x76, "register": 0xD0, "length": 1})
	diff(t, "chip id", i2cReadOut{Bus: 1, Address: 0x76, Register: reg(0xD0), Data: []int{0x60}}, read)

	// Writes: high risk, separate allowlist.
	w := map[string]any{"bus": 1, "address": 0x50, "register": 0x10, "data": []int{1, 2, 3}}
	_, e = callAs[i2cWriteOut](t, r, operator, "i2c_write", w)
	wantErr(t, e, CodeFailedPrecondition, nil) // no confirm
	bad := map[string]any{"bus": 1, "address": 0x76, "register": 0xF4, "data": []int{0}, "confirm": true, "reason": "x"}
	_, e = callAs[i2cWriteOut](t, r, operator, "i2c_write", bad)
	wantErr(t, e, CodePermissionDenied, map[string]any{"address": 118.0, "allowed": []any{"1:0x50"}, "bus": 1.0})
	if !strings.Contains(e.FixHint, "[i2c] write") {
		t.Errorf("write to a read-only address: the hint does not name the switch: %+v", e)
	}
	w["confirm"], w["reason"] = true, "calibrate"
	written, _ := callAs[i2cWriteOut](t, r, operator, "i2c_write", w)
	diff(t, "write", i2cWriteOut{Bus: 1, Address: 0x50, Register: reg(0x10), BytesWritten: 3}, written)
	read, _ = callAs[i2cReadOut](t, r, reader, "i2c_read", map[string]any{"bus": 1, "address": 0x50, "register": 0x10, "length": 3})
	diff(t, "read back", i2cReadOut{Bus: 1, Address: 0x50, Register: reg(0x10), Data: []int{1, 2, 3}}, read)

	// Sensors by name, in units.
	r.bme.SetEnv(23.4, 1001.5, 61)
	s, _ := callAs[SensorsReadOut](t, r, reader, "sensors_read", map[string]any{"name": "greenhouse"})
	f := func(v float64) *float64 { return &v }
	diff(t, "greenhouse", SensorsReadOut{Name: "greenhouse", Type: "bme280", TemperatureC: f(23.4), PressureHPa: f(1001.5), HumidityPercent: f(61)}, s)
	_, e = callAs[SensorsReadOut](t, r, reader, "sensors_read", map[string]any{"name": "attic"})
	wantErr(t, e, CodeNotFound, map[string]any{"parameter": "name"})
	list, _ := callAs[sensorsListOut](t, r, reader, "sensors_list", nil)
	diff(t, "list", sensorsListOut{Sensors: []sensorInfo{{Name: "greenhouse", Type: "bme280", Bus: 1, Address: 0x76},
		{Name: "case", Type: "tmp102", Bus: 1, Address: 0x48}}}, list)
}

func TestI2CDisabled(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Enabled = false })
	_, e := callAs[i2cScanOut](t, r, admin, "i2c_scan_bus", map[string]any{"bus": 1})
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[i2c] enabled", "domain": "i2c"})
	_, e = callAs[SensorsReadOut](t, r, admin, "sensors_read", map[string]any{"name": "greenhouse"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[i2c] enabled", "domain": "sensors"})
}

// Every hardware tool is refused when its namespace is switched off, reads included.
func TestHardwareNamespacesOff(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.GPIO.Enabled, c.I2C.Enabled, c.Camera.Enabled = false, false, false })
	for tool, args := range map[string]map[string]any{
		"gpio_list_pins": nil, "gpio_read_pin": {"pin": 17}, "gpio_write_pin": {"pin": 17, "value": "high"},
		"gpio_configure_pin": {"pin": 17, "mode": "input"}, "gpio_set_pwm": {"pin": 18, "frequency_hz": 10, "duty_cycle_percent": 1},
		"i2c_list_buses": nil, "i2c_scan_bus": {"bus": 1}, "i2c_read": {"bus": 1, "address": 0x76, "length": 1},
		"i2c_write":    {"bus": 1, "address": 0x48, "data": []int{1}, "confirm": true, "reason": "x"},
		"sensors_list": nil, "sensors_read": {"name": "greenhouse"},
		"camera_take_photo": nil, "camera_capture": {"width": 640, "height": 480},
	} {
		ns, _, _ := strings.Cut(tool, "_")
		key := "[" + ns + "] enabled"
		if ns == "sensors" {
			key = "[i2c] enabled" // sensors are read over I2C: one switch
		}
		_, e := callAs[any](t, r, admin, tool, args)
		wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": key, "domain": ns})
	}
}

func TestGPIOReadOutsideAllowlist(t *testing.T) {
	r := newRig(t, nil)
	_, e := callAs[GpioPinInfo](t, r, admin, "gpio_read_pin", map[string]any{"pin": 5})
	wantErr(t, e, CodePermissionDenied, nil)
}

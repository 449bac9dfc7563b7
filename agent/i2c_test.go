package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestI2CAndSensorsOnTheSimBoard(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Write = []string{"1:0x50"} })
	reader := Principal{Name: "bob", Role: RoleRead}
	_, sc := r.as(reader, "i2c_scan_bus", map[string]any{"bus": 1})
	if fmt.Sprint(sc["addresses"]) != "[72 80 118]" {
		t.Fatalf("scan: %v", sc)
	}
	if res, sc := r.as(reader, "i2c_scan_bus", map[string]any{"bus": 3}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("scan of a bus outside the allowlist: %v", sc)
	}
	// BME280 chip id through a register read.
	_, sc = r.as(reader, "i2c_read", map[string]any{"bus": 1, "address": 0x76, "register": 0xD0, "length": 1})
	if fmt.Sprint(sc["data"]) != "[96]" {
		t.Fatalf("chip id: %v", sc)
	}
	// Writes: high risk, separate allowlist.
	w := map[string]any{"bus": 1, "address": 0x50, "register": 0x10, "data": []int{1, 2, 3}}
	if res, sc := r.as(operator, "i2c_write", w); errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("write without confirm: %v", sc)
	}
	bad := map[string]any{"bus": 1, "address": 0x76, "register": 0xF4, "data": []int{0}, "confirm": true, "reason": "x"}
	if res, sc := r.as(operator, "i2c_write", bad); errCode(res, sc) != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc), "[i2c] write") {
		t.Fatalf("write to a read-only address: %v", sc)
	}
	w["confirm"], w["reason"] = true, "calibrate"
	if res, sc := r.as(operator, "i2c_write", w); res.IsError || sc["bytes_written"].(float64) != 3 {
		t.Fatalf("write: %v", sc)
	}
	_, sc = r.as(reader, "i2c_read", map[string]any{"bus": 1, "address": 0x50, "register": 0x10, "length": 3})
	if fmt.Sprint(sc["data"]) != "[1 2 3]" {
		t.Fatalf("read back: %v", sc)
	}
	// Sensors by name, in units.
	r.bme.SetEnv(23.4, 1001.5, 61)
	res, sc := r.as(reader, "sensors_read", map[string]any{"name": "greenhouse"})
	if res.IsError || sc["temperature_celsius"].(float64) != 23.4 || sc["pressure_hpa"].(float64) != 1001.5 || sc["humidity_percent"].(float64) != 61 {
		t.Fatalf("greenhouse: %v", sc)
	}
	if res, sc := r.as(reader, "sensors_read", map[string]any{"name": "attic"}); errCode(res, sc) != CodeNotFound {
		t.Fatalf("unknown sensor: %v", sc)
	}
	if _, sc := r.as(reader, "sensors_list", nil); len(sc["sensors"].([]any)) != 2 {
		t.Fatalf("list: %v", sc)
	}
}

func TestI2CDisabled(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Enabled = false })
	if res, sc := r.as(admin, "i2c_scan_bus", map[string]any{"bus": 1}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("%v", sc)
	}
	if res, sc := r.as(admin, "sensors_read", map[string]any{"name": "greenhouse"}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("%v", sc)
	}
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
		if res, sc := r.as(admin, tool, args); errCode(res, sc) != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc), "enabled") {
			t.Errorf("%s with its namespace off: %v", tool, sc)
		}
	}
}

func TestGPIOReadOutsideAllowlist(t *testing.T) {
	r := newRig(t, nil)
	if res, sc := r.as(admin, "gpio_read_pin", map[string]any{"pin": 5}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("%v", sc)
	}
}

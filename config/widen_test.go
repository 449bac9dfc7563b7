package config

import (
	"strings"
	"testing"
	"time"
)

func TestWidenings(t *testing.T) {
	base := Default()
	base.Service.Allow = []string{"nginx"}
	base.I2C.Write = []string{"1:0x76"}
	base.System.Reboot = true
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		widens string // "" for a narrowing
	}{
		{"switch on", func(c *Config) { c.System.Shutdown = true }, "system.shutdown turned on"},
		{"switch off", func(c *Config) { c.System.Reboot = false }, ""},
		{"allowlist grown", func(c *Config) { c.Service.Allow = []string{"nginx", "*"} }, `service.allow grows by ["*"]`},
		{"allowlist shrunk", func(c *Config) { c.Service.Allow = nil }, ""},
		{"i2c bus opened", func(c *Config) { c.I2C.Write = []string{"1:*"} }, `i2c.write grows by ["1:*"]`},
		{"signals grown", func(c *Config) { c.Process.AllowedSignals = append(c.Process.AllowedSignals, "KILL") }, "process.allowed_signals grows"},
		{"floor lowered", func(c *Config) { c.System.MinPowerInterval = 0 }, "system.min_power_interval lowered"},
		{"floor raised", func(c *Config) { c.System.MinPowerInterval = Duration(time.Hour) }, ""},
		{"path moved", func(c *Config) { c.Camera.MediaRoot = "/etc/cron.d" }, "camera.media_root changed"},
		{"ceiling raised", func(c *Config) { c.Camera.MaxImageBytes *= 4 }, "camera.max_image_bytes raised"},
		{"ceiling lowered", func(c *Config) { c.Camera.MaxImageBytes /= 2 }, ""},
		{"a new pin", func(c *Config) { c.GPIO.Pins = append(c.GPIO.Pins, Pin{Pin: 17, Mode: "output"}) }, "gpio.pins grows"},
	} {
		next := base
		next.Service.Allow = append([]string(nil), base.Service.Allow...)
		next.Process.AllowedSignals = append([]string(nil), base.Process.AllowedSignals...)
		tc.change(&next)
		got := strings.Join(Widenings(base, next), "; ")
		if (tc.widens == "") != (got == "") || !strings.Contains(got, tc.widens) {
			t.Errorf("%s: widenings %q, want %q", tc.name, got, tc.widens)
		}
	}
}

func TestWarningsNameALoweredCritical(t *testing.T) {
	c := Default()
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("the default warns: %v", w)
	}
	c.Guard.Critical = ChannelClient
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], `critical = "client"`) {
		t.Fatalf("lowered critical: %v", w)
	}
}

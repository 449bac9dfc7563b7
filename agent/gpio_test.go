package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// The laptop configuration's pins as gpio_list_pins shows them at start.
var (
	button = GpioPinInfo{Pin: 4, Mode: "input", Value: "high", Allowed: true, Name: "button", Pull: "up"}
	relay  = GpioPinInfo{Pin: 17, Mode: "output", Value: "low", Allowed: true, Name: "relay", Pull: "none"}
	fan    = GpioPinInfo{Pin: 18, Mode: "output", Value: "low", Allowed: true, Name: "fan", Pull: "none", PWM: true}
	led    = GpioPinInfo{Pin: 27, Mode: "output", Value: "low", Allowed: true, Name: "led", Pull: "none"}
)

func level17(t *testing.T, r *rig) int {
	t.Helper()
	v, err := r.gpio.Level(17)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGPIOOnTheSimBoard(t *testing.T) {
	r := newRig(t, nil)
	pins, _ := callAs[gpioListOut](t, r, reader, "gpio_list_pins", nil)
	diff(t, "list", gpioListOut{Pins: []GpioPinInfo{button, relay, fan, led}}, pins)
	pin, _ := callAs[GpioPinInfo](t, r, reader, "gpio_read_pin", map[string]any{"pin": 4})
	diff(t, "button with pull-up", button, pin)

	// Denials change nothing.
	for name, tc := range map[string]struct {
		p    Principal
		args map[string]any
		code string
	}{
		"reader":          {reader, map[string]any{"pin": 17, "value": "high"}, CodePermissionDenied},
		"pin not allowed": {operator, map[string]any{"pin": 5, "value": "high"}, CodePermissionDenied},
		"input pin":       {operator, map[string]any{"pin": 4, "value": "high"}, CodeFailedPrecondition},
	} {
		_, e := callAs[GPIOWriteOut](t, r, tc.p, "gpio_write_pin", tc.args)
		wantErr(t, e, tc.code, nil)
		if level17(t, r) != 0 {
			t.Fatalf("%s changed the pin", name)
		}
	}
	dry, _ := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "dry_run": true})
	diff(t, "dry run", GPIOWriteOut{GpioPinInfo: withValue(relay, "high"), Previous: "low", DryRun: true}, dry)
	if level17(t, r) != 0 {
		t.Fatal("dry run changed the pin")
	}
	_, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"allowed_pins": []any{4.0, 17.0, 18.0, 27.0}, "parameter": "pin"})

	w, _ := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "water the plants"})
	diff(t, "write", GPIOWriteOut{GpioPinInfo: withValue(relay, "high"), Previous: "low"}, w)
	if level17(t, r) != 1 {
		t.Fatal("write did not set the pin")
	}
	c, _ := callAs[GpioPinInfo](t, r, operator, "gpio_configure_pin", map[string]any{"pin": 27, "mode": "input", "pull": "down"})
	diff(t, "configure", GpioPinInfo{Pin: 27, Mode: "input", Value: "low", Allowed: true, Name: "led", Pull: "down"}, c)
	pwm, _ := callAs[gpioPWMOut](t, r, operator, "gpio_set_pwm", map[string]any{"pin": 18, "frequency_hz": 25000, "duty_cycle_percent": 40})
	diff(t, "pwm", gpioPWMOut{Pin: 18, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: true, Chip: "pwmchip0"}, pwm)
	_, e = callAs[gpioPWMOut](t, r, operator, "gpio_set_pwm", map[string]any{"pin": 17, "frequency_hz": 100, "duty_cycle_percent": 40})
	wantErr(t, e, CodePermissionDenied, map[string]any{"parameter": "pin"}) // not a PWM pin
	if v, _ := r.verifyAudit(); !v.OK {
		t.Fatal("audit chain broken")
	}
}

func withValue(p GpioPinInfo, v string) GpioPinInfo { p.Value = v; return p }

func TestGPIOWritesOffAndBusyLine(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.GPIO.Writes = false })
	_, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[gpio] writes", "tool": "gpio.write_pin"})

	// Another process holds a line the owner allowed: the error names it.
	r2 := newRig(t, func(c *config.Config) { c.GPIO.Pins = append(c.GPIO.Pins, config.Pin{Pin: 22, Mode: "input"}) })
	r2.killHelper()
	if err := r2.gpio.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.gpio.Hold(22, "motion"); err != nil {
		t.Fatal(err)
	}
	r2.startHelper()
	_, e = callAs[GpioPinInfo](t, r2, operator, "gpio_configure_pin", map[string]any{"pin": 22, "mode": "output"})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"consumer": "motion", "pin": 22.0})
}

// A timed write is a lease: the pin comes back by itself, audited.
func TestGPIOLeaseReverts(t *testing.T) {
	r := newRig(t, nil)
	// When the lease ends depends on the clock: it must be a time, and is
	// then left out of the comparison.
	lease := func(args map[string]any) GPIOWriteOut {
		t.Helper()
		w, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", args)
		if e != nil {
			t.Fatal(e)
		}
		if _, err := time.Parse(time.RFC3339Nano, w.RevertAt); err != nil {
			t.Fatalf("revert_at: %v", err)
		}
		return w
	}
	ignoreAt := cmpopts.IgnoreFields(GPIOWriteOut{}, "RevertAt")
	w := lease(map[string]any{"pin": 17, "value": "high", "duration_ms": 300})
	diff(t, "lease", GPIOWriteOut{GpioPinInfo: withValue(relay, "high"), Previous: "low", RevertTo: "low"}, w, ignoreAt)
	if level17(t, r) != 1 {
		t.Fatal("lease did not set the pin")
	}
	// The reverter starts only now, so a slow machine cannot end the lease
	// before the check above; it ends it when due (at once if overdue).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.a.reverter.run(ctx)
	waitFor(t, "revert and its audit record", 5*time.Second, func() bool { return level17(t, r) == 0 && r.auditCount() == 2 })
	recs, _, _ := r.db.QueryAudit(store.AuditQuery{Limit: 1})
	if recs[0].Tool != "gpio.write_pin" || recs[0].Reason != "lease ended: revert" || recs[0].Principal != "op" {
		t.Fatalf("revert audit: %+v", recs[0])
	}
	if rs, _ := r.db.ListGPIOReverts(); len(rs) != 0 {
		t.Fatalf("queue not emptied: %+v", rs)
	}
	// Renewing a lease keeps the original value; a permanent write ends it.
	lease(map[string]any{"pin": 17, "value": "high", "duration_ms": 600000})
	w = lease(map[string]any{"pin": 17, "value": "high", "duration_ms": 600000})
	diff(t, "renewal keeps the original value", GPIOWriteOut{GpioPinInfo: withValue(relay, "high"), Previous: "high", RevertTo: "low"}, w, ignoreAt)
	w, _ = callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"})
	diff(t, "permanent write", GPIOWriteOut{GpioPinInfo: withValue(relay, "high"), Previous: "high"}, w)
	if rs, _ := r.db.ListGPIOReverts(); len(rs) != 0 {
		t.Fatalf("a permanent write left a lease: %+v", rs)
	}
}

// The revert is in the jobs bucket: it happens after an agent restart (at
// once when overdue) and waits out a helper outage.
func TestGPIOLeaseSurvivesRestartAndHelperOutage(t *testing.T) {
	r := newRig(t, nil)
	if _, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 100}); e != nil {
		t.Fatal(e)
	}
	// No reverter runs (the agent is "down") past the due time, and the helper is down too.
	time.Sleep(200 * time.Millisecond)
	r.killHelper()
	r.a.reverter.retry = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.a.reverter.run(ctx) // the agent restarts
	waitFor(t, "two failed revert attempts", hangGuard, func() bool {
		n := 0
		for _, e := range r.appLog.Entries(slog.LevelWarn, "agent", 100) {
			if strings.Contains(e.Message, "gpio revert failed") {
				n++
			}
		}
		return n >= 2
	})
	if level17(t, r) != 1 {
		t.Fatal("reverted without a helper?")
	}
	if rs, _ := r.db.ListGPIOReverts(); len(rs) != 1 {
		t.Fatalf("a failed revert was dropped: %+v", rs)
	}
	r.gpio.Close()  // the dead helper's lines were released
	r.startHelper() // it restarts and re-applies its safe states; the revert lands too
	waitFor(t, "overdue revert", 5*time.Second, func() bool {
		rs, _ := r.db.ListGPIOReverts()
		return len(rs) == 0
	})
	if level17(t, r) != 0 {
		t.Fatal("pin not reverted")
	}
}

// Dry runs of every hardware write change nothing, and reads outside the
// allowlists are refused too.
func TestHardwareDryRunsAndReadDenials(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Write = []string{"1:0x50"} })
	cfg, _ := callAs[GpioPinInfo](t, r, operator, "gpio_configure_pin", map[string]any{"pin": 17, "mode": "input", "dry_run": true})
	diff(t, "configure dry run", GpioPinInfo{Pin: 17, Mode: "input", Value: "low", Allowed: true, Name: "relay", Pull: "none", DryRun: true}, cfg)
	pwm, _ := callAs[gpioPWMOut](t, r, operator, "gpio_set_pwm", map[string]any{"pin": 18, "frequency_hz": 1000, "duty_cycle_percent": 50, "dry_run": true})
	diff(t, "pwm dry run", gpioPWMOut{Pin: 18, FrequencyHz: 1000, DutyCyclePercent: 50, DryRun: true}, pwm)
	zero := 0
	i2c, _ := callAs[i2cWriteOut](t, r, operator, "i2c_write", map[string]any{"bus": 1, "address": 0x50, "register": 0, "data": []int{7}, "dry_run": true})
	diff(t, "i2c dry run", i2cWriteOut{Bus: 1, Address: 0x50, Register: &zero, DryRun: true}, i2c)
	cam, _ := callAs[cameraCaptureOut](t, r, operator, "camera_capture", map[string]any{"width": 640, "height": 480, "dry_run": true})
	diff(t, "camera dry run", cameraCaptureOut{cameraTakePhotoOut: cameraTakePhotoOut{Width: 640, Height: 480, Format: "jpeg", DryRun: true}}, cam, cmpopts.IgnoreUnexported(cameraCaptureOut{}))

	if st, _ := r.gpio.State(context.Background(), 17); st.Mode != "output" {
		t.Errorf("dry-run configure changed GPIO17 to %s", st.Mode)
	}
	if st, _ := r.pwm.Get(context.Background(), 18); st.Enabled {
		t.Error("dry-run PWM enabled the channel")
	}
	read, _ := callAs[i2cReadOut](t, r, admin, "i2c_read", map[string]any{"bus": 1, "address": 0x50, "register": 0, "length": 1})
	diff(t, "read after the dry-run i2c write", i2cReadOut{Bus: 1, Address: 0x50, Register: &zero, Data: []int{0}}, read)
	_, e := callAs[i2cReadOut](t, r, admin, "i2c_read", map[string]any{"bus": 2, "address": 0x50, "length": 1})
	wantErr(t, e, CodePermissionDenied, map[string]any{"address": 80.0, "allowed": []any{"1:*"}, "bus": 2.0})
	// An allowlist refusal is a denial in the audit trail, not a failed allow.
	_, e = callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"})
	wantErr(t, e, CodePermissionDenied, nil)
	if recs, _, _ := r.a.store.QueryAudit(storeQuery(1)); recs[0].Tool != "gpio.write_pin" || recs[0].Decision != "deny" || recs[0].ErrorCode != CodePermissionDenied {
		t.Errorf("audit of the refused write: %+v", recs[0])
	}
	buses, _ := callAs[i2cListBusesOut](t, r, admin, "i2c_list_buses", nil)
	diff(t, "buses", i2cListBusesOut{Buses: []busInfo{{Bus: 1, Description: "sim-i2c", Allowed: true}}}, buses)
}

// The tool catalog's example request writes a pin with "value": 1.
func TestGPIOWriteOneAndZero(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		v    any
		want int
	}{{1, 1}, {0, 0}, {"1", 1}, {"low", 0}} {
		if _, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": tc.v}); e != nil || level17(t, r) != tc.want {
			t.Fatalf("value %v: %v, level %d", tc.v, e, level17(t, r))
		}
	}
	_, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": 2})
	wantErr(t, e, CodeInvalidArgument, map[string]any{"parameter": "value", "provided_value": 2.0,
		"expected_type": "string", "actual_type": "number", "allowed_values": []any{"high", "low"}})
	if level17(t, r) != 0 {
		t.Fatal("value 2 changed the pin")
	}
}

// The approval button's pins are refused to every GPIO tool and never
// listed, even if [gpio] pins names them (config.Validate refuses that;
// the check is defence in depth); the other pins work as before.
func TestGPIOButtonPinsReserved(t *testing.T) {
	r := newRig(t, func(c *config.Config) {
		c.GPIO.Pins = append(c.GPIO.Pins, config.Pin{Pin: config.LaptopButtonPin, Name: "sneaky", Mode: "input", Pull: "up"},
			config.Pin{Pin: config.LaptopButtonLED, Name: "sneaky-led", Mode: "output", PWM: true})
	})
	for _, pin := range []int{config.LaptopButtonPin, config.LaptopButtonLED} {
		for tool, args := range map[string]map[string]any{
			"gpio_read_pin":      {"pin": pin},
			"gpio_write_pin":     {"pin": pin, "value": "high"},
			"gpio_configure_pin": {"pin": pin, "mode": "output"},
			"gpio_set_pwm":       {"pin": pin, "frequency_hz": 100, "duty_cycle_percent": 50},
		} {
			_, e := callAs[GpioPinInfo](t, r, operator, tool, args)
			wantErr(t, e, CodePermissionDenied, map[string]any{"pin": float64(pin), "config_key": "[guard.button]", "parameter": "pin"})
		}
	}
	pins, _ := callAs[gpioListOut](t, r, reader, "gpio_list_pins", nil)
	diff(t, "list", gpioListOut{Pins: []GpioPinInfo{button, relay, fan, led}}, pins)
	if _, e := callAs[GpioPinInfo](t, r, reader, "gpio_read_pin", map[string]any{"pin": 4}); e != nil {
		t.Errorf("gpio_read_pin 4: %v", e)
	}
}

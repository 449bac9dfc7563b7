package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

var operator = Principal{Name: "op", UID: 1002, Role: RoleOperate}

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
	_, sc := r.as(Principal{Name: "bob", Role: RoleRead}, "gpio_list_pins", nil)
	pins := sc["pins"].([]any)
	if len(pins) != 4 || pins[0].(map[string]any)["name"] != "button" || pins[1].(map[string]any)["name"] != "relay" {
		t.Fatalf("list: %v", sc)
	}
	if _, sc = r.as(Principal{Name: "bob", Role: RoleRead}, "gpio_read_pin", map[string]any{"pin": 4}); sc["value"] != "high" {
		t.Fatalf("button with pull-up: %v", sc)
	}
	// Denials change nothing.
	for name, tc := range map[string]struct {
		p    Principal
		args map[string]any
		code string
	}{
		"reader":          {Principal{Name: "bob", Role: RoleRead}, map[string]any{"pin": 17, "value": "high"}, CodePermissionDenied},
		"pin not allowed": {operator, map[string]any{"pin": 5, "value": "high"}, CodePermissionDenied},
		"input pin":       {operator, map[string]any{"pin": 4, "value": "high"}, CodeFailedPrecondition},
		"dry run":         {operator, map[string]any{"pin": 17, "value": "high", "dry_run": true}, ""},
	} {
		res, sc := r.as(tc.p, "gpio_write_pin", tc.args)
		if errCode(res, sc) != tc.code {
			t.Errorf("%s: %v", name, sc)
		}
		if level17(t, r) != 0 {
			t.Fatalf("%s changed the pin", name)
		}
	}
	res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"})
	if fmt.Sprint(sc["error"].(map[string]any)["details"].(map[string]any)["allowed_pins"]) != "[4 17 18 27]" {
		t.Errorf("denial does not list the allowed pins: %v", sc)
	}
	res, sc = r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "water the plants"})
	if res.IsError || sc["value"] != "high" || sc["previous"] != "low" || level17(t, r) != 1 {
		t.Fatalf("write: %v", sc)
	}
	res, sc = r.as(operator, "gpio_configure_pin", map[string]any{"pin": 27, "mode": "input", "pull": "down"})
	if res.IsError || sc["mode"] != "input" {
		t.Fatalf("configure: %v", sc)
	}
	if res, sc = r.as(operator, "gpio_set_pwm", map[string]any{"pin": 18, "frequency_hz": 25000, "duty_cycle_percent": 40}); res.IsError || sc["enabled"] != true {
		t.Fatalf("pwm: %v", sc)
	}
	if res, sc = r.as(operator, "gpio_set_pwm", map[string]any{"pin": 17, "frequency_hz": 100, "duty_cycle_percent": 40}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("pwm on a non-pwm pin: %v", sc)
	}
	if v, _ := r.a.VerifyAudit(); !v.OK {
		t.Fatal("audit chain broken")
	}
}

func TestGPIOWritesOffAndBusyLine(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.GPIO.Writes = false })
	res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"})
	if errCode(res, sc) != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc), "[gpio] writes") {
		t.Fatalf("%v", sc)
	}

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
	res, sc = r2.as(operator, "gpio_configure_pin", map[string]any{"pin": 22, "mode": "output"})
	if errCode(res, sc) != CodeFailedPrecondition || !strings.Contains(fmt.Sprint(sc), "motion") {
		t.Fatalf("busy line: %v", sc)
	}
}

// A timed write is a lease: the pin comes back by itself, audited.
func TestGPIOLeaseReverts(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 300})
	if res.IsError || sc["revert_to"] != "low" || sc["revert_at"] == nil || level17(t, r) != 1 {
		t.Fatalf("%v", sc)
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
	r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 600000})
	_, sc = r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 600000})
	if sc["revert_to"] != "low" {
		t.Fatalf("renewal lost the original value: %v", sc)
	}
	r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"})
	if rs, _ := r.db.ListGPIOReverts(); len(rs) != 0 {
		t.Fatalf("a permanent write left a lease: %+v", rs)
	}
}

// The revert is in the jobs bucket: it happens after an agent restart (at
// once when overdue) and waits out a helper outage.
func TestGPIOLeaseSurvivesRestartAndHelperOutage(t *testing.T) {
	r := newRig(t, nil)
	r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 100})
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
	dry := map[string]map[string]any{
		"gpio_configure_pin": {"pin": 17, "mode": "input", "dry_run": true},
		"gpio_set_pwm":       {"pin": 18, "frequency_hz": 1000, "duty_cycle_percent": 50, "dry_run": true},
		"i2c_write":          {"bus": 1, "address": 0x50, "register": 0, "data": []int{7}, "dry_run": true},
		"camera_capture":     {"width": 640, "height": 480, "dry_run": true},
	}
	for tool, args := range dry {
		res, sc := r.as(operator, tool, args)
		if res.IsError || sc["dry_run"] != true {
			t.Errorf("%s dry run: %v", tool, sc)
		}
	}
	if st, _ := r.gpio.State(context.Background(), 17); st.Mode != "output" {
		t.Errorf("dry-run configure changed GPIO17 to %s", st.Mode)
	}
	if st, _ := r.pwm.Get(context.Background(), 18); st.Enabled {
		t.Error("dry-run PWM enabled the channel")
	}
	_, sc := r.as(admin, "i2c_read", map[string]any{"bus": 1, "address": 0x50, "register": 0, "length": 1})
	if fmt.Sprint(sc["data"]) != "[0]" {
		t.Errorf("dry-run i2c write wrote: %v", sc)
	}
	if res, sc := r.as(admin, "i2c_read", map[string]any{"bus": 2, "address": 0x50, "length": 1}); errCode(res, sc) != CodePermissionDenied {
		t.Errorf("read outside the allowlist: %v", sc)
	}
	// An allowlist refusal is a denial in the audit trail, not a failed allow.
	if res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}); errCode(res, sc) != CodePermissionDenied {
		t.Errorf("write outside the allowlist: %v", sc)
	}
	if recs, _, _ := r.a.store.QueryAudit(storeQuery(1)); recs[0].Tool != "gpio.write_pin" || recs[0].Decision != "deny" || recs[0].ErrorCode != CodePermissionDenied {
		t.Errorf("audit of the refused write: %+v", recs[0])
	}
	if _, sc := r.as(admin, "i2c_list_buses", nil); len(sc["buses"].([]any)) != 1 {
		t.Errorf("buses: %v", sc)
	}
}

// The tool catalog's example request writes a pin with "value": 1.
func TestGPIOWriteOneAndZero(t *testing.T) {
	r := newRig(t, nil)
	for _, tc := range []struct {
		v    any
		want int
	}{{1, 1}, {0, 0}, {"1", 1}, {"low", 0}} {
		res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": tc.v})
		if res.IsError || level17(t, r) != tc.want {
			t.Fatalf("value %v: %v, level %d", tc.v, sc, level17(t, r))
		}
	}
	res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": 2})
	if errCode(res, sc) != CodeInvalidArgument || level17(t, r) != 0 {
		t.Fatalf("value 2: %v", sc)
	}
}

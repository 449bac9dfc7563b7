package agent

import (
	"context"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// Every tool with guard arguments takes intent, and the audit record keeps
// it; read tools do not take it. (change_prepare and change_commit carry the
// guard arguments of the call they prepare.)
func TestIntentIsAudited(t *testing.T) {
	r := newRig(t, nil)
	for _, tl := range r.a.tools.all() {
		_, guarded := tl.in.Properties["confirm"]
		if _, ok := tl.in.Properties["intent"]; ok != guarded || (guarded && !tl.mutating) {
			t.Errorf("%s: intent parameter %v, guarded %v, mutating %v", tl.name, ok, guarded, tl.mutating)
		}
		if tl.mutating && !guarded && tl.id != "change.prepare" && tl.id != "change.commit" {
			t.Errorf("%s: mutating without guard arguments", tl.name)
		}
	}
	res, sc := r.as(operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "test", "intent": "water the plants"})
	if res.IsError {
		t.Fatal(sc)
	}
	recs, _, _ := r.db.QueryAudit(store.AuditQuery{Limit: 1})
	if recs[0].Intent != "water the plants" || recs[0].Reason != "test" {
		t.Fatalf("audit: %+v", recs[0])
	}
	_, sc = r.as(admin, "logs_get_recent_audit_logs", map[string]any{"limit": 1, "tool": "gpio.write_pin"})
	if e := sc["entries"].([]any)[0].(map[string]any); e["intent"] != "water the plants" {
		t.Fatalf("audit log entry: %v", e)
	}
	if v, _ := r.a.VerifyAudit(); !v.OK {
		t.Fatalf("chain with intent: %+v", v)
	}
}

// system.shutdown does not silently turn a pending reboot into a power-off:
// it takes force for that.
func TestShutdownForceReplacesAPendingReboot(t *testing.T) {
	r := newRig(t, nil)
	if res, sc := r.as(operator, "system_reboot", map[string]any{"delay_seconds": 300, "confirm": true, "reason": "kernel"}); res.IsError {
		t.Fatal(sc)
	}
	prepare := func(args map[string]any) (*bool, map[string]any) {
		res, sc := r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": args})
		if res.IsError {
			return nil, sc
		}
		res, sc = r.as(admin, "change_commit", map[string]any{"token": sc["token"]})
		ok := !res.IsError
		return &ok, sc
	}
	ok, sc := prepare(map[string]any{"reason": "move", "delay_seconds": 60})
	if ok != nil || sc["error"].(map[string]any)["code"] != CodeFailedPrecondition {
		t.Fatalf("shutdown over a pending reboot without force: %v", sc)
	}
	if s, _, _ := r.pw.Scheduled(context.Background()); s.Action != "reboot" {
		t.Fatalf("the reboot was replaced: %+v", s)
	}
	ok, sc = prepare(map[string]any{"reason": "move", "delay_seconds": 60, "force": true})
	if ok == nil || !*ok {
		t.Fatalf("shutdown with force: %v", sc)
	}
	if s, _, _ := r.pw.Scheduled(context.Background()); s.Action != "poweroff" {
		t.Fatalf("not replaced: %+v", s)
	}
}

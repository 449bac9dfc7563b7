package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// Every tool with guard arguments takes intent, and the audit record keeps
// it; read tools do not take it. (change_prepare and change_commit carry the
// guard arguments of the call they prepare.)
func TestIntentIsAudited(t *testing.T) {
	r := newRig(t, nil)
	for _, tl := range r.a.tools.All() {
		_, guarded := tl.Input().Tree.Properties["confirm"]
		if _, ok := tl.Input().Tree.Properties["intent"]; ok != guarded || (guarded && !tl.Mutating()) {
			t.Errorf("%s: intent parameter %v, guarded %v, mutating %v", tl.Name(), ok, guarded, tl.Mutating())
		}
		if tl.Mutating() && !guarded && tl.ID() != "change.prepare" && tl.ID() != "change.commit" {
			t.Errorf("%s: mutating without guard arguments", tl.Name())
		}
	}
	if _, e := callAs[GPIOWriteOut](t, r, operator, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "test", "intent": "water the plants"}); e != nil {
		t.Fatal(e)
	}
	recs, _, _ := r.db.QueryAudit(store.AuditQuery{Limit: 1})
	if recs[0].Intent != "water the plants" || recs[0].Reason != "test" {
		t.Fatalf("audit: %+v", recs[0])
	}
	logs, _ := callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", map[string]any{"limit": 1, "tool": "gpio.write_pin"})
	// The entry is the record: only its clock, random and hash fields are
	// left to the store's own tests.
	if len(logs.Entries) != 1 {
		t.Fatalf("audit log: %+v", logs)
	}
	diff(t, "audit log entry", AuditEntry{Principal: "op", Role: "operate", Tool: "gpio.write_pin", Decision: "allow",
		Reason: "test", Intent: "water the plants"}, logs.Entries[0],
		cmpopts.IgnoreFields(AuditEntry{}, "Seq", "Time", "CorrelationID", "DurationMS", "InHash", "OutHash", "Hash"))
	if v, _ := r.verifyAudit(); !v.OK {
		t.Fatalf("chain with intent: %+v", v)
	}
}

// system.shutdown does not silently turn a pending reboot into a power-off:
// it takes force for that.
func TestShutdownForceReplacesAPendingReboot(t *testing.T) {
	r := newRig(t, nil)
	reboot, e := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"delay_seconds": 300, "confirm": true, "reason": "kernel"})
	if e != nil {
		t.Fatal(e)
	}
	// Without force the prepare's dry run already refuses: no token.
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move", "delay_seconds": 60}})
	wantErr(t, e, CodeFailedPrecondition, nil)
	if s, _, _ := r.pw.Scheduled(context.Background()); s.Action != "reboot" {
		t.Fatalf("the reboot was replaced: %+v", s)
	}
	p := prepare(t, r, admin, "system_shutdown", map[string]any{"reason": "move", "delay_seconds": 60, "force": true})
	c, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	if e != nil {
		t.Fatalf("shutdown with force: %+v", e)
	}
	if c.Result["replaces"] != "reboot at "+reboot.ScheduledFor {
		t.Fatalf("commit does not say what it replaced: %+v", c)
	}
	if s, _, _ := r.pw.Scheduled(context.Background()); s.Action != "poweroff" {
		t.Fatalf("not replaced: %+v", s)
	}
}

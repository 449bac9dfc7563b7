package agent

import (
	"context"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestRebootAtATimeIsQueuedListedAndCancelled(t *testing.T) {
	r := newRig(t, nil)
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	res, sc := r.as(operator, "system_reboot", map[string]any{"at": at.Format(time.RFC3339), "confirm": true, "reason": "kernel update"})
	if res.IsError || sc["scheduled"] != true || sc["scheduled_for"] != at.Format(time.RFC3339) {
		t.Fatalf("reboot at: %v", sc)
	}
	jobID := sc["job_id"].(string)
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || !s.At.Equal(at) {
		t.Fatalf("logind (sim) has %v %v", s, ok)
	}
	_, sc = r.as(operator, "manage_list_jobs", map[string]any{})
	var listed bool
	for _, j := range sc["jobs"].([]any) {
		m := j.(map[string]any)
		if m["job_id"] == jobID && m["kind"] == "power" && m["due"] == at.Format(time.RFC3339) {
			listed = true
		}
	}
	if !listed {
		t.Fatalf("power job %s not listed: %v", jobID, sc)
	}

	if res, sc := r.as(operator, "manage_cancel_job", map[string]any{"job_id": jobID, "dry_run": true}); res.IsError || sc["cancelled"] != false {
		t.Fatalf("dry-run cancel: %v", sc)
	}
	if _, ok, _ := r.pw.Scheduled(context.Background()); !ok {
		t.Fatal("a dry-run cancel cancelled")
	}
	if res, sc := r.as(operator, "manage_cancel_job", map[string]any{"job_id": "job-nope"}); errCode(res, sc) != CodeNotFound {
		t.Fatalf("unknown job: %v", sc)
	}
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	if res, sc := r.as(reader, "manage_cancel_job", map[string]any{"job_id": jobID}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("read role cancels: %v", sc)
	}
	if res, sc := r.as(operator, "manage_cancel_job", map[string]any{"job_id": jobID}); res.IsError || sc["cancelled"] != true {
		t.Fatalf("cancel: %v", sc)
	}
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("still scheduled after cancel")
	}
	if _, ok, _ := r.db.PendingPower(); ok {
		t.Fatal("still queued after cancel")
	}
	if last, _ := r.db.LastPower(); !last.IsZero() {
		t.Fatal("a cancelled reboot counts against the rate limit")
	}

	res, sc = r.as(operator, "system_reboot", map[string]any{"at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "confirm": true, "reason": "x"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("at in the past: %v", sc)
	}
	res, sc = r.as(operator, "system_reboot", map[string]any{"at": time.Now().Add(8 * 24 * time.Hour).UTC().Format(time.RFC3339), "confirm": true, "reason": "x"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("at beyond 7 days: %v", sc)
	}
}

func TestCancelScheduledPowerAction(t *testing.T) {
	r := newRig(t, nil)
	if res, sc := r.as(operator, "system_cancel_scheduled_power_action", map[string]any{}); res.IsError || sc["cancelled"] != false {
		t.Fatalf("nothing scheduled: %v", sc)
	}
	r.as(operator, "system_reboot", map[string]any{"delay_seconds": 600, "confirm": true, "reason": "x"})
	res, sc := r.as(operator, "system_cancel_scheduled_power_action", map[string]any{"dry_run": true})
	if res.IsError || sc["action"] != "reboot" || sc["cancelled"] != false {
		t.Fatalf("dry run: %v", sc)
	}
	res, sc = r.as(operator, "system_cancel_scheduled_power_action", map[string]any{})
	if res.IsError || sc["cancelled"] != true || sc["action"] != "reboot" {
		t.Fatalf("cancel: %v", sc)
	}
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("still scheduled")
	}
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	if res, sc := r.as(reader, "system_cancel_scheduled_power_action", map[string]any{}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("read role: %v", sc)
	}
}

func TestPowerRateLimit(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.System.MinPowerInterval = config.Duration(10 * time.Minute) })
	last := time.Now().Add(-2 * time.Minute)
	if err := r.db.FinishPower(true, last); err != nil {
		t.Fatal(err)
	}
	res, sc := r.as(operator, "system_reboot", map[string]any{"confirm": true, "reason": "again"})
	if errCode(res, sc) != CodeResourceExhausted {
		t.Fatalf("second reboot within 10m: %v", sc)
	}
	e := sc["error"].(map[string]any)
	if e["retryable"] != true || e["details"].(map[string]any)["retry_after_seconds"].(float64) < 400 {
		t.Fatalf("rate-limit error: %v", e)
	}
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("a refused reboot was scheduled")
	}
	// A dry run says the same, so it predicts the real call.
	if res, sc := r.as(operator, "system_reboot", map[string]any{"dry_run": true}); errCode(res, sc) != CodeResourceExhausted {
		t.Fatalf("dry run within the window: %v", sc)
	}
	// After the window, at a chosen time, it is fine.
	at := last.Add(11 * time.Minute).UTC().Format(time.RFC3339)
	if res, sc := r.as(operator, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "later"}); res.IsError {
		t.Fatalf("reboot after the window: %v", sc)
	}
}

func TestPowerWatchRecordsTheActionAndReschedulesALostOne(t *testing.T) {
	r := newRig(t, nil)
	w := r.a.powerJobs
	w.grace = 0
	before := time.Now()
	res, sc := r.as(operator, "system_reboot", map[string]any{"delay_seconds": 1, "confirm": true, "reason": "now"})
	if res.IsError {
		t.Fatal(sc)
	}
	waitFor(t, "the sim to perform the reboot", 5*time.Second, func() bool {
		_, ok, _ := r.pw.Scheduled(context.Background())
		return !ok
	})
	n := r.auditCount()
	if _, err := w.check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.db.PendingPower(); ok {
		t.Fatal("a performed reboot is still queued")
	}
	// Recorded at its scheduled time: a second after the call, within it.
	if last, _ := r.db.LastPower(); last.Before(before.Truncate(time.Second)) || last.After(time.Now().Add(time.Second)) {
		t.Fatalf("last power action %v not recorded (call at %v)", last, before)
	}
	if r.auditCount() != n+1 {
		t.Fatal("the reboot taking effect was not audited")
	}

	// A queued action logind lost (helper restart) is put back.
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := r.db.PutPowerJob(store.PowerJob{ID: "job-lost", Action: "reboot", At: at, Created: time.Now(), Principal: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || !s.At.Equal(at) {
		t.Fatalf("lost action not re-scheduled: %v %v", s, ok)
	}
}

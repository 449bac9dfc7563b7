package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/simrig"
)

func TestRebootAtATimeIsQueuedListedAndCancelled(t *testing.T) {
	r := newRig(t, nil)
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second)
	due := at.Format(time.RFC3339)
	o, e := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"at": due, "confirm": true, "reason": "kernel update"})
	if e != nil || !strings.HasPrefix(o.JobID, "job-") {
		t.Fatalf("reboot at: %+v %+v", o, e)
	}
	// How many seconds ahead depends on the clock.
	diff(t, "reboot at", SystemPowerOut{Scheduled: true, Action: "reboot", ScheduledFor: due, JobID: o.JobID}, o,
		cmpopts.IgnoreFields(SystemPowerOut{}, "EffectiveAfterSeconds"))
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || !s.At.Equal(at) {
		t.Fatalf("logind (sim) has %v %v", s, ok)
	}
	jobs, _ := callAs[jobsListOut](t, r, operator, "manage_list_jobs", map[string]any{})
	effect := "the reboot is called off"
	diff(t, "jobs", jobsListOut{TotalCount: 1, Jobs: []queuedJob{{JobID: o.JobID, Kind: "power", Status: "scheduled",
		Summary: "reboot at " + due, Due: due, CreatedBy: "op", Cancel: effect}}}, jobs)

	c, _ := callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": o.JobID, "dry_run": true})
	diff(t, "dry-run cancel", jobsCancelOut{JobID: o.JobID, Kind: "power", Effect: effect, DryRun: true,
		Plan: []string{"cancel " + o.JobID + " (reboot at " + due + "): " + effect}}, c)
	if _, ok, _ := r.pw.Scheduled(context.Background()); !ok {
		t.Fatal("a dry-run cancel cancelled")
	}
	_, e = callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": "job-nope"})
	wantErr(t, e, CodeNotFound, map[string]any{"parameter": "job_id"})
	_, e = callAs[jobsCancelOut](t, r, reader, "manage_cancel_job", map[string]any{"job_id": o.JobID})
	wantErr(t, e, CodePermissionDenied, nil)
	c, _ = callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": o.JobID})
	diff(t, "cancel", jobsCancelOut{JobID: o.JobID, Kind: "power", Cancelled: true, Effect: effect}, c)
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("still scheduled after cancel")
	}
	if _, ok, _ := r.db.PendingPower(); ok {
		t.Fatal("still queued after cancel")
	}
	if last, _ := r.db.LastPower(); !last.IsZero() {
		t.Fatal("a cancelled reboot counts against the rate limit")
	}

	for what, at := range map[string]time.Time{"in the past": time.Now().Add(-time.Hour), "beyond 7 days": time.Now().Add(8 * 24 * time.Hour)} {
		_, e = callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"at": at.UTC().Format(time.RFC3339), "confirm": true, "reason": "x"})
		if e == nil || e.Code != CodeInvalidArgument || e.Details["parameter"] != "at" {
			t.Fatalf("at %s: %+v", what, e)
		}
	}
}

func TestCancelScheduledPowerAction(t *testing.T) {
	r := newRig(t, nil)
	c, _ := callAs[systemCancelPowerOut](t, r, operator, "system_cancel_scheduled_power_action", map[string]any{})
	diff(t, "nothing scheduled", systemCancelPowerOut{}, c)
	o, _ := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"delay_seconds": 600, "confirm": true, "reason": "x"})
	c, _ = callAs[systemCancelPowerOut](t, r, operator, "system_cancel_scheduled_power_action", map[string]any{"dry_run": true})
	diff(t, "dry run", systemCancelPowerOut{Action: "reboot", WasDueAt: o.ScheduledFor, DryRun: true,
		Plan: []string{"ask systemd-logind to cancel the reboot due at " + o.ScheduledFor}}, c)
	c, _ = callAs[systemCancelPowerOut](t, r, operator, "system_cancel_scheduled_power_action", map[string]any{})
	diff(t, "cancel", systemCancelPowerOut{Cancelled: true, Action: "reboot", WasDueAt: o.ScheduledFor}, c)
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("still scheduled")
	}
	_, e := callAs[systemCancelPowerOut](t, r, reader, "system_cancel_scheduled_power_action", map[string]any{})
	wantErr(t, e, CodePermissionDenied, nil)
}

func TestPowerRateLimit(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.System.MinPowerInterval = config.Duration(10 * time.Minute) })
	last := time.Now().Add(-2 * time.Minute)
	if err := r.db.FinishPower(true, last); err != nil {
		t.Fatal(err)
	}
	earliest := last.Add(10 * time.Minute).UTC().Format(time.RFC3339)
	_, e := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"confirm": true, "reason": "again"})
	// How long is left depends on the clock: at least 400 of the 480 seconds.
	wantErr(t, e, CodeResourceExhausted, nil)
	if left, _ := e.Details["retry_after_seconds"].(float64); !e.Retryable || left < 400 {
		t.Fatalf("rate-limit error: %+v", e)
	}
	diff(t, "rate-limit details", map[string]any{"config_key": "[system] min_power_interval", "earliest": earliest,
		"last_power_action": last.UTC().Format(time.RFC3339)}, e.Details,
		cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "retry_after_seconds" }))
	if _, ok, _ := r.pw.Scheduled(context.Background()); ok {
		t.Fatal("a refused reboot was scheduled")
	}
	// A dry run says the same, so it predicts the real call.
	_, e = callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"dry_run": true})
	wantErr(t, e, CodeResourceExhausted, nil)
	// After the window, at a chosen time, it is fine.
	at := last.Add(11 * time.Minute).UTC().Format(time.RFC3339)
	if _, e := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "later"}); e != nil {
		t.Fatalf("reboot after the window: %+v", e)
	}
}

func TestPowerWatchRecordsTheActionAndReschedulesALostOne(t *testing.T) {
	r := newRig(t, nil)
	w := r.a.powerJobs
	w.grace = 0
	before := time.Now()
	if _, e := callAs[SystemPowerOut](t, r, operator, "system_reboot", map[string]any{"delay_seconds": 1, "confirm": true, "reason": "now"}); e != nil {
		t.Fatal(e)
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

// A helper that found no systemd-logind serves no power methods. Every power
// tool then says that, with what to do, rather than the helper's "unknown
// method", and nothing is queued; with logind the same calls succeed (the
// tests above).
func TestPowerWithoutLogind(t *testing.T) {
	r := newRigOn(t, nil, false, func(o *simrig.Options) { o.NoLogind = true })
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"system_reboot", map[string]any{"confirm": true, "reason": "kernel update"}},
		{"system_reboot", map[string]any{"dry_run": true}},
		{"system_shutdown", map[string]any{"dry_run": true}}, // critical: its dry run asks the helper too
		{"system_cancel_scheduled_power_action", map[string]any{"reason": "changed my mind"}},
	} {
		_, e := callAs[map[string]any](t, r, admin, c.tool, c.args)
		wantErr(t, e, CodeFailedPrecondition, map[string]any{"needs": "systemd-logind"})
		if e != nil && (strings.Contains(e.Message, "unknown method") || !strings.Contains(e.FixHint, "systemctl restart raspi-mcp-helper")) {
			t.Errorf("%s %v: %+v", c.tool, c.args, e)
		}
	}
	if _, ok, _ := r.db.PendingPower(); ok {
		t.Error("a power action was queued without logind")
	}
}

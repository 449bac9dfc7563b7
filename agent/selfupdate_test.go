package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// finishUpdate runs the agent's self-update check until the job is done,
// as its background loop would; the loop count is a hang guard only.
func finishUpdate(t *testing.T, r *rig) {
	t.Helper()
	ctx := context.Background()
	for range 100000 {
		if _, ok, err := r.db.PendingUpdate(); err != nil {
			t.Fatal(err)
		} else if !ok {
			return
		}
		if _, err := r.a.selfUpdate.check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the self-update never ended")
}

func installed(t *testing.T, r *rig) string {
	t.Helper()
	v, err := r.sim.Packages.Installed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUpdateServerDenials(t *testing.T) {
	off := newSimRig(t, updatesOff)
	_, e := callAs[serverUpdateOut](t, off, admin, "manage_update_server", map[string]any{"dry_run": true})
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[manage] updates", "tool": "manage.update_server"})

	r := newSimRig(t, updatesOn)
	_, e = callAs[serverUpdateOut](t, r, operator, "manage_update_server", map[string]any{"dry_run": true})
	wantErr(t, e, CodePermissionDenied, map[string]any{"required_role": "admin", "role": "operate", "tool": "manage.update_server"})
	_, e = callAs[serverUpdateOut](t, r, admin, "manage_update_server", map[string]any{"confirm": true, "reason": "update"})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"risk": "critical", "tool": "manage.update_server"})
	if installed(t, r) != "1.0.0" || off.auditCount() == 0 {
		t.Fatalf("a denied call changed %s or was not audited", installed(t, r))
	}
}

func TestUpdateServerRefusesBadInput(t *testing.T) {
	r := newSimRig(t, updatesOn)
	for name, tc := range map[string]struct {
		args map[string]any
		code string
		msg  string
	}{
		"bad version":              {map[string]any{"target_version": "1.1 beta"}, CodeInvalidArgument, "not allowed"},
		"option-like version":      {map[string]any{"target_version": "-oAPT"}, CodeInvalidArgument, "start with a digit"},
		"unknown channel":          {map[string]any{"channel": "nightly"}, CodeInvalidArgument, ""},
		"not offered":              {map[string]any{"target_version": "1.3.0"}, CodeNotFound, "does not offer raspi-mcp 1.3.0"},
		"beta version from stable": {map[string]any{"target_version": "1.2.0~beta1"}, CodeNotFound, "channel stable"},
		"downgrade without flag":   {map[string]any{"target_version": "0.9.0"}, CodeFailedPrecondition, "allow_downgrade"},
		"flag without version":     {map[string]any{"allow_downgrade": true}, CodeInvalidArgument, "needs target_version"},
		"already installed":        {map[string]any{"target_version": "1.0.0"}, CodeFailedPrecondition, "is installed"},
	} {
		args := tc.args
		args["dry_run"] = true
		_, e := callAs[serverUpdateOut](t, r, admin, "manage_update_server", args)
		if e == nil || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: got %+v, want %s with %q", name, e, tc.code, tc.msg)
		}
	}
	if installed(t, r) != "1.0.0" {
		t.Fatal("bad input changed the installed version")
	}
}

func TestUpdateServerDryRunChangesNothing(t *testing.T) {
	r := newSimRig(t, updatesOn)
	out, e := callAs[serverUpdateOut](t, r, admin, "manage_update_server", map[string]any{"dry_run": true})
	if e != nil {
		t.Fatal(e)
	}
	if !out.DryRun || out.OldVersion != "1.0.0" || out.NewVersion != "1.1.0" || out.DownloadBytes != 9_101_876 ||
		out.HealthTimeoutSeconds != 120 || len(out.Plan) != 5 || out.Status.Status != "pending" || out.JobID != "" {
		t.Fatalf("dry run %+v", out)
	}
	beta, e := callAs[serverUpdateOut](t, r, admin, "manage_update_server", map[string]any{"dry_run": true, "channel": "beta"})
	if e != nil || beta.NewVersion != "1.2.0~beta1" {
		t.Fatalf("beta: %+v %+v", beta, e)
	}
	down, e := callAs[serverUpdateOut](t, r, admin, "manage_update_server", map[string]any{"dry_run": true, "target_version": "0.9.0", "allow_downgrade": true})
	if e != nil || !down.Downgrade || down.NewVersion != "0.9.0" {
		t.Fatalf("downgrade: %+v %+v", down, e)
	}
	if installed(t, r) != "1.0.0" {
		t.Fatal("a dry run installed something")
	}
	if _, ok, _ := r.db.PendingUpdate(); ok {
		t.Fatal("a dry run queued a job")
	}
}

func TestUpdateServerSucceedsAndIsRecorded(t *testing.T) {
	r := newSimRig(t, updatesOn)
	p := prepare(t, r, admin, "manage_update_server", map[string]any{"reason": "new release"})
	c, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	if e != nil {
		t.Fatal(e)
	}
	job, _ := c.Result["job_id"].(string)
	if st, _ := c.Result["status"].(map[string]any); job == "" || st["status"] != "running" {
		t.Fatalf("commit result %v", c.Result)
	}
	// Until the new agent has checked itself, the job is listed and cannot be cancelled.
	jobs, e := callAs[jobsListOut](t, r, admin, "manage_list_jobs", map[string]any{})
	if e != nil || jobs.TotalCount == 0 || jobs.Jobs[0].JobID != job || jobs.Jobs[0].Kind != "self_update" {
		t.Fatalf("jobs %+v %+v", jobs, e)
	}
	_, e = callAs[jobsCancelOut](t, r, admin, "manage_cancel_job", map[string]any{"job_id": job})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"job_id": job})
	// A second update while this one runs is refused.
	_, e = callAs[serverUpdateOut](t, r, admin, "manage_update_server", map[string]any{"dry_run": true, "channel": "beta"})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"job_id": job})
	st, e := callAs[ServerStatus](t, r, admin, "manage_get_server_status", map[string]any{})
	if e != nil || st.LastUpdate == nil || st.LastUpdate.Status != "running" {
		t.Fatalf("status while running: %+v %+v", st.LastUpdate, e)
	}

	finishUpdate(t, r)
	if v := installed(t, r); v != "1.1.0" {
		t.Fatalf("installed %s", v)
	}
	st, e = callAs[ServerStatus](t, r, admin, "manage_get_server_status", map[string]any{})
	if e != nil || st.LastUpdate == nil {
		t.Fatalf("status: %+v", e)
	}
	lu := *st.LastUpdate
	if lu.Status != "succeeded" || lu.Outcome != "succeeded" || lu.From != "1.0.0" || lu.To != "1.1.0" || lu.JobID != job || lu.FinishedAt == "" || lu.Reason != "" {
		t.Fatalf("last_update %+v", lu)
	}
	recs, _, err := r.db.QueryAudit(storeQuery(50))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		found = found || rec.Tool == "manage.update_server" && rec.Principal == "alice" && strings.Contains(rec.Reason, "1.0.0 to 1.1.0 succeeded")
	}
	if !found {
		t.Fatal("the outcome was not audited")
	}
}

func TestUpdateServerRollsBackABrokenRelease(t *testing.T) {
	r := newSimRig(t, updatesOn)
	// The release the updater installs fails its start-up check, as a
	// test build with -X main.selfCheckFault would.
	r.a.selfUpdate.fault = "database: migration 9 failed"
	p := prepare(t, r, admin, "manage_update_server", map[string]any{"reason": "new release"})
	if _, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token}); e != nil {
		t.Fatal(e)
	}
	finishUpdate(t, r)
	if v := installed(t, r); v != "1.0.0" {
		t.Fatalf("installed %s after the rollback", v)
	}
	st, e := callAs[ServerStatus](t, r, admin, "manage_get_server_status", map[string]any{})
	if e != nil || st.LastUpdate == nil {
		t.Fatalf("status %+v", e)
	}
	lu := *st.LastUpdate
	if lu.Status != "failed" || lu.Outcome != selfupdate.PhaseRolledBack || !strings.Contains(lu.Reason, "database: migration 9 failed") {
		t.Fatalf("last_update %+v", lu)
	}
}

func TestStartupCheckPassesOnAHealthyBoard(t *testing.T) {
	r := newSimRig(t, nil)
	if ok, why, wait := r.a.selfUpdate.startupCheck(context.Background(), ""); !ok || wait {
		t.Fatalf("a healthy simulated board fails the start-up check: %s", why)
	}
	// Without the helper there is nothing to report yet: the new one may
	// still be starting.
	r.killHelper()
	if ok, why, wait := r.a.selfUpdate.startupCheck(context.Background(), ""); ok || !wait || !strings.HasPrefix(why, "helper: ") {
		t.Fatalf("without the helper: healthy %v, wait %v, %s", ok, wait, why)
	}
	r.startHelper()
}

// newAgentOn is the agent that starts after the package's scripts
// restarted it: a new process on the same database and helper.
func newAgentOn(t *testing.T, r *rig) *Agent {
	t.Helper()
	a, err := New(Options{Config: r.cfg, Store: r.db, Sys: r.sim.Agent.Sys, Helper: r.helper, CheckOutput: true, Version: "test", Mode: "sim",
		Units: r.units, Journal: r.units.Journal(), SimProcs: r.simProcs, Net: r.sim.Agent.Net, AppLog: r.appLog,
		Logger: r.a.log})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestTheNewAgentCompletesTheJob(t *testing.T) {
	r := newSimRig(t, updatesOn)
	p := prepare(t, r, admin, "manage_update_server", map[string]any{"reason": "new release"})
	c, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	if e != nil {
		t.Fatal(e)
	}
	// The old agent is gone before it looked again; the helper, too, was
	// restarted by the package, while the updater ran on.
	r.killHelper()
	r.startHelper()
	r.a = newAgentOn(t, r)
	finishUpdate(t, r)
	last, ok, err := r.db.LastSelfUpdate()
	if err != nil || !ok || last.ID != c.Result["job_id"] || last.Outcome != selfupdate.PhaseSucceeded || installed(t, r) != "1.1.0" {
		t.Fatalf("last %+v %v %v, installed %s", last, ok, err, installed(t, r))
	}
}

func TestAJobTheHelperForgotEndsAsFailed(t *testing.T) {
	r := newSimRig(t, updatesOn)
	p := prepare(t, r, admin, "manage_update_server", map[string]any{"reason": "new release"})
	if _, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token}); e != nil {
		t.Fatal(e)
	}
	finishUpdate(t, r)
	// A job whose run the helper has no record of (its state directory
	// was wiped) cannot end by itself: the agent ends it, saying why.
	j := store.UpdateJob{ID: "job-lost", From: "1.1.0", To: "1.2.0", Channel: "stable", Principal: "alice"}
	if err := r.db.PutUpdateJob(j); err != nil {
		t.Fatal(err)
	}
	finishUpdate(t, r)
	last, _, err := r.db.LastSelfUpdate()
	if err != nil || last.ID != "job-lost" || last.Outcome != selfupdate.PhaseFailed || !strings.Contains(last.Reason, "no record") {
		t.Fatalf("last %+v %v", last, err)
	}
}

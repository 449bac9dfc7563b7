package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
)

// The seeded simulated board (hw/apt's seed) has five upgrades (openssl
// and libssl3 from the security archive, a kernel bringing a new package,
// tzdata and raspi-mcp 0.3.0 -> 0.4.0) and raspi-firmware held back.

// Laptop mode turns every switch on; the denial tests turn this one off.
func updatesOn(c *config.Config)  { c.Manage.Updates = true }
func updatesOff(c *config.Config) { c.Manage.Updates = false }

func (r *rig) aptSim() *apt.Sim { return r.sim.Agent.Apt }

func (r *rig) installed(t *testing.T, name string) string {
	t.Helper()
	v, err := r.aptSim().Version(name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func preview(t *testing.T, r *rig, args map[string]any) updatesPreviewOut {
	t.Helper()
	out, e := callAs[updatesPreviewOut](t, r, operator, "manage_preview_os_updates", args)
	if e != nil {
		t.Fatalf("preview: %+v", e)
	}
	return out
}

func TestCheckForUpdates(t *testing.T) {
	r := newSimRig(t, nil)
	out, e := callAs[updatesCheckOut](t, r, reader, "manage_check_for_updates", map[string]any{})
	if e != nil {
		t.Fatal(e)
	}
	if !out.UpdateAvailable || out.CurrentVersion != "0.3.0" || out.LatestVersion != "0.4.0" || out.Channel != "stable" || out.RunningVersion != "test" || out.LastChecked == "" ||
		out.ReleaseDate == "" || !strings.HasSuffix(out.ReleaseNotesURL, "v0.4.0") {
		t.Errorf("server: %+v", out)
	}
	if o := out.OS; o.Upgradable != 5 || o.Security != 2 || o.Held != 1 || o.NewPackages != 1 || o.RebootRequired || o.DpkgLock != nil || !strings.HasPrefix(o.PlanHash, "sha256:") {
		t.Errorf("os: %+v", o)
	}
	// The lock's holder is named; the check itself needs no switch.
	if err := r.aptSim().HoldLock(&apt.Holder{PID: 4711, Command: "apt-get install vim", Lock: apt.LockFrontend}); err != nil {
		t.Fatal(err)
	}
	out, e = callAs[updatesCheckOut](t, r, reader, "manage_check_for_updates", map[string]any{})
	if e != nil || out.OS.DpkgLock == nil || out.OS.DpkgLock.PID != 4711 {
		t.Errorf("with the lock held: %+v, %v", out.OS, e)
	}
	_, e = callAs[updatesCheckOut](t, r, reader, "manage_check_for_updates", map[string]any{"refresh": true})
	wantErr(t, e, CodeInvalidArgument, nil)
}

func TestPreviewOSUpdates(t *testing.T) {
	r := newSimRig(t, updatesOn)
	before, _ := r.aptSim().State(t.Context())

	dry, e := callAs[updatesPreviewOut](t, r, operator, "manage_preview_os_updates", map[string]any{"dry_run": true})
	if e != nil {
		t.Fatal(e)
	}
	if !dry.DryRun || dry.Refreshed || len(dry.Plan) == 0 || len(dry.Upgrades) != 5 {
		t.Errorf("dry run: %+v", dry)
	}
	if st, _ := r.aptSim().State(t.Context()); !st.ListsUpdated.Equal(before.ListsUpdated) {
		t.Error("the dry run refreshed the lists")
	}

	out := preview(t, r, map[string]any{})
	if !out.Refreshed || out.Status.Status != "succeeded" || out.PlanHash != dry.PlanHash {
		t.Errorf("preview: %+v", out)
	}
	if st, _ := r.aptSim().State(t.Context()); !st.ListsUpdated.After(before.ListsUpdated) {
		t.Error("the lists were not refreshed")
	}
	if out.SecurityCount != 2 || len(out.Installs) != 1 || !slices.Equal(out.Held, []string{"raspi-firmware"}) || len(out.Removals) != 0 {
		t.Errorf("plan: %+v", out)
	}
	if !out.RebootNeeded || !slices.Contains(out.RebootPackages, "linux-image-rpi-v8") || out.DownloadBytes <= 0 || out.InstalledSizeDeltaBytes <= 0 {
		t.Errorf("reboot and sizes: %+v", out)
	}
	i := slices.IndexFunc(out.Upgrades, func(c apt.Change) bool { return c.Name == "openssl" })
	if i < 0 || out.Upgrades[i].From != "3.0.14-1~deb12u2" || out.Upgrades[i].To != "3.0.15-1~deb12u1" || !out.Upgrades[i].Security || out.Upgrades[i].Origin == "" {
		t.Errorf("openssl: %+v", out.Upgrades)
	}
	if r.installed(t, "openssl") != "3.0.14-1~deb12u2" {
		t.Error("a preview installed something")
	}
}

func TestPreviewOSUpdatesDenied(t *testing.T) {
	off := newSimRig(t, updatesOff)
	_, e := callAs[updatesPreviewOut](t, off, operator, "manage_preview_os_updates", map[string]any{})
	wantErr(t, e, CodePermissionDenied, nil)
	if !strings.Contains(e.Message, "updates") {
		t.Errorf("denial does not name the switch: %s", e.Message)
	}
	on := newSimRig(t, updatesOn)
	_, e = callAs[updatesPreviewOut](t, on, reader, "manage_preview_os_updates", map[string]any{})
	wantErr(t, e, CodePermissionDenied, nil)
	_, e = callAs[updatesPreviewOut](t, on, operator, "manage_preview_os_updates", map[string]any{"refresh": "yes please"})
	wantErr(t, e, CodeInvalidArgument, nil)
	// The dpkg lock held by someone else: the refresh is refused naming it.
	if err := on.aptSim().HoldLock(&apt.Holder{PID: 4711, Command: "unattended-upgrade", Lock: apt.LockFrontend}); err != nil {
		t.Fatal(err)
	}
	_, e = callAs[updatesPreviewOut](t, on, operator, "manage_preview_os_updates", map[string]any{})
	wantErr(t, e, CodeResourceExhausted, nil)
	if e.Details["holder_pid"] != 4711.0 || !strings.Contains(e.Message, "unattended-upgrade") {
		t.Errorf("lock error: %+v", e)
	}
	// Without a refresh the plan can still be read.
	if out := preview(t, on, map[string]any{"refresh": false}); out.Refreshed || len(out.Upgrades) != 5 {
		t.Errorf("preview without refresh: %+v", out)
	}
}

// commit runs change_commit and returns the applied call's result.
func commitApply(t *testing.T, r *rig, token string) (updatesApplyOut, *tool.Error) {
	t.Helper()
	out, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": token})
	if e != nil {
		return updatesApplyOut{}, e
	}
	var res updatesApplyOut
	strictDecode(t, "commit result", out.Result, &res)
	return res, nil
}

func TestApplyOSUpdates(t *testing.T) {
	r := newSimRig(t, updatesOn)
	pre := preview(t, r, map[string]any{"refresh": false})
	args := map[string]any{"plan_hash": pre.PlanHash, "reason": "monthly updates"}

	// Critical: no direct call, no operator, no bad hash.
	_, e := callAs[updatesApplyOut](t, r, admin, "manage_apply_os_updates", args)
	wantErr(t, e, CodeFailedPrecondition, nil)
	_, e = callAs[changePrepareOut](t, r, operator, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": args})
	wantErr(t, e, CodePermissionDenied, nil)
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": "sha256:x"}})
	wantErr(t, e, CodeInvalidArgument, nil)

	p := prepare(t, r, admin, "manage_apply_os_updates", args)
	var plan updatesApplyOut
	strictDecode(t, "plan", p.Plan, &plan)
	if !plan.DryRun || plan.PlanHash != pre.PlanHash || len(plan.Packages) != 6 || r.installed(t, "openssl") != "3.0.14-1~deb12u2" {
		t.Fatalf("prepare's plan: %+v", plan)
	}
	audits := r.auditCount()
	out, e := commitApply(t, r, p.Token)
	if e != nil {
		t.Fatal(e)
	}
	if out.Status.Status != "succeeded" || out.Status.ProgressPercent != 100 || out.JobID == "" || !out.RebootRequired {
		t.Errorf("status: %+v", out)
	}
	if !slices.Equal(out.ConffilesKept, []string{"/etc/ssl/openssl.cnf"}) {
		t.Errorf("conffiles kept: %v", out.ConffilesKept)
	}
	for _, pk := range out.Packages {
		if pk.After != pk.Target || pk.After == pk.Before {
			t.Errorf("package %+v", pk)
		}
		if r.installed(t, pk.Name) != pk.Target {
			t.Errorf("%s is %s, want %s", pk.Name, r.installed(t, pk.Name), pk.Target)
		}
	}
	if r.installed(t, "raspi-firmware") != "1:1.20240902-1" {
		t.Error("the held package was upgraded")
	}
	// Audited: the call, and the run's start and end with the plan hash
	// and the versions before and after.
	if n := r.auditCount(); n < audits+3 {
		t.Errorf("%d audit records for the apply, want at least 3", n-audits)
	}
	recs, _, err := r.db.QueryAudit(store.AuditQuery{Tool: "manage.apply_os_updates"})
	if err != nil {
		t.Fatal(err)
	}
	var ended bool
	for _, rec := range recs {
		if strings.Contains(rec.Reason, "succeeded") && strings.Contains(rec.Message, pre.PlanHash) && strings.Contains(rec.Message, "openssl 3.0.14-1~deb12u2->3.0.15-1~deb12u1") {
			ended = true
		}
	}
	if !ended {
		t.Errorf("no audit record of the run's end with versions: %+v", recs)
	}
	jobs, e := callAs[jobsListOut](t, r, reader, "manage_list_jobs", map[string]any{})
	if e != nil || !slices.ContainsFunc(jobs.Jobs, func(j queuedJob) bool {
		return j.JobID == out.JobID && j.Kind == "os_update" && j.Status == "succeeded"
	}) {
		t.Errorf("jobs: %+v, %v", jobs, e)
	}
	// Nothing left to do: a second apply of the old plan is stale.
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": args})
	wantErr(t, e, CodeFailedPrecondition, nil)
}

func TestApplyOSUpdatesStalePlan(t *testing.T) {
	r := newSimRig(t, updatesOn)
	pre := preview(t, r, map[string]any{"refresh": false})
	args := map[string]any{"plan_hash": pre.PlanHash, "reason": "updates"}
	p := prepare(t, r, admin, "manage_apply_os_updates", args)
	// A new tzdata is published between prepare and commit.
	if err := r.aptSim().Publish("tzdata", apt.SimPackage{Version: "2024c-0+deb12u1", Origin: "Debian:12.9/stable"}); err != nil {
		t.Fatal(err)
	}
	_, e := commitApply(t, r, p.Token)
	wantErr(t, e, CodeFailedPrecondition, nil)
	diff, _ := e.Details["difference"].([]any)
	if len(diff) != 2 || !strings.Contains(diff[0].(string), "tzdata") || e.Details["current_plan_hash"] == pre.PlanHash {
		t.Errorf("difference: %+v", e.Details)
	}
	if len(e.Next) == 0 || e.Next[0].Tool != "manage_preview_os_updates" {
		t.Errorf("next: %+v", e.Next)
	}
	if r.installed(t, "tzdata") != "2024a-0+deb12u1" || r.installed(t, "openssl") != "3.0.14-1~deb12u2" {
		t.Error("a stale plan installed something")
	}
	// The same at prepare time.
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": args})
	wantErr(t, e, CodeFailedPrecondition, nil)
}

func TestApplyOSUpdatesDenied(t *testing.T) {
	off := newSimRig(t, updatesOff)
	hash := apt.Plan{}.Hash()
	_, e := callAs[changePrepareOut](t, off, admin, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": hash}})
	wantErr(t, e, CodePermissionDenied, nil)
	_, e = callAs[changePrepareOut](t, off, admin, "change_prepare", map[string]any{"tool": "manage_update_os", "arguments": map[string]any{}})
	wantErr(t, e, CodePermissionDenied, nil)

	r := newSimRig(t, updatesOn)
	pre := preview(t, r, map[string]any{"refresh": false})
	args := map[string]any{"plan_hash": pre.PlanHash}
	p := prepare(t, r, admin, "manage_apply_os_updates", args)
	if err := r.aptSim().HoldLock(&apt.Holder{PID: 4711, Command: "apt-get install vim", Lock: apt.LockFrontend}); err != nil {
		t.Fatal(err)
	}
	_, e = commitApply(t, r, p.Token)
	wantErr(t, e, CodeResourceExhausted, nil)
	if e.Details["holder_pid"] != 4711.0 || e.Details["holder_command"] != "apt-get install vim" {
		t.Errorf("lock: %+v", e.Details)
	}
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": args})
	wantErr(t, e, CodeResourceExhausted, nil)
	if r.installed(t, "openssl") != "3.0.14-1~deb12u2" {
		t.Error("installed while the lock was held")
	}
}

// startApply commits an apply in the background; the result arrives on
// the channel.
func startApply(t *testing.T, r *rig) (<-chan *mcp.CallToolResult, string) {
	t.Helper()
	pre := preview(t, r, map[string]any{"refresh": false})
	p := prepare(t, r, admin, "manage_apply_os_updates", map[string]any{"plan_hash": pre.PlanHash})
	s := r.session(t, admin)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.CallTool(t.Context(), &mcp.CallToolParams{Name: "change_commit", Arguments: map[string]any{"token": p.Token}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	return done, pre.PlanHash
}

// osJob waits until manage_list_jobs shows the running apply in phase.
func osJob(t *testing.T, r *rig, phase string) queuedJob {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for time.Now().Before(deadline) {
		jobs, e := callAs[jobsListOut](t, r, reader, "manage_list_jobs", map[string]any{})
		if e != nil {
			t.Fatal(e)
		}
		for _, j := range jobs.Jobs {
			if j.Kind == "os_update" && j.Status == "running" && strings.Contains(j.Summary, "apply: "+phase) {
				return j
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no running apply in phase %s", phase)
	return queuedJob{}
}

func TestCancelOSUpdateBeforeUnpacking(t *testing.T) {
	r := newSimRig(t, updatesOn)
	if err := r.aptSim().SetPause("download"); err != nil {
		t.Fatal(err)
	}
	done, _ := startApply(t, r)
	j := osJob(t, r, "download")
	if !strings.Contains(j.Cancel, "nothing is installed") {
		t.Errorf("cancel effect: %q", j.Cancel)
	}
	_, e := callAs[jobsCancelOut](t, r, reader, "manage_cancel_job", map[string]any{"job_id": j.JobID})
	wantErr(t, e, CodePermissionDenied, nil)
	dry, e := callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": j.JobID, "dry_run": true})
	if e != nil || !dry.DryRun || dry.Cancelled {
		t.Fatalf("dry run: %+v, %v", dry, e)
	}
	out, e := callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": j.JobID})
	if e != nil || !out.Cancelled || out.Kind != "os_update" {
		t.Fatalf("cancel: %+v, %v", out, e)
	}
	res := <-done
	_, e = decodeResult[changeCommitOut](t, res)
	wantErr(t, e, CodeFailedPrecondition, nil)
	if !strings.Contains(e.Message, "cancelled") {
		t.Errorf("apply after cancel: %s", e.Message)
	}
	if r.installed(t, "openssl") != "3.0.14-1~deb12u2" {
		t.Error("a cancelled apply installed openssl")
	}
}

func TestCancelOSUpdateRefusedAfterUnpacking(t *testing.T) {
	r := newSimRig(t, updatesOn)
	if err := r.aptSim().SetPause("install"); err != nil {
		t.Fatal(err)
	}
	done, _ := startApply(t, r)
	j := osJob(t, r, "install")
	if !strings.Contains(j.Cancel, "refused") {
		t.Errorf("cancel effect: %q", j.Cancel)
	}
	_, e := callAs[jobsCancelOut](t, r, operator, "manage_cancel_job", map[string]any{"job_id": j.JobID})
	wantErr(t, e, CodeFailedPrecondition, nil)
	if !strings.Contains(e.Message, "dpkg has started") {
		t.Errorf("refusal does not say why: %s", e.Message)
	}
	if err := r.aptSim().SetPause(""); err != nil {
		t.Fatal(err)
	}
	res := <-done
	out, e := decodeResult[changeCommitOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	if out.Result["status"].(map[string]any)["status"] != "succeeded" || r.installed(t, "openssl") != "3.0.15-1~deb12u1" {
		t.Errorf("apply after a refused cancel: %+v", out.Result)
	}
}

func TestUpdateOS(t *testing.T) {
	r := newSimRig(t, updatesOn)
	p := prepare(t, r, admin, "manage_update_os", map[string]any{"reason": "all in one"})
	var plan updatesApplyOut
	strictDecode(t, "plan", p.Plan, &plan)
	if !plan.DryRun || plan.Preview == nil || len(plan.Preview.Upgrades) != 5 || plan.Preview.Refreshed {
		t.Fatalf("plan: %+v", plan)
	}
	out, e := commitApply(t, r, p.Token)
	if e != nil {
		t.Fatal(e)
	}
	if out.Status.Status != "succeeded" || out.Preview == nil || !out.Preview.Refreshed || out.PlanHash != plan.PlanHash {
		t.Errorf("update_os: %+v", out)
	}
	if r.installed(t, "raspi-mcp") != "0.4.0" {
		t.Error("raspi-mcp was not upgraded")
	}
	// Nothing left to install, and a hash that is no longer the plan.
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_update_os", "arguments": map[string]any{}})
	wantErr(t, e, CodeFailedPrecondition, nil)
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_update_os", "arguments": map[string]any{"plan_hash": plan.PlanHash}})
	wantErr(t, e, CodeFailedPrecondition, nil)
}

func TestApplyOSUpdatesReportsProgress(t *testing.T) {
	r := newSimRig(t, updatesOn)
	pre := preview(t, r, map[string]any{"refresh": false})
	var m messages
	s := r.serveMany()(m.options(), "2025-11-25")
	// This session is the user running the test, admin in laptop mode.
	_, p := r.asSession(s, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": pre.PlanHash}})
	params := &mcp.CallToolParams{Name: "change_commit", Arguments: map[string]any{"token": p["token"]}}
	params.SetProgressToken("upd-1")
	res, err := s.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("commit: %v %+v", err, res)
	}
	waitFor(t, "the last progress", hangGuard, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.progress) > 0 && m.progress[len(m.progress)-1].Progress == 100
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	last := -1.0
	for i, n := range m.progress {
		if n.ProgressToken != "upd-1" || n.Progress <= last || n.Total != 100 {
			t.Fatalf("progress %d: %+v (after %v)", i, n, last)
		}
		last = n.Progress
	}
	if len(m.progress) < 2 {
		t.Errorf("%d progress notifications", len(m.progress))
	}
}

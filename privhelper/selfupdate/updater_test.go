package selfupdate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakePkgs is a package manager that records what it was asked to do.
type fakePkgs struct {
	installed  string
	installErr error // Install fails with it...
	halfway    bool  // ...after leaving the target half-installed ("" installed)
	reinstErr  error
	calls      []string
}

func (f *fakePkgs) Installed(context.Context) (string, error) { return f.installed, nil }
func (f *fakePkgs) Keep(_ context.Context, v string) (string, error) {
	f.calls = append(f.calls, "keep "+v)
	return "/cache/raspi-mcp_" + v + ".deb", nil
}
func (f *fakePkgs) Install(_ context.Context, v string) error {
	f.calls = append(f.calls, "install "+v)
	if f.installErr != nil {
		if f.halfway {
			f.installed = ""
		}
		return f.installErr
	}
	f.installed = v
	return nil
}
func (f *fakePkgs) Reinstall(_ context.Context, path string) error {
	f.calls = append(f.calls, "reinstall "+path)
	if f.reinstErr != nil {
		return f.reinstErr
	}
	f.installed = strings.TrimSuffix(strings.TrimPrefix(path, "/cache/raspi-mcp_"), ".deb")
	return nil
}

// fakeHealth answers at once, as the new agent would have.
type fakeHealth struct {
	rep  Report
	err  error
	seen []string
}

func (f *fakeHealth) Await(_ context.Context, id, version string, _ time.Time) (Report, error) {
	f.seen = append(f.seen, id+" "+version)
	return f.rep, f.err
}

func runOnce(t *testing.T, p *fakePkgs, h *fakeHealth) Run {
	t.Helper()
	dir := Dir(t.TempDir())
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	if _, err := Begin(dir, Run{ID: "u1", From: "1.0", To: "1.1", Channel: "stable"}, now); err != nil {
		t.Fatal(err)
	}
	u := &Updater{Dir: dir, Packages: p, Health: h, Deadline: 2 * time.Minute, Now: func() time.Time { return now }}
	got, err := u.Run(context.Background(), "u1")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _, err := dir.ReadRun()
	if err != nil || onDisk != got {
		t.Fatalf("the record on disk %+v differs from the result %+v (%v)", onDisk, got, err)
	}
	if got.Finished.IsZero() || got.Installed != p.installed {
		t.Fatalf("finished %v, installed %q, want the package manager's %q", got.Finished, got.Installed, p.installed)
	}
	return got
}

func want(t *testing.T, r Run, phase, reason string, calls []string, p *fakePkgs) {
	t.Helper()
	if r.Phase != phase || !strings.Contains(r.Reason, reason) || (reason == "" && r.Reason != "") {
		t.Errorf("phase %s reason %q, want %s with %q", r.Phase, r.Reason, phase, reason)
	}
	if strings.Join(p.calls, "; ") != strings.Join(calls, "; ") {
		t.Errorf("calls %q, want %q", p.calls, calls)
	}
}

func TestInstallAndHealthySucceeds(t *testing.T) {
	p, h := &fakePkgs{installed: "1.0"}, &fakeHealth{rep: Report{ID: "u1", Version: "1.1", Healthy: true}}
	r := runOnce(t, p, h)
	want(t, r, PhaseSucceeded, "", []string{"keep 1.0", "install 1.1"}, p)
	if r.Installed != "1.1" || r.Kept != "/cache/raspi-mcp_1.0.deb" || len(h.seen) != 1 || h.seen[0] != "u1 1.1" {
		t.Errorf("installed %q kept %q, health asked for %q", r.Installed, r.Kept, h.seen)
	}
}

func TestNeverHealthyRollsBack(t *testing.T) {
	p := &fakePkgs{installed: "1.0"}
	r := runOnce(t, p, &fakeHealth{err: errors.New("no report")})
	want(t, r, PhaseRolledBack, "did not report healthy within 2m0s: no report",
		[]string{"keep 1.0", "install 1.1", "reinstall /cache/raspi-mcp_1.0.deb"}, p)
	if r.Installed != "1.0" {
		t.Errorf("installed %q after the rollback", r.Installed)
	}
}

func TestUnhealthyReportRollsBackWithItsReason(t *testing.T) {
	p := &fakePkgs{installed: "1.0"}
	r := runOnce(t, p, &fakeHealth{rep: Report{ID: "u1", Version: "1.1", Reason: "audit: chain broken at 7"}})
	want(t, r, PhaseRolledBack, "failed its start-up check: audit: chain broken at 7",
		[]string{"keep 1.0", "install 1.1", "reinstall /cache/raspi-mcp_1.0.deb"}, p)
}

func TestInstallFailureChangesNothing(t *testing.T) {
	p, h := &fakePkgs{installed: "1.0", installErr: errors.New("E: Failed to fetch")}, &fakeHealth{}
	r := runOnce(t, p, h)
	want(t, r, PhaseFailed, "nothing changed: installing 1.1 failed: E: Failed to fetch", []string{"keep 1.0", "install 1.1"}, p)
	if r.Installed != "1.0" || len(h.seen) != 0 {
		t.Errorf("installed %q, health asked %q", r.Installed, h.seen)
	}
}

func TestHalfInstalledIsRolledBack(t *testing.T) {
	p := &fakePkgs{installed: "1.0", installErr: errors.New("dpkg: error processing"), halfway: true}
	r := runOnce(t, p, &fakeHealth{})
	want(t, r, PhaseRolledBack, "installing 1.1 failed: dpkg: error processing",
		[]string{"keep 1.0", "install 1.1", "reinstall /cache/raspi-mcp_1.0.deb"}, p)
}

func TestFailedRollbackIsReported(t *testing.T) {
	p := &fakePkgs{installed: "1.0", reinstErr: errors.New("disk full")}
	r := runOnce(t, p, &fakeHealth{err: errors.New("no report")})
	want(t, r, PhaseFailed, "did not report healthy within 2m0s: no report; rolling back to 1.0 failed too: disk full",
		[]string{"keep 1.0", "install 1.1", "reinstall /cache/raspi-mcp_1.0.deb"}, p)
	if r.Installed != "1.1" {
		t.Errorf("installed %q: the record must say what is really there", r.Installed)
	}
}

func TestPlannedFromAnotherVersionChangesNothing(t *testing.T) {
	p := &fakePkgs{installed: "0.9"}
	r := runOnce(t, p, &fakeHealth{})
	want(t, r, PhaseFailed, "nothing changed: 0.9 is installed, not 1.0", nil, p)
}

func TestBeginRefusesASecondRun(t *testing.T) {
	dir := Dir(t.TempDir())
	now := time.Now()
	if _, err := Begin(dir, Run{ID: "u1", From: "1.0", To: "1.1"}, now); err != nil {
		t.Fatal(err)
	}
	if _, err := Begin(dir, Run{ID: "u2", From: "1.0", To: "1.2"}, now); !errors.Is(err, ErrBusy) {
		t.Fatalf("second run while the first is under way: %v", err)
	}
	r, _, _ := dir.ReadRun()
	if r.ID != "u1" {
		t.Fatalf("the refused run replaced the record: %+v", r)
	}
	r.Phase = PhaseRolledBack
	if err := dir.WriteRun(r); err != nil {
		t.Fatal(err)
	}
	if _, err := Begin(dir, Run{ID: "u2", From: "1.0", To: "1.2"}, now); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	u := &Updater{Dir: dir, Packages: &fakePkgs{installed: "1.0"}, Health: &fakeHealth{}}
	if _, err := u.Run(context.Background(), "u1"); err == nil {
		t.Fatal("ran a run that is not the recorded one")
	}
}

func TestFileHealthTakesOnlyTheRunsTargetReport(t *testing.T) {
	dir := Dir(t.TempDir())
	// A report for another run or version is not the new agent's.
	if err := dir.WriteReport(Report{ID: "u0", Version: "1.1", Healthy: true}); err != nil {
		t.Fatal(err)
	}
	h := FileHealth{Dir: dir, Poll: time.Millisecond}
	ctx := context.Background()
	if _, err := h.Await(ctx, "u1", "1.1", time.Now()); err == nil {
		t.Fatal("took another run's report")
	}
	if err := dir.WriteReport(Report{ID: "u1", Version: "1.1", Healthy: true}); err != nil {
		t.Fatal(err)
	}
	rep, err := h.Await(ctx, "u1", "1.1", time.Now().Add(time.Minute))
	if err != nil || !rep.Healthy {
		t.Fatalf("%+v %v", rep, err)
	}
}

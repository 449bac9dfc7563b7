package apt

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/units"
)

// hangGuard bounds waits that only a hang would reach.
const hangGuard = 2 * time.Minute

func newSimRunner(t *testing.T) (*Sim, *Runner) {
	t.Helper()
	s, err := NewSim(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Step = 0
	return s, s.Runner(&units.SimTransient{Programs: s.Programs()})
}

// waitRun polls until the run satisfies ok.
func waitRun(t *testing.T, r *Runner, id string, ok func(RunInfo) bool) RunInfo {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		info, err := r.Status(id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never got there: %+v", id, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ended(i RunInfo) bool { return i.State != StateRunning }

func TestSimPlan(t *testing.T) {
	s, _ := newSimRunner(t)
	p, err := s.Simulate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range p.Upgrades {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"libssl3", "linux-image-rpi-v8", "openssl", "raspi-mcp", "tzdata"}) {
		t.Errorf("upgrades %v", names)
	}
	if len(p.Installs) != 1 || !slices.Equal(p.Held, []string{"raspi-firmware"}) || p.SecurityCount() != 2 {
		t.Errorf("plan %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	sz, err := s.Sizes(t.Context(), p)
	if err != nil || sz.DownloadBytes <= 0 || sz.InstalledSizeDelta <= 0 {
		t.Errorf("sizes %+v, %v", sz, err)
	}
	pol, err := s.Policy(t.Context(), "raspi-mcp")
	if err != nil || pol.Installed != "0.3.0" || pol.Candidate != "0.4.0" || !pol.UpdateAvailable() || !slices.Equal(pol.CandidateSuites, []string{"stable"}) {
		t.Errorf("policy %+v, %v", pol, err)
	}
}

func TestRunnerApplyInstallsExactlyThePlan(t *testing.T) {
	s, r := newSimRunner(t)
	p, _ := s.Simulate(t.Context())
	before, _ := s.State(t.Context())
	info, err := r.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if info.State != StateRunning || info.PlanHash != p.Hash() || !info.Cancellable {
		t.Errorf("started %+v", info)
	}
	info = waitRun(t, r, info.ID, ended)
	if info.State != StateSucceeded || info.Percent != 100 || !slices.Equal(info.ConffilesKept, []string{"/etc/ssl/openssl.cnf"}) {
		t.Fatalf("ended %+v", info)
	}
	for _, c := range append(p.Upgrades, p.Installs...) {
		if v, _ := s.Version(c.Name); v != c.To {
			t.Errorf("%s is %s, want %s", c.Name, v, c.To)
		}
	}
	if v, _ := s.Version("raspi-firmware"); v != "1:1.20240902-1" {
		t.Errorf("the held package moved to %s", v)
	}
	after, _ := s.State(t.Context())
	if before.RebootRequired || !after.RebootRequired {
		t.Errorf("reboot required before %v after %v", before.RebootRequired, after.RebootRequired)
	}
	if again, _ := s.Simulate(t.Context()); !again.Empty() {
		t.Errorf("after the apply the plan is %+v", again)
	}
}

func TestRunnerRefusesWhileLocked(t *testing.T) {
	s, r := newSimRunner(t)
	p, _ := s.Simulate(t.Context())
	if err := s.HoldLock(&Holder{PID: 4242, Command: "apt-get install vim", Lock: LockFrontend}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Apply(t.Context(), p)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.Holder.PID != 4242 || !strings.Contains(err.Error(), "apt-get install vim") {
		t.Fatalf("Apply while locked = %v", err)
	}
	if _, err := r.Refresh(t.Context()); !errors.Is(err, ErrLocked) {
		t.Errorf("Refresh while locked = %v", err)
	}
	if len(r.List()) != 0 {
		t.Errorf("a refused run was recorded: %+v", r.List())
	}
}

func TestRunnerCancelBeforeDpkg(t *testing.T) {
	s, r := newSimRunner(t)
	p, _ := s.Simulate(t.Context())
	if err := s.SetPause("download"); err != nil {
		t.Fatal(err)
	}
	info, err := r.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(t.Context(), p); !errors.Is(err, ErrBusy) {
		t.Errorf("second Apply = %v, want ErrBusy", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	defer cancel()
	if _, err := r.Cancel(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	info = waitRun(t, r, info.ID, ended)
	if info.State != StateCancelled {
		t.Fatalf("cancelled run %+v", info)
	}
	if v, _ := s.Version("openssl"); v != "3.0.14-1~deb12u2" {
		t.Errorf("openssl is %s after a cancel", v)
	}
}

func TestRunnerCancelRefusedOnceDpkgRuns(t *testing.T) {
	s, r := newSimRunner(t)
	p, _ := s.Simulate(t.Context())
	if err := s.SetPause("install"); err != nil {
		t.Fatal(err)
	}
	info, err := r.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, r, info.ID, func(i RunInfo) bool { return i.Phase == "install" && i.Message == "Running dpkg" })
	got, err := r.Cancel(t.Context(), info.ID)
	if !errors.Is(err, ErrTooLate) || got.Cancellable || !strings.Contains(err.Error(), "install phase") {
		t.Fatalf("Cancel during install = %+v, %v", got, err)
	}
	if err := s.SetPause(""); err != nil {
		t.Fatal(err)
	}
	if info = waitRun(t, r, info.ID, ended); info.State != StateSucceeded {
		t.Fatalf("run %+v", info)
	}
	if _, err := r.Cancel(t.Context(), info.ID); err == nil || errors.Is(err, ErrTooLate) {
		t.Errorf("Cancel of an ended run = %v", err)
	}
	if _, err := r.Cancel(t.Context(), "os-update-nosuch"); !errors.Is(err, ErrNoRun) {
		t.Errorf("Cancel of no run = %v", err)
	}
}

func TestRunnerStalePlanFails(t *testing.T) {
	s, r := newSimRunner(t)
	p, _ := s.Simulate(t.Context())
	if err := s.Publish("tzdata", SimPackage{Version: "2024c-0+deb12u1", Origin: "Debian:12.9/stable"}); err != nil {
		t.Fatal(err)
	}
	info, err := r.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	info = waitRun(t, r, info.ID, ended)
	if info.State != StateFailed || !strings.Contains(info.Error, "tzdata") {
		t.Fatalf("run %+v", info)
	}
	if v, _ := s.Version("openssl"); v != "3.0.14-1~deb12u2" {
		t.Errorf("openssl is %s after a failed download", v)
	}
}

func TestRunnerRefresh(t *testing.T) {
	s, r := newSimRunner(t)
	before, _ := s.State(t.Context())
	info, err := r.Refresh(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info = waitRun(t, r, info.ID, ended); info.State != StateSucceeded {
		t.Fatalf("refresh %+v", info)
	}
	after, _ := s.State(t.Context())
	if !after.ListsUpdated.After(before.ListsUpdated) {
		t.Errorf("lists updated %v, before %v", after.ListsUpdated, before.ListsUpdated)
	}
}

func TestRunnerRefusesBadPlans(t *testing.T) {
	_, r := newSimRunner(t)
	for _, p := range []Plan{
		{},
		{Upgrades: []Change{{Name: "-o", To: "1"}}},
		{Upgrades: []Change{{Name: "bash", To: "1;reboot"}}},
		{Removals: []Change{{Name: "Bash"}}},
	} {
		if _, err := r.Apply(t.Context(), p); err == nil {
			t.Errorf("Apply(%+v) = nil", p)
		}
	}
}

func TestRunnerCommandLine(t *testing.T) {
	r := &Runner{Dir: "/run/raspi-mcp-helper/apt"}
	p := Plan{Upgrades: []Change{{Name: "bash", From: "1", To: "2"}}}
	argv := r.spec("os-update-x", "install", "d", r.installArgs(p, "--no-download")...).Argv
	want := []string{"/bin/sh", "-c", statusScript, "raspi-mcp-apt", "/run/raspi-mcp-helper/apt/os-update-x.status", "/usr/bin/apt-get",
		"-q", "-y", "-o", "APT::Status-Fd=3", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
		"--no-download", "--no-remove", "install", "--", "bash=2"}
	if !slices.Equal(argv, want) {
		t.Errorf("argv\n%q\nwant\n%q", argv, want)
	}
}

package privhelper_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// simApt is the simulated package manager with instant steps and a
// runner over it.
func simApt(t testing.TB) (*apt.Sim, *apt.Runner) {
	t.Helper()
	s, err := apt.NewSim(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Step = 0
	return s, s.Runner(&units.SimTransient{Programs: s.Programs()})
}

// aptHelper serves the apt methods on the sim, with [manage] updates as given.
func aptHelper(t *testing.T, updates bool) (*apt.Sim, *client.Client) {
	s, r := simApt(t)
	pol := defaultPolicy()
	pol.Config.Manage.Enabled, pol.Config.Manage.Updates = true, updates
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Ops: privhelper.Ops{Apt: r}})
	return s, newClient(t, h.sock)
}

func applyReq(p apt.Plan) proto.AptApplyReq {
	pk := func(cs []apt.Change) []proto.AptPackage {
		out := []proto.AptPackage{}
		for _, c := range cs {
			out = append(out, proto.AptPackage{Name: c.Name, From: c.From, To: c.To})
		}
		return out
	}
	return proto.AptApplyReq{PlanHash: p.Hash(), Upgrades: pk(p.Upgrades), Installs: pk(p.Installs), Removals: pk(p.Removals), Held: p.Held}
}

func waitAptRun(t *testing.T, c *client.Client, id string, ok func(proto.AptRun) bool) proto.AptRun {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		resp, err := client.Call(context.Background(), c, proto.AptStatus, proto.AptStatusReq{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if ok(resp.Runs[0]) {
			return resp.Runs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %+v", id, resp.Runs[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHelperAptApply(t *testing.T) {
	s, c := aptHelper(t, true)
	ctx := context.Background()
	p, _ := s.Simulate(ctx)
	run, err := client.Call(ctx, c, proto.AptApply, applyReq(p))
	if err != nil {
		t.Fatal(err)
	}
	run = waitAptRun(t, c, run.ID, func(r proto.AptRun) bool { return r.State != apt.StateRunning })
	if run.State != apt.StateSucceeded || run.PlanHash != p.Hash() || len(run.ConffilesKept) != 1 {
		t.Fatalf("run %+v", run)
	}
	if v, _ := s.Version("openssl"); v != "3.0.15-1~deb12u1" {
		t.Errorf("openssl %s", v)
	}
	all, err := client.Call(ctx, c, proto.AptStatus, proto.AptStatusReq{})
	if err != nil || len(all.Runs) != 1 || all.Runs[0].ID != run.ID {
		t.Errorf("status of all: %+v, %v", all, err)
	}
}

func TestHelperAptRefusals(t *testing.T) {
	ctx := context.Background()
	s, off := aptHelper(t, false)
	p, _ := s.Simulate(ctx)
	if _, err := client.Call(ctx, off, proto.AptApply, applyReq(p)); proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Errorf("apply with updates off: %v", err)
	}
	if _, err := client.Call(ctx, off, proto.AptRefresh, proto.AptRefreshReq{}); proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Errorf("refresh with updates off: %v", err)
	}

	s, c := aptHelper(t, true)
	p, _ = s.Simulate(ctx)
	bad := applyReq(p)
	bad.PlanHash = apt.Plan{Upgrades: []apt.Change{{Name: "bash", To: "9"}}}.Hash()
	if _, err := client.Call(ctx, c, proto.AptApply, bad); proto.CodeOf(err) != proto.CodeFailedPrecondition {
		t.Errorf("apply with another plan's hash: %v", err)
	}
	for name, mod := range map[string]func(*proto.AptApplyReq){
		"option as name":   func(r *proto.AptApplyReq) { r.Upgrades[0].Name = "-oDpkg::Pre-Invoke=x" },
		"shell in version": func(r *proto.AptApplyReq) { r.Upgrades[0].To = "1$(reboot)" },
		"no version":       func(r *proto.AptApplyReq) { r.Upgrades[0].To = "" },
		"no hash":          func(r *proto.AptApplyReq) { r.PlanHash = "" },
		"empty":            func(r *proto.AptApplyReq) { *r = proto.AptApplyReq{PlanHash: r.PlanHash} },
	} {
		r := applyReq(p)
		mod(&r)
		if _, err := client.Call(ctx, c, proto.AptApply, r); proto.CodeOf(err) != proto.CodeInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := s.HoldLock(&apt.Holder{PID: 4711, Command: "unattended-upgrade", Lock: "/var/lib/dpkg/lock-frontend"}); err != nil {
		t.Fatal(err)
	}
	_, err := client.Call(ctx, c, proto.AptApply, applyReq(p))
	pe, _ := err.(*proto.Error)
	if proto.CodeOf(err) != proto.CodeResourceExhausted || pe == nil || pe.Details["holder_pid"] != float64(4711) || !strings.Contains(pe.Message, "unattended-upgrade") {
		t.Errorf("apply while locked: %#v", err)
	}
	resp, err := client.Call(ctx, c, proto.AptStatus, proto.AptStatusReq{})
	if err != nil || len(resp.Runs) != 0 {
		t.Errorf("refused calls left runs: %+v, %v", resp, err)
	}
	if v, _ := s.Version("openssl"); v != "3.0.14-1~deb12u2" {
		t.Errorf("a refused apply changed openssl to %s", v)
	}
}

func TestHelperAptCancel(t *testing.T) {
	ctx := context.Background()
	s, c := aptHelper(t, true)
	p, _ := s.Simulate(ctx)
	if err := s.SetPause("download"); err != nil {
		t.Fatal(err)
	}
	run, err := client.Call(ctx, c, proto.AptApply, applyReq(p))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Call(ctx, c, proto.AptCancel, proto.AptCancelReq{ID: run.ID}); err != nil {
		t.Fatal(err)
	}
	if run = waitAptRun(t, c, run.ID, func(r proto.AptRun) bool { return r.State != apt.StateRunning }); run.State != apt.StateCancelled {
		t.Fatalf("cancelled: %+v", run)
	}

	if err := s.SetPause("install"); err != nil {
		t.Fatal(err)
	}
	run, err = client.Call(ctx, c, proto.AptApply, applyReq(p))
	if err != nil {
		t.Fatal(err)
	}
	waitAptRun(t, c, run.ID, func(r proto.AptRun) bool { return r.Phase == "install" && r.Message == "Running dpkg" })
	_, err = client.Call(ctx, c, proto.AptCancel, proto.AptCancelReq{ID: run.ID})
	if proto.CodeOf(err) != proto.CodeFailedPrecondition || !strings.Contains(err.Error(), "dpkg has started") {
		t.Errorf("cancel during dpkg: %v", err)
	}
	if err := s.SetPause(""); err != nil {
		t.Fatal(err)
	}
	if run = waitAptRun(t, c, run.ID, func(r proto.AptRun) bool { return r.State != apt.StateRunning }); run.State != apt.StateSucceeded {
		t.Fatalf("run %+v", run)
	}
	if _, err := client.Call(ctx, c, proto.AptCancel, proto.AptCancelReq{ID: "x;y"}); proto.CodeOf(err) != proto.CodeInvalidArgument {
		t.Errorf("bad id: %v", err)
	}
	if _, err := client.Call(ctx, c, proto.AptCancel, proto.AptCancelReq{ID: "os-update-000000000000"}); proto.CodeOf(err) != proto.CodeNotFound {
		t.Errorf("unknown id: %v", err)
	}
}

package privhelper_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// simUpdates is laptop mode's self-update: the simulated package manager
// and the updater in a goroutine, recording in a fresh directory.
func simUpdates(t testing.TB, deadline time.Duration) privhelper.Updates {
	t.Helper()
	dir := selfupdate.Dir(t.TempDir())
	pk, err := selfupdate.NewSim("")
	if err != nil {
		t.Fatal(err)
	}
	u := &selfupdate.Updater{Dir: dir, Packages: pk, Health: selfupdate.FileHealth{Dir: dir, Poll: 5 * time.Millisecond}, Deadline: deadline}
	return privhelper.Updates{Dir: dir, Catalog: pk, Launcher: selfupdate.InProcess{Updater: u}, Restarts: []string{"raspi-mcp.service"}}
}

func updatePolicy(on bool) privhelper.Policy {
	p := defaultPolicy()
	p.Config.Manage.Enabled, p.Config.Manage.Updates, p.Config.Manage.UpdateHealthTimeout = true, on, config.Duration(time.Minute)
	return p
}

// awaitRun waits (hang guard only) for the run to end.
func awaitRun(t *testing.T, c *client.Client) proto.UpdateRun {
	t.Helper()
	for range 6000 {
		st, err := client.Call(context.Background(), c, proto.UpdateState, proto.UpdateStateReq{})
		if err != nil {
			t.Fatal(err)
		}
		if selfupdate.Final(st.Run.Phase) {
			return st.Run
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the update never ended")
	return proto.UpdateRun{}
}

// awaitPhase waits until the updater waits for the new agent.
func awaitPhase(t *testing.T, c *client.Client, phase string) {
	t.Helper()
	for range 6000 {
		st, err := client.Call(context.Background(), c, proto.UpdateState, proto.UpdateStateReq{})
		if err != nil {
			t.Fatal(err)
		}
		if st.Run.Phase == phase {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the update never reached %s", phase)
}

func wantCode(t *testing.T, err error, code, substr string) {
	t.Helper()
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != code || !strings.Contains(pe.Message, substr) {
		t.Fatalf("got %v, want %s containing %q", err, code, substr)
	}
}

func TestUpdateStartRechecksEverything(t *testing.T) {
	ctx := context.Background()
	off := startHelperWith(t, sockIn(t), privhelper.Options{Policy: updatePolicy(false)})
	_, err := client.Call(ctx, newClient(t, off.sock), proto.UpdateStart, proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0", Channel: "stable"})
	wantCode(t, err, proto.CodePermissionDenied, "[manage] updates")

	up := simUpdates(t, time.Minute)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: updatePolicy(true), Updates: up})
	c := newClient(t, h.sock)
	plan, err := client.Call(ctx, c, proto.UpdatePlan, proto.UpdatePlanReq{})
	if err != nil || plan.Installed != "1.0.0" || len(plan.Candidates) != 4 || plan.HealthTimeout != time.Minute {
		t.Fatalf("plan %+v %v", plan, err)
	}
	for _, tc := range []struct {
		req        proto.UpdateStartReq
		code, what string
	}{
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "-1.1", Channel: "stable"}, proto.CodeInvalidArgument, "not a package version"},
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0", Channel: "nightly"}, proto.CodeInvalidArgument, "channel"},
		{proto.UpdateStartReq{ID: "U 1", From: "1.0.0", To: "1.1.0", Channel: "stable"}, proto.CodeInvalidArgument, "update id"},
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0:", Channel: "stable"}, proto.CodeInvalidArgument, "epoch"},
		{proto.UpdateStartReq{ID: "u1", From: "0.9.0", To: "1.1.0", Channel: "stable"}, proto.CodeFailedPrecondition, "1.0.0 is installed, not 0.9.0"},
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0", Channel: "beta"}, proto.CodeNotFound, "does not offer"},
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.0.0", Channel: "stable"}, proto.CodeFailedPrecondition, "already installed"},
		{proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "0.9.0", Channel: "stable"}, proto.CodeFailedPrecondition, "allow_downgrade"},
	} {
		_, err := client.Call(ctx, c, proto.UpdateStart, tc.req)
		wantCode(t, err, tc.code, tc.what)
	}
	if _, ok, _ := up.Dir.ReadRun(); ok {
		t.Fatal("a refused start was recorded")
	}
	if v, _ := up.Catalog.Installed(ctx); v != "1.0.0" {
		t.Fatalf("a refused start installed %s", v)
	}
}

func TestUpdateSucceedsOnlyOnTheNewAgentsReport(t *testing.T) {
	ctx := context.Background()
	up := simUpdates(t, time.Minute)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: updatePolicy(true), Updates: up})
	c := newClient(t, h.sock)
	st, err := client.Call(ctx, c, proto.UpdateStart, proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0", Channel: "stable"})
	if err != nil || st.Run.Phase != selfupdate.PhaseInstalling || st.Run.Unit != "sim:raspi-mcp-selfupdate-u1" {
		t.Fatalf("start: %+v %v", st, err)
	}
	_, err = client.Call(ctx, c, proto.UpdateStart, proto.UpdateStartReq{ID: "u2", From: "1.0.0", To: "1.1.0", Channel: "stable"})
	if err == nil {
		// The first run may have got far enough that 1.1.0 is installed;
		// either way a second run is refused.
		t.Fatal("a second update started while the first ran")
	}
	awaitPhase(t, c, selfupdate.PhaseAwaiting)
	// The old agent cannot vouch for the new one, nor can a report for another run.
	for _, rep := range []proto.UpdateReportReq{{ID: "u1", Version: "1.0.0", Healthy: true}, {ID: "u9", Version: "1.1.0", Healthy: true}} {
		if r, err := client.Call(ctx, c, proto.UpdateReport, rep); err != nil || r.Accepted {
			t.Fatalf("report %+v: %+v %v", rep, r, err)
		}
	}
	if r, err := client.Call(ctx, c, proto.UpdateReport, proto.UpdateReportReq{ID: "u1", Version: "1.1.0", Healthy: true}); err != nil || !r.Accepted {
		t.Fatalf("the new agent's report: %+v %v", r, err)
	}
	run := awaitRun(t, c)
	if run.Phase != selfupdate.PhaseSucceeded || run.Installed != "1.1.0" || run.Reason != "" || run.Finished.IsZero() {
		t.Fatalf("run %+v", run)
	}
	if r, _ := client.Call(ctx, c, proto.UpdateReport, proto.UpdateReportReq{ID: "u1", Version: "1.1.0", Healthy: false}); r.Accepted {
		t.Fatal("a report after the end was taken")
	}
}

func TestUnhealthyNewAgentIsRolledBack(t *testing.T) {
	ctx := context.Background()
	up := simUpdates(t, time.Minute)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: updatePolicy(true), Updates: up})
	c := newClient(t, h.sock)
	if _, err := client.Call(ctx, c, proto.UpdateStart, proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "0.9.0", Channel: "stable", AllowDowngrade: true}); err != nil {
		t.Fatal(err)
	}
	awaitPhase(t, c, selfupdate.PhaseAwaiting)
	if _, err := client.Call(ctx, c, proto.UpdateReport, proto.UpdateReportReq{ID: "u1", Version: "0.9.0", Reason: "database: cannot migrate"}); err != nil {
		t.Fatal(err)
	}
	run := awaitRun(t, c)
	if run.Phase != selfupdate.PhaseRolledBack || run.Installed != "1.0.0" || !strings.Contains(run.Reason, "database: cannot migrate") {
		t.Fatalf("run %+v", run)
	}
}

func TestSilentNewAgentIsRolledBackAtTheDeadline(t *testing.T) {
	ctx := context.Background()
	up := simUpdates(t, 50*time.Millisecond)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: updatePolicy(true), Updates: up})
	c := newClient(t, h.sock)
	if _, err := client.Call(ctx, c, proto.UpdateStart, proto.UpdateStartReq{ID: "u1", From: "1.0.0", To: "1.1.0", Channel: "stable"}); err != nil {
		t.Fatal(err)
	}
	run := awaitRun(t, c)
	if run.Phase != selfupdate.PhaseRolledBack || run.Installed != "1.0.0" || !strings.Contains(run.Reason, "did not report healthy within 50ms") {
		t.Fatalf("run %+v", run)
	}
}

package simrig_test

import (
	"context"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/internal/simrig"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

func start(t *testing.T, mod func(*config.Config)) *simrig.Rig {
	t.Helper()
	dir := t.TempDir()
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	cfg := config.Laptop(dir, name)
	if mod != nil {
		mod(&cfg)
	}
	r, err := simrig.Start(simrig.Options{Dir: dir, Config: cfg, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// The pins outlive a helper restart, which puts them back in their safe
// state, as the binary does at every start.
func TestHelperRestartKeepsBoard(t *testing.T) {
	r := start(t, nil)
	ctx := context.Background()
	if _, err := client.Call(ctx, r.Helper, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 17, Value: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.StopHelper(); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Board.GPIO.Level(17); err != nil || v != 1 {
		t.Fatalf("GPIO17 after the helper stopped: %d, %v; want the line to keep 1", v, err)
	}
	if err := r.StartHelper(); err != nil || r.SafeStates != nil {
		t.Fatalf("restart: %v, safe states: %v", err, r.SafeStates)
	}
	if v, _ := r.Board.GPIO.Level(17); v != 0 {
		t.Fatalf("GPIO17 after the restart: %d, want its safe state 0", v)
	}
	if err := r.StartHelper(); err == nil {
		t.Fatal("a second helper started on the same rig")
	}
}

// The helper's policy is the config's: with [system] off it refuses a
// reboot the agent is bypassed for, and the board's root processes are
// protected by the board's own accounts.
func TestHelperPolicyFromConfig(t *testing.T) {
	r := start(t, func(c *config.Config) { c.System.Enabled = false })
	_, err := client.Call(context.Background(), r.Helper, proto.PowerSchedule, proto.PowerScheduleReq{Action: proto.ActionReboot, DelaySeconds: 60})
	if proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Fatalf("reboot with [system] off: %v", err)
	}
	if ev := r.Power.Events(); len(ev) != 0 {
		t.Fatalf("power events after a refusal: %v", ev)
	}
	if r.Agent.Procs == nil {
		t.Fatal("no simulated process table")
	}
	snap, err := procs.Read(r.Agent.Procs.FS(), procs.LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(snap.Procs, func(p procs.Proc) bool { return p.Name == "sshd" })
	if i < 0 {
		t.Fatal("no sshd on the board")
	}
	sshd := snap.Procs[i]
	_, err = client.Call(context.Background(), r.Helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: sshd.PID, StartTicks: sshd.StartTicks, Signal: "TERM"})
	if proto.CodeOf(err) != proto.CodePermissionDenied || !strings.Contains(err.Error(), "protected user") {
		t.Fatalf("TERM to the board's root sshd: %v", err)
	}
}

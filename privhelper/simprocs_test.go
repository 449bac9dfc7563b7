package privhelper_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The helper on the simulated board signals only the simulated table: a
// real process, even one at a pid the table does not have, is not found;
// the table's root processes and raspi-mcp itself are refused; an allowed
// signal changes the table and nothing else.
func TestHelperSignalsOnlyTheSimulatedTable(t *testing.T) {
	marker := exec.Command("sleep", "300")
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = marker.Process.Kill(); _ = marker.Wait() })
	sim, err := privhelper.NewSimProcesses(filepath.Join(t.TempDir(), "procs.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol := opsPolicy()
	pol.Config.Process.AllowedSignals = []string{"TERM", "STOP", "CONT"}
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Ops: privhelper.Ops{Processes: privhelper.SimProcessesFrom(sim)}})
	c := newClient(t, h.sock)
	ctx := context.Background()
	snap := func() procs.Snapshot {
		t.Helper()
		s, err := procs.Read(sim.FS(), procs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	find := func(s procs.Snapshot, name string) procs.Proc {
		t.Helper()
		for _, p := range s.Procs {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no %s in the simulated table", name)
		return procs.Proc{}
	}
	before := snap()
	sshd, agent, ffmpeg := find(before, "sshd"), find(before, "raspi-mcp"), find(before, "ffmpeg")
	// The real processes' true identities: what an agent reading the
	// host's /proc would send.
	realID := func(pid int) procs.Identity {
		t.Helper()
		id, err := procs.ReadIdentity(os.DirFS("/"), pid)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	marked, self := realID(marker.Process.Pid), realID(os.Getpid())
	for name, tc := range map[string]struct {
		req  proto.ProcessSignalReq
		code string
	}{
		"a real process":           {proto.ProcessSignalReq{PID: marked.PID, StartTicks: marked.StartTicks, Signal: "TERM"}, proto.CodeNotFound},
		"the helper's real pid":    {proto.ProcessSignalReq{PID: self.PID, StartTicks: self.StartTicks, Signal: "TERM"}, proto.CodeNotFound},
		"protected root (sshd)":    {proto.ProcessSignalReq{PID: sshd.PID, StartTicks: sshd.StartTicks, Signal: "TERM"}, proto.CodePermissionDenied},
		"raspi-mcp on the board":   {proto.ProcessSignalReq{PID: agent.PID, StartTicks: agent.StartTicks, Signal: "TERM"}, proto.CodePermissionDenied},
		"a kernel thread":          {proto.ProcessSignalReq{PID: 2, StartTicks: find(before, "kthreadd").StartTicks, Signal: "TERM"}, proto.CodePermissionDenied},
		"stale start of ffmpeg":    {proto.ProcessSignalReq{PID: ffmpeg.PID, StartTicks: ffmpeg.StartTicks + 1, Signal: "TERM"}, proto.CodeFailedPrecondition},
		"a signal not in the list": {proto.ProcessSignalReq{PID: ffmpeg.PID, StartTicks: ffmpeg.StartTicks, Signal: "HUP"}, proto.CodePermissionDenied},
	} {
		if _, err := procs.ReadIdentity(sim.FS(), tc.req.PID); err != nil && tc.code != proto.CodeNotFound {
			t.Fatalf("%s: pid %d is not in the table", name, tc.req.PID)
		} else if err == nil && tc.code == proto.CodeNotFound {
			continue // this machine's pid happens to be one of the table's
		}
		if _, err := client.Call(ctx, c, proto.ProcessSignal, tc.req); proto.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if n := len(snap().Procs); n != len(before.Procs) {
		t.Fatalf("refusals changed the table: %d processes, was %d", n, len(before.Procs))
	}
	if st := find(snap(), "ffmpeg").State; st != "running" {
		t.Fatalf("after refusals ffmpeg is %s", st)
	}
	if _, err := client.Call(ctx, c, proto.ProcessSignal, proto.ProcessSignalReq{PID: ffmpeg.PID, StartTicks: ffmpeg.StartTicks, Signal: "STOP"}); err != nil {
		t.Fatal(err)
	}
	if st := find(snap(), "ffmpeg").State; st != "stopped" {
		t.Fatalf("after STOP ffmpeg is %s", st)
	}
	resp, err := client.Call(ctx, c, proto.ProcessSignal, proto.ProcessSignalReq{PID: ffmpeg.PID, StartTicks: ffmpeg.StartTicks, Signal: "TERM"})
	if err != nil || resp.Name != "ffmpeg" || resp.UID != 1000 {
		t.Fatalf("TERM ffmpeg: %+v %v", resp, err)
	}
	if _, err := procs.ReadIdentity(sim.FS(), ffmpeg.PID); err == nil {
		t.Fatal("ffmpeg is still in the table after TERM")
	}
	if len(snap().Procs) != len(before.Procs)-1 {
		t.Fatal("TERM removed more than ffmpeg")
	}
	if err := marker.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the real marker process is gone: %v", err)
	}
}

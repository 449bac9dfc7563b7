package agent

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// child starts a process the test owns and reaps.
func child(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd
}

func alive(pid int) bool {
	id, err := procs.ReadIdentity(os.DirFS("/"), pid)
	return err == nil && id.State != "zombie"
}

func TestListProcessesFiltersSortsPages(t *testing.T) {
	r := newRig(t, nil)
	sleeper := child(t, nil, "sleep", "300")
	busy := child(t, nil, "sh", "-c", "while :; do :; done")

	// A whole page: the machine may run many other sleeps.
	sc := listProcs(t, r, map[string]any{"filter": map[string]any{"name_pattern": "sleep"}, "sort_by": "pid", "sort_order": "asc", "limit": 1000})
	var found bool
	for _, m := range sc.Processes {
		if m.PID == sleeper.Process.Pid {
			found = true
			if m.Status != "sleeping" || m.CPUPercent > 5 || m.Username != currentUser(t) {
				t.Errorf("sleep child: %+v", m)
			}
		}
	}
	if !found {
		t.Fatalf("sleep child %d not listed: %v", sleeper.Process.Pid, pids(sc))
	}

	// CPU is measured over a window like top: the busy loop used some of it
	// and sorts ahead of the sleeper. How much it got depends on what else
	// the machine runs, so no floor beyond "more than nothing", and on a
	// saturated machine a window can pass without the loop being scheduled
	// at all (the kernel counts in 10 ms ticks): a few windows, one must
	// show it.
	busyAt, sleepAt, busyCPU := -1, -1, -1.0
	for try := 0; try < 5 && busyCPU <= 0; try++ {
		sc = listProcs(t, r, map[string]any{"sort_by": "cpu_percent", "limit": 1000})
		if sc.SampleInterval < 100 {
			t.Fatalf("sample window %v ms", sc.SampleInterval)
		}
		busyAt, sleepAt, busyCPU = -1, -1, -1.0
		for i, m := range sc.Processes {
			switch m.PID {
			case busy.Process.Pid:
				busyAt, busyCPU = i, m.CPUPercent
			case sleeper.Process.Pid:
				sleepAt = i
			}
		}
	}
	if busyCPU <= 0 || busyAt < 0 || sleepAt < 0 || busyAt > sleepAt {
		t.Errorf("busy loop %d at %d with %v%% CPU, sleeper at %d: %v", busy.Process.Pid, busyAt, busyCPU, sleepAt,
			pluck(sc.Processes, func(p processSummary) string { return p.Name }))
	}

	// Pages: limit and offset walk the same order.
	all := listProcs(t, r, map[string]any{"sort_by": "pid", "sort_order": "asc", "limit": 1000})
	total := all.TotalCount
	p1 := listProcs(t, r, map[string]any{"sort_by": "pid", "sort_order": "asc", "limit": 3})
	p2 := listProcs(t, r, map[string]any{"sort_by": "pid", "sort_order": "asc", "limit": 3, "offset": 3})
	if total < 6 || !p1.HasMore || p1.NextOffset != 3 {
		t.Fatalf("page 1: total %d, %+v", total, p1)
	}
	if got := append(pids(p1), pids(p2)...); !slices.Equal(got, pids(all)[:6]) {
		// Processes come and go between calls; the order must still be ascending.
		if !slices.IsSorted(got) {
			t.Fatalf("pages %v not in pid order", got)
		}
	}
	past := listProcs(t, r, map[string]any{"offset": 100000})
	if past.ReturnedCount != 0 || past.HasMore {
		t.Fatalf("offset past the end: %+v", past)
	}
	// The tool catalog's own filter example: a list of statuses.
	sc = listProcs(t, r, map[string]any{"filter": map[string]any{"status": []any{"running", "sleeping"}}, "limit": 1000})
	if sc.ReturnedCount == 0 {
		t.Fatalf("status filter: %+v", sc)
	}
	for _, p := range sc.Processes {
		if st := p.Status; st != "running" && st != "sleeping" {
			t.Fatalf("status filter let %+v through", p)
		}
	}
	_, e := callAs[processListOut](t, r, admin, "process_list_processes", map[string]any{"filter": map[string]any{"status": []any{"flying"}}})
	wantErr(t, e, CodeInvalidArgument, nil) // bad status
	_, e = callAs[processListOut](t, r, admin, "process_list_processes", map[string]any{"filter": map[string]any{"name_pattern": "[x"}})
	wantErr(t, e, CodeInvalidArgument, nil) // bad glob
}

func TestProcessDetailsRedactsSecrets(t *testing.T) {
	r := newRig(t, nil)
	c := child(t, []string{"MY_API_KEY=s3cret", "DATABASE_URL=postgres://u:pw@db/x", "GREETING=hello"}, "sleep", "300")
	waitFor(t, "child env", 2*time.Second, func() bool { return alive(c.Process.Pid) })
	res := r.call(t, admin, "process_get_process_details", map[string]any{"pid": c.Process.Pid})
	sc, e := decodeResult[processDetail](t, res)
	if e != nil {
		t.Fatal(e)
	}
	env := sc.Environment
	if env["GREETING"] != "hello" || env["MY_API_KEY"] == "s3cret" || env["DATABASE_URL"] == "postgres://u:pw@db/x" {
		t.Fatalf("environment not redacted: %v", env)
	}
	// A typed cpuTimes cannot tell absent from zero (a new sleep has used
	// none), so that cpu_times is there is read from the wire.
	if sc.Name != "sleep" || !strings.Contains(asJSON(t, res.StructuredContent), `"cpu_times":{`) {
		t.Fatalf("details: %+v", sc)
	}
	_, e = callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": 4000000})
	wantErr(t, e, CodeNotFound, nil) // missing pid
}

func TestSendSignal(t *testing.T) {
	// The test's children are the test user's, who may be root: protect
	// nobody here (TestSignalsToProtectedUsers protects the test user).
	r := newRig(t, func(c *config.Config) { c.Process.ProtectedUsers = []string{} })
	target := child(t, nil, "sleep", "300")
	pid := target.Process.Pid
	args := map[string]any{"pid": pid, "signal": "TERM"}

	_, e := callAs[processSignalOut](t, r, operator, "process_send_signal", args)
	wantErr(t, e, CodeFailedPrecondition, nil) // no confirm
	if out, e := callAs[processSignalOut](t, r, operator, "process_send_signal", map[string]any{"pid": pid, "signal": "TERM", "dry_run": true}); e != nil || out.Sent {
		t.Fatalf("dry run: %+v %v", out, e)
	}
	if !alive(pid) {
		t.Fatal("a dry run killed the process")
	}
	guard := func(m map[string]any) map[string]any { m["confirm"], m["reason"] = true, "test"; return m }
	for name, a := range map[string]map[string]any{
		"pid 1":                         {"pid": 1, "signal": "TERM"},
		"the agent":                     {"pid": os.Getpid(), "signal": "TERM"},
		"KILL (not in allowed_signals)": {"pid": pid, "signal": "KILL"},
	} {
		if _, e := callAs[processSignalOut](t, r, admin, "process_send_signal", guard(a)); !isCode(e, CodePermissionDenied) && !(name == "pid 1" && isCode(e, CodeInvalidArgument)) {
			t.Errorf("%s: %v", name, e)
		}
	}
	if !alive(pid) {
		t.Fatal("a refused signal killed the process")
	}

	// The helper refuses on its own when the agent is bypassed.
	id, err := procs.ReadIdentity(os.DirFS("/"), pid)
	if err != nil {
		t.Fatal(err)
	}
	var pe *proto.Error
	_, err = client.Call(context.Background(), r.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: pid, StartTicks: id.StartTicks + 1, Signal: "TERM"})
	if !errorsAs(err, &pe) || pe.Code != proto.CodeFailedPrecondition {
		t.Fatalf("helper with a stale start time: %v", err)
	}
	_, err = client.Call(context.Background(), r.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: pid, StartTicks: id.StartTicks, Signal: "KILL"})
	if !errorsAs(err, &pe) || pe.Code != proto.CodePermissionDenied {
		t.Fatalf("helper with KILL: %v", err)
	}
	if !alive(pid) {
		t.Fatal("a refused helper call killed the process")
	}

	out, e := callAs[processSignalOut](t, r, operator, "process_send_signal", guard(args))
	if e != nil || !out.Sent || out.Name != "sleep" {
		t.Fatalf("TERM: %+v %v", out, e)
	}
	waitFor(t, "the child to exit", 2*time.Second, func() bool { return !alive(pid) })
}

func TestSignalsToProtectedUsersAndWhenOff(t *testing.T) {
	me := ""
	r := newRig(t, func(c *config.Config) {
		me = c.Helper.AgentUser
		c.Process.ProtectedUsers = []string{me}
	})
	target := child(t, nil, "sleep", "300")
	_, e := callAs[processSignalOut](t, r, admin, "process_send_signal", map[string]any{"pid": target.Process.Pid, "signal": "TERM", "confirm": true, "reason": "x"})
	if !isCode(e, CodePermissionDenied) {
		t.Fatalf("protected user %s: %v", me, e)
	}
	id, _ := procs.ReadIdentity(os.DirFS("/"), target.Process.Pid)
	_, err := client.Call(context.Background(), r.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: target.Process.Pid, StartTicks: id.StartTicks, Signal: "TERM"})
	var pe *proto.Error
	if !errorsAs(err, &pe) || pe.Code != proto.CodePermissionDenied {
		t.Fatalf("helper, protected user: %v", err)
	}

	r2 := newRig(t, func(c *config.Config) { c.Process.Signals = false })
	_, e = callAs[processSignalOut](t, r2, admin, "process_send_signal", map[string]any{"pid": target.Process.Pid, "signal": "TERM", "confirm": true, "reason": "x"})
	if !isCode(e, CodePermissionDenied) || !alive(target.Process.Pid) {
		t.Fatalf("signals off: %v", e)
	}
}

// Details of one process read that process alone: its CPU use is right
// both when measured over its own window and against the table a process
// list left behind, and no whole table is read for it.
func TestProcessDetailsReadsOneProcess(t *testing.T) {
	r := newSimRig(t, nil)
	var tables atomic.Int32
	read := r.a.cpu.read
	r.a.cpu.read = func(ctx context.Context) (procs.Snapshot, error) { tables.Add(1); return read(ctx) }
	const ffmpeg = 1342 // the simulated board's busy process: 0.87 of a core
	check := func(when string) {
		sc, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": ffmpeg})
		if e != nil {
			t.Fatalf("%s: %v", when, e)
		}
		// Ticks are whole: over a half-second window 87% reads as 84-90%.
		if cpu := sc.CPUPercent; cpu < 80 || cpu > 94 {
			t.Errorf("%s: cpu_percent %v, want about 87", when, cpu)
		}
	}
	check("without a kept table")
	if n := tables.Load(); n != 0 {
		t.Fatalf("details read %d whole process tables", n)
	}
	listProcs(t, r, map[string]any{"limit": 1})
	n := tables.Load()
	time.Sleep(cpuMinWindow) // the kept table becomes a baseline
	check("against the kept table")
	if m := tables.Load(); m != n {
		t.Fatalf("details read %d whole process tables", m-n)
	}
}

// Package soak holds the load test behind `make soak`: many concurrent MCP
// sessions through `raspi-mcp stdio` against `raspi-mcp serve --sim`, with
// reads, guarded writes and denials mixed, and the helper SIGKILLed halfway.
// It runs only when RASPI_MCP_SOAK=1, so `go test ./...` merely compiles it.
//
// Knobs (environment): SOAK_SESSIONS (default 50), SOAK_DURATION (60s),
// SOAK_SETTLE (60s: how long the agent idles before the leak check),
// SOAK_PROC_EVERY (1s: the pace of process_list_processes across all
// sessions).
package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// kind is one sort of call in the mix, with the outcome it must have.
type kind struct {
	name   string
	tool   string
	args   func(r *rand.Rand) map[string]any
	weight int
	want   string // "" for success, else the error code a model must see
	write  bool   // a real change: its success must leave an audit record
	helper bool   // goes through the helper: unavailable while it restarts
}

func mix() []kind {
	none := func(*rand.Rand) map[string]any { return map[string]any{} }
	value := func(r *rand.Rand) string { return []string{"high", "low"}[r.IntN(2)] }
	return []kind{
		// Reads.
		{name: "health", tool: "system_get_health_snapshot", args: none, weight: 6},
		{name: "basic_info", tool: "system_get_basic_info", args: none, weight: 4},
		{name: "gpio_read", tool: "gpio_read_pin", args: func(*rand.Rand) map[string]any { return map[string]any{"pin": 4} }, weight: 4, helper: true},
		{name: "gpio_list", tool: "gpio_list_pins", args: none, weight: 2, helper: true},
		{name: "metrics", tool: "metrics_get_realtime_metrics", args: none, weight: 4},
		{name: "services", tool: "service_list_services", args: func(*rand.Rand) map[string]any { return map[string]any{"limit": 20} }, weight: 3},
		{name: "service_status", tool: "service_get_status", args: func(*rand.Rand) map[string]any {
			return map[string]any{"service_name": "nginx.service", "log_lines": 5}
		}, weight: 2},
		// Guarded writes the laptop config allows.
		{name: "gpio_write", tool: "gpio_write_pin", args: func(r *rand.Rand) map[string]any {
			return map[string]any{"pin": []int{17, 27}[r.IntN(2)], "value": value(r), "reason": "soak"}
		}, weight: 4, write: true, helper: true},
		{name: "service_restart", tool: "service_control_service", args: func(r *rand.Rand) map[string]any {
			return map[string]any{"service_name": []string{"nginx.service", "motion.service"}[r.IntN(2)], "action": "restart", "confirm": true, "reason": "soak"}
		}, weight: 2, write: true, helper: true},
		// Dry runs.
		{name: "gpio_dry_run", tool: "gpio_write_pin", args: func(r *rand.Rand) map[string]any {
			return map[string]any{"pin": 17, "value": value(r), "dry_run": true}
		}, weight: 2, helper: true},
		{name: "reboot_dry_run", tool: "system_reboot", args: func(*rand.Rand) map[string]any {
			return map[string]any{"delay_seconds": 60, "dry_run": true}
		}, weight: 1, helper: true},
		// Denials.
		{name: "deny_pin", tool: "gpio_write_pin", args: func(r *rand.Rand) map[string]any {
			return map[string]any{"pin": 5, "value": value(r), "reason": "soak"}
		}, weight: 2, want: "permission_denied", helper: true},
		{name: "deny_no_confirm", tool: "service_control_service", args: func(*rand.Rand) map[string]any {
			return map[string]any{"service_name": "nginx.service", "action": "stop", "reason": "soak"}
		}, weight: 2, want: "failed_precondition"},
		{name: "deny_no_token", tool: "system_shutdown", args: func(*rand.Rand) map[string]any {
			return map[string]any{"delay_seconds": 60, "confirm": true, "reason": "soak"}
		}, weight: 1, want: "failed_precondition"},
	}
}

// procKind is paced across all sessions rather than drawn from the mix:
// each call holds a CPU window of its own.
var procKind = kind{name: "process_list", tool: "process_list_processes", args: func(*rand.Rand) map[string]any {
	return map[string]any{"limit": 5, "sort_by": "cpu_percent"}
}}

// result is one finished call.
type result struct {
	kind       string
	start, end time.Time
	code       string // "" ok, an error code, or "transport: ..."
	ref, corr  string // audit ref and correlation id of a successful write
	tool       string
	write      bool
	helper     bool
	want       string
}

func TestSoak(t *testing.T) {
	if os.Getenv("RASPI_MCP_SOAK") == "" {
		t.Skip("the soak runs with RASPI_MCP_SOAK=1 (make soak)")
	}
	sessions := envInt(t, "SOAK_SESSIONS", 50)
	duration := envDur(t, "SOAK_DURATION", 60*time.Second)
	settle := envDur(t, "SOAK_SETTLE", 60*time.Second)
	procEvery := envDur(t, "SOAK_PROC_EVERY", time.Second)

	bin := build(t)
	raspi := filepath.Join(bin, "raspi-mcp")
	dir, err := os.MkdirTemp("", "raspi-mcp-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	agent := startAgent(t, raspi, dir)
	agentPID, helperPID := statusPIDs(t, raspi, dir)

	// Warm up with one session so lazy set-up is not counted as growth.
	warm := connect(t, raspi, dir)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range append(mix(), procKind) {
		_ = callOnce(context.Background(), warm, k, rng, "warm")
	}
	warm.Close()
	before := measure(t, agentPID)

	// Open every session first, each its own `raspi-mcp stdio`.
	css := make([]*mcp.ClientSession, sessions)
	var wg sync.WaitGroup
	var connectErr atomic.Value
	for i := range css {
		wg.Go(func() {
			cs, err := dial(raspi, dir)
			if err != nil {
				connectErr.Store(err)
				return
			}
			css[i] = cs
		})
	}
	wg.Wait()
	if err, _ := connectErr.Load().(error); err != nil {
		t.Fatalf("opening %d sessions: %v\n%s", sessions, err, agent.log())
	}

	kinds := mix()
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	var (
		mu      sync.Mutex
		results []result
	)
	start := time.Now()
	deadline := start.Add(duration)
	procTick := time.NewTicker(procEvery)
	defer procTick.Stop()
	for i, cs := range css {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var mine []result
			for n := 0; time.Now().Before(deadline); n++ {
				k := pick(kinds, total, r)
				select {
				case <-procTick.C: // this session's turn to list processes
					k = procKind
				default:
				}
				mine = append(mine, callOnce(context.Background(), cs, k, r, fmt.Sprintf("soak-%d-%d", i, n)))
			}
			mu.Lock()
			results = append(results, mine...)
			mu.Unlock()
		})
	}

	// Halfway, SIGKILL the helper (the sim supervisor restarts it) and
	// time the window in which helper calls may answer unavailable.
	time.Sleep(duration / 2)
	if ppid := parentOf(helperPID); ppid != agentPID {
		t.Fatalf("helper pid %d has parent %d, not our agent %d: not killing it", helperPID, ppid, agentPID)
	}
	killAt := time.Now()
	if err := syscall.Kill(helperPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	backAt := waitHelperBack(t, raspi, dir, helperPID)
	t.Logf("helper %d killed at +%.1fs, replaced after %.1fs", helperPID, killAt.Sub(start).Seconds(), backAt.Sub(killAt).Seconds())

	wg.Wait()
	elapsed := time.Since(start)
	for _, cs := range css {
		cs.Close()
	}
	after := measure(t, agentPID)
	t.Logf("idling %s before the leak check", settle)
	time.Sleep(settle)
	later := measure(t, agentPID)

	// The verdicts. The restart window closes when the first write begun
	// after the kill succeeds (writes always go through the helper): from
	// then on the agent has redialled, and a call begun later has no excuse
	// to answer unavailable.
	recovered := time.Time{}
	for _, r := range results {
		if r.write && r.code == r.want && r.start.After(killAt) && (recovered.IsZero() || r.end.Before(recovered)) {
			recovered = r.end
		}
	}
	if recovered.IsZero() {
		t.Errorf("no write succeeded after the helper was killed")
		recovered = time.Now()
	}
	var unexpected []string
	byCode := map[string]int{}
	var lats []time.Duration
	perKind := map[string][]time.Duration{}
	var acked []result
	for _, r := range results {
		d := r.end.Sub(r.start)
		lats = append(lats, d)
		perKind[r.kind] = append(perKind[r.kind], d)
		c := r.code
		if c == "" {
			c = "ok"
		}
		byCode[c]++
		inWindow := r.end.After(killAt) && r.start.Before(recovered)
		switch {
		case r.code == r.want:
			if r.write {
				acked = append(acked, r)
			}
		case r.code == "unavailable" && r.helper && inWindow:
		default:
			unexpected = append(unexpected, fmt.Sprintf("%s at +%.1fs: got %q, want %q", r.kind, r.start.Sub(start).Seconds(), r.code, r.want))
		}
	}
	if len(results) == 0 {
		t.Fatal("no call finished")
	}
	fmt.Printf("\nsoak: %d sessions, %s, %d calls, %.1f calls/s, latency p50 %s p99 %s max %s\n",
		sessions, elapsed.Round(time.Second), len(results), float64(len(results))/elapsed.Seconds(),
		pct(lats, 50), pct(lats, 99), pct(lats, 100))
	fmt.Printf("%-16s %7s %10s %10s\n", "kind", "calls", "p50", "p99")
	for _, k := range slices.Sorted(maps.Keys(perKind)) {
		fmt.Printf("%-16s %7d %10s %10s\n", k, len(perKind[k]), pct(perKind[k], 50), pct(perKind[k], 99))
	}
	fmt.Printf("outcomes:")
	for _, c := range slices.Sorted(maps.Keys(byCode)) {
		fmt.Printf(" %s=%d", c, byCode[c])
	}
	fmt.Printf("\nhelper killed at +%.1fs, back after %.1fs, first write served %.1fs after the kill\n",
		killAt.Sub(start).Seconds(), backAt.Sub(killAt).Seconds(), recovered.Sub(killAt).Seconds())
	fmt.Printf("agent %-8s rss %7.1f MiB  fds %4d  threads %4d\n", "before", before.rssMiB(), before.fds, before.threads)
	fmt.Printf("agent %-8s rss %7.1f MiB  fds %4d  threads %4d\n", "after", after.rssMiB(), after.fds, after.threads)
	fmt.Printf("agent %-8s rss %7.1f MiB  fds %4d  threads %4d  (after %s idle)\n", "later", later.rssMiB(), later.fds, later.threads, settle)

	if len(unexpected) > 0 {
		t.Errorf("%d unexpected outcomes, first ones:\n  %s", len(unexpected), strings.Join(unexpected[:min(20, len(unexpected))], "\n  "))
	}
	// Leaks: the sessions are gone, so their sockets must be too. Threads
	// do not shrink in Go once made, but they are bounded by concurrency,
	// never by the number of calls. Memory is not returned at once either:
	// the bound only catches growth without limit.
	if later.fds > before.fds+8 {
		t.Errorf("fd leak: %d open before, %d after %s idle", before.fds, later.fds, settle)
	}
	if later.threads > before.threads+sessions || later.threads > after.threads+4 {
		t.Errorf("thread leak: %d before, %d after, %d after %s idle", before.threads, after.threads, later.threads, settle)
	}
	if later.rssKB > max(3*before.rssKB, before.rssKB+256<<10) {
		t.Errorf("memory: rss %d KiB before, %d KiB after %s idle", before.rssKB, later.rssKB, settle)
	}

	// Lost writes: stop the agent so its state file can be read, then find
	// the audit record of every write the agent acknowledged.
	agent.stop(t)
	checkAudit(t, raspi, dir, acked)
}

// checkAudit requires one allow record per acknowledged write, with the
// write's correlation id and tool, and an intact chain.
func checkAudit(t *testing.T, raspi, dir string, acked []result) {
	db, err := store.Open(filepath.Join(dir, "state.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost := 0
	for _, w := range acked {
		seq, err := store.ParseAuditRef(w.ref)
		if err != nil {
			t.Errorf("write %s answered with audit ref %q: %v", w.corr, w.ref, err)
			lost++
			continue
		}
		rec, err := db.GetAudit(seq)
		if err != nil || rec.CorrelationID != w.corr || rec.Decision != store.DecisionAllow || rec.ErrorCode != "" {
			t.Errorf("write %s (%s): audit record %s is %+v, %v", w.corr, w.tool, w.ref, rec, err)
			lost++
		}
	}
	total, denied, errored, _, err := db.AuditCounts()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("audit: %d records (%d denied, %d errors); %d acknowledged writes, %d without their record\n", total, denied, errored, len(acked), lost)
	out, err := exec.Command(raspi, "audit", "verify", "--dir", dir).CombinedOutput()
	fmt.Printf("audit verify: %s", out)
	if err != nil {
		t.Errorf("audit verify: %v", err)
	}
}

// callOnce makes one call and classifies it.
func callOnce(ctx context.Context, cs *mcp.ClientSession, k kind, r *rand.Rand, corr string) result {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a hang guard only
	defer cancel()
	res := result{kind: k.name, tool: k.tool, write: k.write, helper: k.helper, want: k.want, corr: corr, start: time.Now()}
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: k.tool, Arguments: k.args(r), Meta: mcp.Meta{"correlation_id": corr}})
	res.end = time.Now()
	switch {
	case err != nil:
		res.code = "transport: " + err.Error()
	case out.IsError:
		b, _ := json.Marshal(out.Meta["error"])
		var e struct{ Code string }
		_ = json.Unmarshal(b, &e)
		res.code = e.Code
		if res.code == "" {
			res.code = "unstructured error"
		}
	default:
		res.ref, _ = out.Meta["audit_ref"].(string)
	}
	return res
}

func pick(kinds []kind, total int, r *rand.Rand) kind {
	n := r.IntN(total)
	for _, k := range kinds {
		if n < k.weight {
			return k
		}
		n -= k.weight
	}
	return kinds[len(kinds)-1]
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p)/100)
	return s[i].Round(time.Millisecond)
}

// usage is what /proc says about a process.
type usage struct {
	rssKB   int
	threads int
	fds     int
}

func (u usage) rssMiB() float64 { return float64(u.rssKB) / 1024 }

func measure(t *testing.T, pid int) usage {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("agent gone? %v", err)
	}
	var u usage
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			u.rssKB, _ = strconv.Atoi(f[1])
		case "Threads:":
			u.threads, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	u.fds = len(ents)
	return u
}

// parentOf is the ppid of pid, from /proc/PID/stat (after the comm, which
// may hold spaces, in parentheses).
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return -1
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func waitHelperBack(t *testing.T, raspi, dir string, old int) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command(raspi, "status", "--dir", dir).Run() == nil {
			if _, h := statusPIDs(t, raspi, dir); h != 0 && h != old {
				return time.Now()
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the helper did not come back within 60 s")
	return time.Time{}
}

// build compiles both binaries into a fresh directory.
func build(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../../cmd/raspi-mcp", "../../cmd/raspi-mcp-simhelper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return dir
}

type agentProc struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

func (a *agentProc) log() string { return a.out.String() }

func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("agent did not stop cleanly: %v\n%s", err, a.log())
	}
}

// startAgent starts the soak's agent. Its critical calls are approved by
// the client's channel, as an owner who lowered [guard] critical has it:
// the soak measures the refusal of a shutdown without a token under load,
// which on the default config would wait for the owner at the Pi instead.
func startAgent(t *testing.T, raspi, dir string) *agentProc {
	t.Helper()
	base := filepath.Join(t.TempDir(), "base.toml")
	if err := os.WriteFile(base, []byte("[guard]\ncritical = \"client\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return startAgentArgs(t, raspi, dir, "--config", base)
}

// startAgentArgs starts `raspi-mcp serve --sim --dir dir` with more
// arguments and waits until it answers `status`.
func startAgentArgs(t *testing.T, raspi, dir string, args ...string) *agentProc {
	t.Helper()
	a := &agentProc{out: &lockedBuffer{}}
	a.cmd = exec.Command(raspi, append([]string{"serve", "--sim", "--dir", dir}, args...)...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a.cmd.ProcessState == nil {
			_ = a.cmd.Process.Signal(syscall.SIGTERM)
			_ = a.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", tail(a.log(), 4000))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for exec.Command(raspi, "status", "--dir", dir).Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("agent not ready after 60 s:\n%s", a.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return a
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func statusPIDs(t *testing.T, raspi, dir string) (agent, helper int) {
	t.Helper()
	out, _ := exec.Command(raspi, "status", "--dir", dir, "--json").Output()
	var st struct {
		Status struct {
			PID    int `json:"pid"`
			Helper struct {
				PID int `json:"pid"`
			} `json:"helper"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Status.PID == 0 {
		t.Fatalf("status --json: %v %s", err, out)
	}
	return st.Status.PID, st.Status.Helper.PID
}

func dial(raspi, dir string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(raspi, "stdio", "--dir", dir)}, nil)
}

func connect(t *testing.T, raspi, dir string) *mcp.ClientSession {
	t.Helper()
	cs, err := dial(raspi, dir)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

func envDur(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		t.Fatalf("%s=%q: want a duration such as 30s", name, s)
	}
	return d
}

// lockedBuffer collects the agent's output from its two pipes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

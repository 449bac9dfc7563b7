// Package e2e drives the real binaries: `raspi-mcp serve --sim` with its
// helper child, reached through `raspi-mcp stdio` by the Go SDK client and by
// the MCP Inspector CLI, a client nobody here wrote.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/e2e/mcpcall"
	bolt "go.etcd.io/bbolt"
)

// bin holds the freshly built binaries, world-readable so a test can run
// the client side as another uid.
var bin string

// hangGuard bounds waits for what must happen (the agent ready, a lease
// reverted, a restart). It only keeps a broken build from hanging: on a busy
// shared machine these take seconds, so no verdict may depend on speed.
const hangGuard = time.Minute

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "raspi-mcp-e2e-bin-")
	if err != nil {
		panic(err)
	}
	_ = os.Chmod(dir, 0o755)
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/raspi-mcp", "../cmd/raspi-mcp-helper", "../cmd/raspi-mcp-simhelper", "../cmd/raspi-mcp-stdio", "../cmd/raspi-mcp-exporter")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func raspi() string { return filepath.Join(bin, "raspi-mcp") }

// sim is one laptop-mode agent.
type sim struct {
	dir string
	cmd *exec.Cmd
	log *syncBuffer
}

// syncBuffer is the agent's output: exec's copier writes it while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startSim runs `raspi-mcp serve --sim --dir DIR` in a fresh directory and
// waits until `raspi-mcp status --dir DIR` exits 0, the documented readiness check.
func startSim(t testing.TB) *sim {
	t.Helper()
	dir, err := os.MkdirTemp("", "raspi-mcp-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startSimIn(t, dir)
}

// startSimIn is startSim in an existing directory, with extra serve flags.
func startSimIn(t testing.TB, dir string, args ...string) *sim {
	t.Helper()
	s := &sim{dir: dir, log: &syncBuffer{}}
	s.cmd = exec.Command(raspi(), append([]string{"serve", "--sim", "--dir", dir}, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", s.log)
		}
	})
	deadline := time.Now().Add(hangGuard)
	for exec.Command(raspi(), "status", "--dir", dir).Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready after %v:\n%s", hangGuard, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// stop sends SIGTERM and requires a clean exit.
func (s *sim) stop(t testing.TB) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("agent did not stop cleanly: %v\n%s", err, s.log)
	}
}

// session connects the Go SDK client through `raspi-mcp stdio --dir DIR`.
func (s *sim) session(t testing.TB) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(raspi(), "stdio", "--dir", s.dir)}, nil)
	if err != nil {
		t.Fatalf("connect through stdio: %v\n%s", err, s.log)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (s *sim) cli(t testing.TB, args ...string) (string, int) {
	t.Helper()
	// --dir goes after the command words ("audit verify") and before any flag.
	i := len(args)
	for j, a := range args {
		if strings.HasPrefix(a, "-") {
			i = j
			break
		}
	}
	full := append(append(append([]string{}, args[:i]...), "--dir", s.dir), args[i:]...)
	cmd := exec.Command(raspi(), full...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// call returns the result object, or the error object for an error result.
func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	return mcpcall.Call(t, cs, name, args)
}

func code(m map[string]any) string { return mcpcall.Code(m) }

func auditTotal(t testing.TB, cs *mcp.ClientSession) int {
	t.Helper()
	_, m := call(t, cs, "logs_get_recent_audit_logs", map[string]any{"limit": 1})
	return int(m["total_count"].(float64))
}

var wireName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

// A tour of the contract: tools listed with portable names, health, capabilities,
// then a denied call, a dry run and an executed reboot each leave exactly one
// audit record, and the chain verifies.
func TestTourThroughStdio(t *testing.T) {
	s := startSim(t)
	cs := s.session(t)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) < 11 {
		t.Fatalf("only %d tools", len(tools.Tools))
	}
	for _, tl := range tools.Tools {
		if !wireName.MatchString(tl.Name) {
			t.Errorf("tool name %q breaks %s", tl.Name, wireName)
		}
		// Served as raspi://agent/schemas/{tool}, not listed (issue 31).
		if tl.OutputSchema != nil {
			t.Errorf("%s lists an outputSchema", tl.Name)
		}
	}
	if res, m := call(t, cs, "system_get_health_snapshot", nil); res.IsError || m["memory_total_bytes"].(float64) <= 0 {
		t.Fatalf("health: %v", m)
	}
	if _, m := call(t, cs, "system_get_capabilities", nil); m["mode"] != "sim" || m["helper"].(map[string]any)["reachable"] != true {
		t.Fatalf("capabilities: %v", m)
	}

	n := auditTotal(t, cs)
	steps := []struct {
		args      map[string]any
		wantCode  string
		wantDry   bool
		scheduled bool
	}{
		{map[string]any{"delay_seconds": 300}, "failed_precondition", false, false},               // denied: no confirm
		{map[string]any{"dry_run": true, "delay_seconds": 300}, "", true, false},                  // dry run
		{map[string]any{"confirm": true, "reason": "e2e", "delay_seconds": 300}, "", false, true}, // executed
	}
	for i, st := range steps {
		res, m := call(t, cs, "system_reboot", st.args)
		if code(m) != st.wantCode || (st.wantCode == "" && (m["scheduled"] != st.scheduled || (m["dry_run"] == true) != st.wantDry)) {
			t.Fatalf("step %d: %v", i, m)
		}
		if res.Meta["audit_ref"] == nil {
			t.Fatalf("step %d: no audit_ref in %v", i, res.Meta)
		}
		if got := auditTotal(t, cs); got != n+i+1 {
			t.Fatalf("step %d: %d audit records, want %d", i, got, n+i+1)
		}
	}
	power, _ := os.ReadFile(filepath.Join(s.dir, "power.log"))
	if strings.Count(string(power), `"event":"scheduled"`) != 1 || !strings.Contains(string(power), `"action":"reboot"`) {
		t.Fatalf("sim power log: %s", power)
	}
	// Hardware on the sim board, through the same path.
	if res, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "duration_ms": 200}); res.IsError || m["revert_to"] != "low" {
		t.Fatalf("gpio lease: %v", m)
	}
	if res, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}); code(m) != "permission_denied" {
		t.Fatalf("pin outside the allowlist: %v %v", res.IsError, m)
	}
	if res, m := call(t, cs, "sensors_read", map[string]any{"name": "greenhouse"}); res.IsError || m["humidity_percent"] == nil {
		t.Fatalf("sensor: %v", m)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		if _, m := call(t, cs, "gpio_read_pin", map[string]any{"pin": 17}); m["value"] == "low" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease did not revert")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, rc := s.cli(t, "audit", "verify")
	if rc != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify: %d %s", rc, out)
	}
	out, rc = s.cli(t, "audit", "tail", "-n", "20", "--json")
	var tail []struct{ Tool, Decision string }
	if err := json.Unmarshal([]byte(out), &tail); rc != 0 || err != nil {
		t.Fatalf("audit tail: %d %v %s", rc, err, out)
	}
	var reboots []string
	for _, e := range tail { // newest first
		if e.Tool == "system.reboot" {
			reboots = append(reboots, e.Decision)
		}
	}
	if strings.Join(reboots, ",") != "allow,allow,deny" {
		t.Fatalf("reboot records %v in %s", reboots, out)
	}
}

// Altering one record in the bbolt file is caught by `audit verify`.
func TestAuditVerifyCatchesAnEditedRecord(t *testing.T) {
	s := startSim(t)
	cs := s.session(t)
	call(t, cs, "system_reboot", map[string]any{"dry_run": true})
	call(t, cs, "system_reboot", map[string]any{"confirm": true, "reason": "before", "delay_seconds": 600})
	call(t, cs, "system_reboot", map[string]any{})
	cs.Close()
	s.stop(t)
	if out, rc := s.cli(t, "audit", "verify"); rc != 0 {
		t.Fatalf("verify before tampering: %d %s", rc, out)
	}
	db, err := bolt.Open(filepath.Join(s.dir, "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		var key, val []byte
		_ = b.ForEach(func(k, v []byte) error {
			if bytes.Contains(v, []byte(`"reason":"before"`)) {
				key, val = bytes.Clone(k), bytes.Clone(v)
			}
			return nil
		})
		if key == nil {
			return fmt.Errorf("record not found")
		}
		return b.Put(key, bytes.Replace(val, []byte(`"reason":"before"`), []byte(`"reason":"edited"`), 1))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, rc := s.cli(t, "audit", "verify")
	if rc != 1 || !strings.Contains(out, "BROKEN") || !strings.Contains(out, "hash_mismatch") {
		t.Fatalf("verify after tampering: %d %s", rc, out)
	}
}

// Killing the helper makes privileged tools answer unavailable at once; the
// supervisor restarts it and the same agent serves them again.
func TestHelperKilledAndRestarted(t *testing.T) {
	s := startSim(t)
	cs := s.session(t)
	agentPID, _ := statusPIDs(t, s.dir)
	args := map[string]any{"confirm": true, "reason": "e2e", "delay_seconds": 600}
	if res, m := call(t, cs, "system_reboot", args); res.IsError {
		t.Fatalf("before: %v", m)
	}
	// The supervisor restarts the helper 2 s after it dies. A machine busy
	// enough to take longer than that between the kill and the checks has
	// only missed the window (a new helper answers): kill that one too.
	for attempt := 1; ; attempt++ {
		_, helperPID := statusPIDs(t, s.dir)
		if helperPID <= 0 {
			t.Fatalf("status names no helper pid (%d)", helperPID)
		}
		if err := syscall.Kill(helperPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_, m := call(t, cs, "system_reboot", args)
		_, rc := s.cli(t, "status")
		if code(m) == "unavailable" && rc == 2 {
			// At once: the socket says the helper is gone (reset,
			// refused); nobody waits out the helper client's timeout.
			e := m["error"].(map[string]any)
			if msg := fmt.Sprint(e["message"]); e["retryable"] != true || strings.Contains(msg, "timeout") {
				t.Fatalf("helper down: %v", m)
			}
			break
		}
		if _, now := statusPIDs(t, s.dir); now <= 0 || now == helperPID || attempt == 5 {
			t.Fatalf("helper %d killed: call %v, status exit %d (want unavailable and 2)", helperPID, m, rc)
		}
		t.Logf("the helper was back before the checks (attempt %d); again", attempt)
	}
	deadline := time.Now().Add(hangGuard)
	for {
		res, m := call(t, cs, "system_reboot", args)
		if !res.IsError {
			break
		}
		if time.Now().After(deadline) || code(m) != "unavailable" {
			t.Fatalf("never recovered: %v", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if now, _ := statusPIDs(t, s.dir); now != agentPID {
		t.Fatalf("agent restarted: pid %d -> %d", agentPID, now)
	}
}

// statusPIDs reads the agent's and helper's pids from `raspi-mcp status --json`.
func statusPIDs(t testing.TB, dir string) (agent, helper int) {
	t.Helper()
	out, _ := exec.Command(raspi(), "status", "--dir", dir, "--json").Output()
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

// A user the config does not map is refused with a reason, and the refusal is audited.
func TestUnmappedUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the client as another uid (CI runs as root)")
	}
	s := startSim(t)
	_ = os.Chmod(s.dir, 0o755)
	_ = os.Chmod(filepath.Join(s.dir, "mcp.sock"), 0o666)
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n"
	cmd := exec.Command(raspi(), "stdio", "--socket", filepath.Join(s.dir, "mcp.sock"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stdin = strings.NewReader(init)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if !strings.Contains(stdout.String(), `"error_code":"permission_denied"`) || !strings.Contains(stdout.String(), `"id":1`) {
		t.Fatalf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
	out, _ := s.cli(t, "audit", "tail", "-n", "5")
	if !strings.Contains(out, "connect") || !strings.Contains(out, "deny") {
		t.Fatalf("refusal not audited:\n%s", out)
	}
}

func TestStdioWhenAgentIsDown(t *testing.T) {
	cmd := exec.Command(raspi(), "stdio", "--dir", t.TempDir())
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), "not running") {
		t.Fatalf("err %v stdout %q stderr %q", err, stdout.String(), stderr.String())
	}
}

// Nothing but protocol bytes on stdout, and stdio exits once stdin closes
// after the last response.
func TestStdioIsProtocolOnly(t *testing.T) {
	s := startSim(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"system_get_health_snapshot","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
	}, "\n") + "\n"
	cmd := exec.Command(raspi(), "stdio", "--dir", s.dir)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- cmd.Run() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
	case <-time.After(hangGuard):
		_ = cmd.Process.Kill()
		t.Fatal("stdio did not exit after stdin closed")
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 responses (ids 1..3, none lost at EOF), got %d:\n%s", len(lines), stdout.String())
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Fatalf("non-JSON on stdout: %q", l)
		}
	}
}

// Under systemd (Type=notify) the agent says READY=1 once it serves, and the
// laptop-mode helper child does not speak for it.
func TestSystemdReadiness(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	cmd := exec.Command(raspi(), "serve", "--sim", "--dir", dir)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var got []string
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(hangGuard))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no READY: %v", err)
	}
	got = append(got, string(buf[:n]))
	if !strings.HasPrefix(got[0], "READY=1") || !strings.Contains(got[0], "mcp.sock") {
		t.Fatalf("first notification %q", got[0])
	}
	if exec.Command(raspi(), "status", "--dir", dir).Run() != nil {
		t.Fatal("READY sent before status succeeds")
	}
	// status succeeding means the helper child is up too, past the point
	// where it would have notified: anything it sent is already queued.
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("a second process notified: %q", buf[:n])
	}
}

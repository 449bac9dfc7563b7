package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var httpURL = regexp.MustCompile(`MCP over HTTP: (https?://\S+/mcp)`)

// waitURL reads the endpoint's URL from what `serve --sim` printed.
func waitURL(t *testing.T, s *sim) string {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if m := httpURL.FindStringSubmatch(s.log.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTP URL printed:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postStatus is the status of an MCP ping posted without a token.
func postStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// secretRE finds the secret `raspi-mcp token create` shows once.
var secretRE = regexp.MustCompile(`(?m)^(rmcp_\S+)$`)

// token creates a token with the CLI, as an owner does, and returns its secret.
func token(t *testing.T, s *sim, name, role string) string {
	t.Helper()
	out, err := exec.Command(raspi(), "token", "create", name, "--role", role, "--config", filepath.Join(s.dir, "config.toml")).CombinedOutput()
	m := secretRE.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("token create %s: %v\n%s", name, err, out)
	}
	return m[1]
}

type bearerRT struct{ secret string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return http.DefaultTransport.RoundTrip(r)
}

func httpSession(t *testing.T, url, secret, version string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerRT{secret}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// `serve --sim --http 127.0.0.1:0` serves /mcp, prints and reports the
// bound URL; tokens made with `raspi-mcp token` reach the tools in both
// protocol eras, each call audited as token:NAME with the remote address;
// no token or a revoked one is refused.
func TestServeSimHTTP(t *testing.T) {
	dir := t.TempDir()
	s := startSimIn(t, dir, "--http", "127.0.0.1:0")
	url := waitURL(t, s)
	if code, challenge := postStatus(t, url); code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer") {
		t.Fatalf("no token: %d %q", code, challenge)
	}
	op, reader := token(t, s, "ha", "operate"), token(t, s, "grafana", "read")
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		cs, err := httpSession(t, url, op, version)
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if _, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "dry_run": true}); m["dry_run"] != true {
			t.Fatalf("%s: dry run: %v", version, m)
		}
		rs, err := httpSession(t, url, reader, version)
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if _, m := call(t, rs, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"}); code(m) != "permission_denied" {
			t.Fatalf("%s: a read token's write: %v", version, m)
		}
	}
	out, _ := s.cli(t, "audit", "tail", "-n", "4", "--json")
	if strings.Count(out, `"principal": "token:ha"`) != 2 || strings.Count(out, `"principal": "token:grafana"`) != 2 || strings.Count(out, `"remote": "127.0.0.1:`) != 4 {
		t.Fatalf("audit tail:\n%s", out)
	}
	if out, err := exec.Command(raspi(), "token", "revoke", "grafana", "--config", filepath.Join(s.dir, "config.toml")).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	if _, err := httpSession(t, url, reader, "2026-07-28"); err == nil {
		t.Fatal("a revoked token connected")
	}
	// /metrics: a loopback scrape needs no token.
	resp, err := http.Get(strings.TrimSuffix(url, "/mcp") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# TYPE") {
		t.Fatalf("/metrics from loopback: %d\n%.300s", resp.StatusCode, body)
	}
	out, code := s.cli(t, "status", "--json")
	var st struct {
		Status struct {
			HTTP struct {
				URL string `json:"url"`
			} `json:"http"`
		} `json:"status"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Status.HTTP.URL != url {
		t.Fatalf("status --json (exit %d) has http.url %q, want %q:\n%s", code, st.Status.HTTP.URL, url, out)
	}
	s.stop(t)
}

// Handed a socket named http by systemd (LISTEN_FDS), the agent serves on
// it without binding anything itself.
func TestServeHTTPSocketActivation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // f keeps the socket open
	dir := t.TempDir()
	s := &sim{dir: dir, log: &syncBuffer{}}
	// systemd sets LISTEN_PID to the service's pid: the shell's, kept by exec.
	s.cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=http exec "$0" serve --sim --dir "$1"`, raspi(), dir)
	s.cmd.ExtraFiles = []*os.File{f}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", s.log)
		}
	})
	url := waitURL(t, s)
	if want := "http://" + ln.Addr().String() + "/mcp"; url != want {
		t.Fatalf("serves %s, want the handed socket %s", url, want)
	}
	if code, _ := postStatus(t, url); code != http.StatusUnauthorized {
		t.Fatalf("no token on the handed socket: %d", code)
	}
	s.stop(t)
}

// runInspectorHTTP runs `mcp-inspector --cli URL --header "Authorization: ..." ARGS...`.
func runInspectorHTTP(t *testing.T, url, secret string, args ...string) ([]byte, int) {
	t.Helper()
	return inspectorRun(t, []string{url, "--transport", "http", "--header", "Authorization: Bearer " + secret}, args...)
}

// The MCP Inspector, a client nobody here wrote, over HTTP with a token:
// the list with portable schemas, a call and a dry run in both eras, a
// read token's write refused; a wrong token does not connect.
func TestInspectorCLIOverHTTP(t *testing.T) {
	inspector(t)
	s := startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0")
	url := waitURL(t, s)
	op, reader := token(t, s, "inspector", "operate"), token(t, s, "viewer", "read")
	if out, rc := runInspectorHTTP(t, url, op, "--method", "tools/list", "--strict", "--format", "json", "-q"); rc != 0 || !strings.Contains(string(out), `"gpio_write_pin"`) {
		t.Fatalf("tools/list: rc %d %s", rc, out)
	}
	for _, era := range []string{"modern", "legacy"} {
		out, rc := runInspectorHTTP(t, url, op, "--protocol-era", era, "--method", "tools/call", "--tool-name", "gpio_write_pin",
			"--tool-args-json", `{"pin":17,"value":"high","dry_run":true}`, "--format", "json", "-q")
		if rc != 0 || !strings.Contains(string(out), `"dry_run":true`) {
			t.Fatalf("%s era dry run: rc %d %s", era, rc, out)
		}
		// A read token is not listed the write tools (lists are shaped by
		// policy), and the Inspector does not call a tool it was not
		// listed; the agent's own refusal of a client that calls it
		// anyway is below.
		out, rc = runInspectorHTTP(t, url, reader, "--protocol-era", era, "--method", "tools/list", "--format", "json", "-q")
		if rc != 0 || strings.Contains(string(out), `"gpio_write_pin"`) || !strings.Contains(string(out), `"gpio_read_pin"`) {
			t.Fatalf("%s era read token's list: rc %d %s", era, rc, out)
		}
		if _, rc = runInspectorHTTP(t, url, reader, "--protocol-era", era, "--method", "tools/call", "--tool-name", "gpio_write_pin",
			"--tool-args-json", `{"pin":17,"value":"high"}`, "--format", "json", "-q"); rc == 0 {
			t.Fatalf("%s era read token's write: rc 0, want a refusal", era)
		}
	}
	// The Go SDK's client calls what it is told to: the agent refuses the
	// read token's write itself, naming the role it needs.
	cs, err := httpSession(t, url, reader, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "gpio_write_pin", Arguments: map[string]any{"pin": 17, "value": "high"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "permission_denied") || !strings.Contains(textOf(res), "operate") {
		t.Fatalf("read token's write through the Go SDK: %v %v", err, res)
	}
	cs.Close()
	if _, rc := runInspectorHTTP(t, url, "rmcp_wrong", "--method", "tools/list", "--format", "json", "-q"); rc == 0 {
		t.Fatal("a wrong token listed the tools")
	}
}

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// With no agent, `raspi-mcp stdio` still completes the handshake and says
// why in every answer: the Inspector (a client nobody here wrote) shows the
// reason and the fix in both protocol eras (instructions, the one tool's
// description, its call), where a real client would show "connection closed".
func TestStdioFallbackInspector(t *testing.T) {
	node, cli := inspector(t)
	dir := t.TempDir()
	for _, era := range []string{"modern", "legacy"} {
		run := func(args ...string) (string, int) {
			full := append([]string{cli, "--cli", raspi(), "stdio", "--dir", dir, "--protocol-era", era}, args...)
			cmd := exec.Command(node, full...)
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "HOME="+t.TempDir())
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				return out.String(), ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			return out.String(), 0
		}
		// One tool, named and described so that a model reads why.
		out, rc := run("--method", "tools/list", "--strict", "--format", "json", "-q")
		if rc != 0 || !strings.Contains(out, `"raspi_mcp_unavailable"`) || !strings.Contains(out, "raspi-mcp serve --sim --dir "+dir) {
			t.Fatalf("%s tools/list: rc %d %s", era, rc, out)
		}
		out, _ = run("--method", "tools/call", "--tool-name", "raspi_mcp_unavailable", "--format", "json", "-q")
		if !strings.Contains(strings.ReplaceAll(out, " ", ""), `"isError":true`) || !strings.Contains(out, `"code":"unavailable"`) {
			t.Fatalf("%s tools/call: %s", era, out)
		}
		out, rc = run("--method", "initialize", "--format", "json", "-q")
		if rc != 0 || !strings.Contains(out, "the agent is not running") || !strings.Contains(out, "raspi-mcp serve --sim --dir "+dir) {
			t.Fatalf("%s initialize: rc %d, want the reason and fix:\n%s", era, rc, out)
		}
	}
}

// The handshake by hand: instructions carry the reason, a call the fix, and
// stdio exits 1 once stdin closes.
func TestStdioFallbackRaw(t *testing.T) {
	dir := t.TempDir()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"system_get_health_snapshot","arguments":{}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(raspi(), "stdio", "--dir", dir)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"instructions":"raspi-mcp is unavailable`) || !strings.Contains(lines[1], `"code":"unavailable"`) {
		t.Fatalf("answers:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "not running") {
		t.Errorf("stderr %q", stderr.String())
	}
}

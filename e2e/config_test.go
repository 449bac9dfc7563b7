package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// configGeneration is the agent's config generation from manage_get_server_status.
func configGeneration(t testing.TB, cs *mcp.ClientSession) int {
	t.Helper()
	res, m := call(t, cs, "manage_get_server_status", nil)
	if res.IsError {
		t.Fatalf("status: %v", m)
	}
	g, _ := m["config_summary"].(map[string]any)["generation"].(float64)
	return int(g)
}

// waitGeneration polls the live session until the config generation is want.
func waitGeneration(t testing.TB, cs *mcp.ClientSession, want int) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for configGeneration(t, cs) != want {
		if time.Now().After(deadline) {
			t.Fatalf("config generation never reached %d", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// An owner's edit under config.d and SIGHUP (what `systemctl reload
// raspi-mcp` sends) change what a live session may do, without a
// reconnect; a bad file is refused and the session goes on under the
// config in force. Then manage_config_apply, over the same session, turns
// the switch back on through the helper's drop-in.
func TestReloadOnSIGHUPKeepsTheSession(t *testing.T) {
	s := startSim(t)
	cs := s.session(t)
	write := map[string]any{"pin": 17, "value": "high"}
	if res, m := call(t, cs, "gpio_write_pin", write); res.IsError {
		t.Fatalf("laptop mode has [gpio] writes on: %v", m)
	}
	gen := configGeneration(t, cs)
	dropins := filepath.Join(s.dir, "config.d")
	if err := os.MkdirAll(dropins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropins, "20-owner.toml"), []byte("[gpio]\nwrites = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitGeneration(t, cs, gen+1)
	if _, m := call(t, cs, "gpio_write_pin", write); code(m) != "permission_denied" {
		t.Fatalf("write after the reload turned [gpio] writes off: %v", m)
	}
	// The helper child got the signal too, as PropagatesReloadTo= does it
	// on a device.
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(s.log.String(), "privhelper: config reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("the helper did not reload:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A bad drop-in: the reload fails, the config in force stays.
	bad := filepath.Join(dropins, "30-typo.toml")
	if err := os.WriteFile(bad, []byte("[gpio]\nwritez = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(hangGuard)
	for !strings.Contains(s.log.String(), "config reload failed") {
		if time.Now().After(deadline) {
			t.Fatalf("no failed reload logged:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g := configGeneration(t, cs); g != gen+1 {
		t.Fatalf("generation %d after a bad file, want %d", g, gen+1)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}

	// Over MCP: the helper writes 50-mcp.toml, which sorts after the
	// owner's file, both reload, and the same session may write again.
	args := map[string]any{"toml": "[gpio]\nwrites = true\n"}
	res, m := call(t, cs, "change_prepare", map[string]any{"tool": "manage_config_apply", "arguments": args})
	if res.IsError {
		t.Fatalf("prepare: %v", m)
	}
	// Writes on again widens a power: the commit waits for the owner at
	// the Pi, who presses the (simulated) button.
	pressed := make(chan string, 1)
	go func() {
		out, err := exec.Command(raspi(), "sim", "press", "--wait", "60s", "--dir", s.dir).CombinedOutput()
		pressed <- fmt.Sprintf("%s%v", out, err)
	}()
	if res, m = call(t, cs, "change_commit", map[string]any{"token": m["token"]}); res.IsError {
		t.Fatalf("commit: %v (sim press: %s)", m, <-pressed)
	}
	if out := <-pressed; !strings.Contains(out, "short") {
		t.Fatalf("sim press: %s", out)
	}
	if applied := m["result"].(map[string]any)["applied"]; applied != true {
		t.Fatalf("apply: %v", m)
	}
	if st, err := os.Stat(filepath.Join(dropins, "50-mcp.toml")); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("drop-in: %v %v", st, err)
	}
	if res, m := call(t, cs, "gpio_write_pin", write); res.IsError {
		t.Fatalf("write after the apply: %v", m)
	}
}

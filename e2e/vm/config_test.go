package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// applyConfig is manage_config_apply of toml through change_prepare and
// change_commit, as a client that cannot ask the person does it.
func (r *rig) applyConfig(t *testing.T, toml string) (bool, map[string]any) {
	t.Helper()
	return r.applyConfigWith(t, toml, false)
}

// applyApproved is applyConfig with root at the console approving the
// call when it comes to wait for the device (a change that widens).
func (r *rig) applyApproved(t *testing.T, toml string) (bool, map[string]any) {
	t.Helper()
	return r.applyConfigWith(t, toml, true)
}

func (r *rig) applyConfigWith(t *testing.T, toml string, approve bool) (bool, map[string]any) {
	t.Helper()
	if approve {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			cmd := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "approve", "--wait", "3m", "--config", r.cfg)
			cmd.Stdin = strings.NewReader("y\n")
			_ = cmd.Run()
		}()
	}
	isErr, m := r.call(t, "change_prepare", map[string]any{"tool": "manage_config_apply", "arguments": map[string]any{"toml": toml}})
	if isErr {
		return isErr, m
	}
	return r.call(t, "change_commit", map[string]any{"token": m["token"]})
}

// manage_config_apply on the real helper (root) and agent (raspi-mcp): the
// helper writes the drop-in, both reload, and the kernel's line follows the
// switch through the same MCP session; a candidate whose new pin the
// helper cannot put into its safe state (gpio-sim has 28 lines, the config
// allows BCM numbers to 53) is rolled back by itself.
func TestConfigApplyOnTheDevice(t *testing.T) {
	sysfs, bus := guest(t)
	// Narrowing goes through the client's channel where the owner lowered
	// critical to it; widening waits for root at the console all the same.
	r := startWith(t, bus, "[guard]\ncritical = \"client\"\n")
	dropIn := filepath.Join(r.dir, "config.d", "50-mcp.toml")
	write := func(v string) (bool, map[string]any) {
		return r.call(t, "gpio_write_pin", map[string]any{"pin": 17, "value": v})
	}

	if isErr, m := r.applyConfig(t, "[gpio]\nwrites = false\n"); isErr {
		t.Fatalf("apply writes off: %v", m)
	}
	st, err := os.Stat(dropIn)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("the helper's drop-in: %v %v", st, err)
	}
	if _, m := write("high"); errCode(m) != "permission_denied" {
		t.Fatalf("write with [gpio] writes off: %v", m)
	}
	if v := simValue(t, sysfs, 17); v != "0" {
		t.Fatalf("GPIO17 = %s after a refused write", v)
	}

	if isErr, m := r.applyApproved(t, ""); isErr {
		t.Fatalf("apply writes back on: %v", m)
	}
	if isErr, m := write("high"); isErr || simValue(t, sysfs, 17) != "1" {
		t.Fatalf("write after the apply: %v, GPIO17 = %s", m, simValue(t, sysfs, 17))
	}
	before, _ := os.ReadFile(dropIn)

	isErr, m := r.applyApproved(t, "[gpio]\npins = [ { pin = 17, mode = \"output\", value = 0 }, { pin = 40, mode = \"output\", value = 0 } ]\n")
	if !isErr || errCode(m) != "failed_precondition" || !strings.Contains(m["error"].(map[string]any)["message"].(string), "GPIO40") {
		t.Fatalf("a pin the board lacks: %v", m)
	}
	if after, _ := os.ReadFile(dropIn); string(after) != string(before) {
		t.Fatalf("drop-in after the roll back = %q, want %q", after, before)
	}
	// Still the old rules: pin 27 is allowed, writes are on.
	if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 27, "value": "high"}); isErr || simValue(t, sysfs, 27) != "1" {
		t.Fatalf("write after the roll back: %v", m)
	}
	if _, m := r.call(t, "manage_get_server_status", nil); m["config_summary"].(map[string]any)["generation"] != 3.0 {
		t.Fatalf("agent config generation after two applies and a roll back: %v", m["config_summary"])
	}
}

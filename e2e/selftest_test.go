package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// `raspi-mcp status --check` runs the live self-test of the laptop-mode
// agent: every check passes or warns with a fix, exit 0; --json has the
// whole matrix; with no agent it exits 1.
func TestStatusCheck(t *testing.T) {
	s := startSim(t)
	out, rc := s.cli(t, "status", "--check")
	if rc != 0 || !strings.Contains(out, "PASS  helper") || !strings.Contains(out, "gpio_pin_17") || strings.Contains(out, "FAIL ") {
		t.Fatalf("status --check: rc %d\n%s", rc, out)
	}
	out, rc = s.cli(t, "status", "--check", "--json")
	var m struct {
		Status string `json:"status"`
		Checks []struct {
			Name, Status, FixHint string
		} `json:"checks"`
	}
	if rc != 0 || json.Unmarshal([]byte(out), &m) != nil || m.Status == "fail" || len(m.Checks) < 10 {
		t.Fatalf("status --check --json: rc %d\n%s", rc, out)
	}
	s.stop(t)
	if out, rc := s.cli(t, "status", "--check"); rc != 1 || !strings.Contains(out, "not running") {
		t.Fatalf("agent down: rc %d\n%s", rc, out)
	}
}

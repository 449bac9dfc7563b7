package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// Laptop mode's operations side across the two real processes: the helper
// child changes the simulated systemd (a file both share), the agent reads
// it; the helper's log lines reach logs_get_recent_app_logs; processes and
// the network are the laptop's own, read live.
func TestOperationsInLaptopMode(t *testing.T) {
	s := startSim(t)
	cs := s.session(t)

	_, m := call(t, cs, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "confirm": true, "reason": "e2e"})
	if m["status"] != "inactive" || m["previous_status"] != "active" {
		t.Fatalf("stop nginx: %v", m)
	}
	_, m = call(t, cs, "service_get_status", map[string]any{"service_name": "nginx", "log_lines": 3})
	if m["status"] != "inactive" || len(m["recent_logs"].([]any)) == 0 {
		t.Fatalf("nginx after stop, as the agent reads it: %v", m)
	}
	_, m = call(t, cs, "service_control_service", map[string]any{"service_name": "ssh", "action": "stop", "confirm": true, "reason": "e2e"})
	if code(m) != "permission_denied" {
		t.Fatalf("ssh outside the allow list: %v", m)
	}

	agentPID, helperPID := statusPIDs(t, s.dir)
	// By name: the first 1000 of a busy machine's processes need not include them.
	_, m = call(t, cs, "process_list_processes", map[string]any{"filter": map[string]any{"name_pattern": "raspi-mcp*"}, "sort_by": "pid", "limit": 1000})
	listed := fmt.Sprint(m["processes"])
	if !strings.Contains(listed, fmt.Sprintf("pid:%d ", agentPID)) || !strings.Contains(listed, fmt.Sprintf("pid:%d ", helperPID)) {
		t.Fatalf("agent %d or helper %d not among the processes", agentPID, helperPID)
	}
	for _, pid := range []int{agentPID, helperPID} {
		_, m = call(t, cs, "process_send_signal", map[string]any{"pid": pid, "signal": "TERM", "confirm": true, "reason": "e2e"})
		if code(m) != "permission_denied" {
			t.Fatalf("TERM to raspi-mcp's own pid %d: %v", pid, m)
		}
	}
	if _, a2 := statusPIDs(t, s.dir); a2 != helperPID {
		t.Fatal("the helper was signalled")
	}

	// The helper child logs its changes; the agent keeps its lines.
	_, m = call(t, cs, "logs_get_recent_app_logs", map[string]any{"source": "helper", "limit": 50})
	if !strings.Contains(fmt.Sprint(m["entries"]), "unit stop") {
		t.Fatalf("helper log lines: %v", m)
	}
	if _, m = call(t, cs, "network_get_status", map[string]any{}); !strings.Contains(fmt.Sprint(m["interfaces"]), "name:lo") {
		t.Fatalf("network: %v", m)
	}
}

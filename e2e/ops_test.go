package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Laptop mode's operations side across the two real processes: the helper
// child changes the simulated systemd (a file both share), the agent reads
// it; the helper's log lines reach logs_get_recent_app_logs; processes and
// the network are the simulated board's (TestLaptopModeTouchesNoHostProcess).
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

	// The processes are the simulated board's, and raspi-mcp on it is
	// never signalled; the real agent and helper are not in the table.
	agentPID, helperPID := statusPIDs(t, s.dir)
	_, m = call(t, cs, "process_list_processes", map[string]any{"filter": map[string]any{"name_pattern": "raspi-mcp*"}})
	if m["total_count"] != 2.0 {
		t.Fatalf("raspi-mcp on the board: %v", m)
	}
	for _, p := range m["processes"].([]any) {
		pid := int(p.(map[string]any)["pid"].(float64))
		_, m = call(t, cs, "process_send_signal", map[string]any{"pid": pid, "signal": "TERM", "confirm": true, "reason": "e2e"})
		if code(m) != "permission_denied" {
			t.Fatalf("TERM to the board's raspi-mcp %d: %v", pid, m)
		}
	}
	if a2, h2 := statusPIDs(t, s.dir); a2 != agentPID || h2 != helperPID {
		t.Fatal("the agent or the helper was restarted")
	}

	// The helper child logs its changes; the agent keeps its lines.
	_, m = call(t, cs, "logs_get_recent_app_logs", map[string]any{"source": "helper", "limit": 50})
	if !strings.Contains(fmt.Sprint(m["entries"]), "unit stop") {
		t.Fatalf("helper log lines: %v", m)
	}
	if _, m = call(t, cs, "network_get_status", map[string]any{}); !strings.Contains(fmt.Sprint(m["interfaces"]), "name:eth0") {
		t.Fatalf("network: %v", m)
	}
}

// Laptop mode stays on its simulated board: a marker process started on this
// machine is invisible to every --sim tool and cannot be signalled through
// them, nor can the real agent and helper; the counts of the board agree
// between tools; the network tools show the board's LAN.
func TestLaptopModeTouchesNoHostProcess(t *testing.T) {
	word := fmt.Sprintf("raspi-mcp-e2e-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	marker := exec.Command("sh", "-c", "sleep 300; : "+word) // sh keeps word in its argv
	if err := marker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = marker.Process.Kill(); _ = marker.Wait() })
	s := startSim(t)
	cs := s.session(t)
	agentPID, helperPID := statusPIDs(t, s.dir)

	_, all := call(t, cs, "process_list_processes", map[string]any{"filter": map[string]any{"include_kernel_threads": true}, "sort_by": "pid", "limit": 1000})
	board := map[int]bool{}
	for _, p := range all["processes"].([]any) {
		board[int(p.(map[string]any)["pid"].(float64))] = true
	}
	if len(board) < 10 || strings.Contains(fmt.Sprint(all), word) {
		t.Fatalf("the board's process table: %v", all)
	}
	for _, pattern := range []string{"sh", "sleep", "*marker*"} {
		_, m := call(t, cs, "process_list_processes", map[string]any{"filter": map[string]any{"name_pattern": pattern}})
		if m["total_count"] != 0.0 {
			t.Errorf("name_pattern %q matches %v on a board that runs no such program", pattern, m["processes"])
		}
	}
	for name, pid := range map[string]int{"marker": marker.Process.Pid, "agent": agentPID, "helper": helperPID} {
		if board[pid] {
			t.Logf("the %s's pid %d is also one of the board's; skipping it", name, pid)
			continue
		}
		if _, m := call(t, cs, "process_get_process_details", map[string]any{"pid": pid}); code(m) != "not_found" {
			t.Errorf("details of the host's %s (pid %d): %v", name, pid, m)
		}
		if _, m := call(t, cs, "process_send_signal", map[string]any{"pid": pid, "signal": "TERM", "confirm": true, "reason": "e2e"}); code(m) != "not_found" {
			t.Errorf("TERM to the host's %s (pid %d): %v", name, pid, m)
		}
	}
	if err := marker.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the marker process is gone: %v", err)
	}
	if a2, h2 := statusPIDs(t, s.dir); a2 != agentPID || h2 != helperPID {
		t.Fatal("the agent or the helper was signalled")
	}

	// One board: cores and memory agree between the tools.
	_, basic := call(t, cs, "system_get_basic_info", map[string]any{})
	if basic["cpu_cores"] != all["cpu_count"] {
		t.Errorf("cores: basic info %v, process list %v", basic["cpu_cores"], all["cpu_count"])
	}
	_, top := call(t, cs, "process_list_processes", map[string]any{"limit": 1})
	p := top["processes"].([]any)[0].(map[string]any)
	if p["name"] != "ffmpeg" || p["cpu_percent"].(float64) <= 0 {
		t.Errorf("top: %v", p)
	}
	if rss, pct := p["memory_rss"].(float64), p["memory_percent"].(float64); pct <= 0 || rss/(pct/100)/basic["memory_total_bytes"].(float64) > 1.01 || rss/(pct/100)/basic["memory_total_bytes"].(float64) < 0.99 {
		t.Errorf("memory_percent %v of %v bytes RSS is not of the board's %v bytes", pct, rss, basic["memory_total_bytes"])
	}
	_, _ = call(t, cs, "process_send_signal", map[string]any{"pid": p["pid"], "signal": "TERM", "confirm": true, "reason": "e2e"})
	if _, m := call(t, cs, "process_get_process_details", map[string]any{"pid": p["pid"]}); code(m) != "not_found" {
		t.Errorf("the board's ffmpeg after TERM: %v", m)
	}

	_, n := call(t, cs, "system_get_network_info", map[string]any{})
	if got := fmt.Sprint(n["interfaces"]); !strings.Contains(got, "192.168.1.42") || !strings.Contains(got, "name:wlan0") {
		t.Errorf("network info is not the board's: %v", got)
	}
}

package agent

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// sleepers starts n sleep processes: a busy Pi has 500+ processes.
func sleepers(tb testing.TB, n int) {
	tb.Helper()
	cmds := make([]*exec.Cmd, 0, n)
	for range n {
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			tb.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	tb.Cleanup(func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	})
}

// The first page on a busy machine is correct and far below a client's
// token budget (25,000 tokens, about 100 KB), whatever limit is asked.
func TestBusyMachineFirstPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 520 processes")
	}
	r := newRig(t, nil)
	sleepers(t, 520)
	res, sc := r.as(admin, "process_list_processes", map[string]any{"sort_by": "memory_rss", "limit": 50})
	if res.IsError {
		t.Fatal(sc)
	}
	size := len(res.StructuredContent.(json.RawMessage))
	if sc["total_count"].(float64) < 520 || sc["returned_count"].(float64) != 50 || sc["has_more"] != true || size > processPageBytes {
		t.Fatalf("first page: total %v, returned %v, has_more %v, %d bytes", sc["total_count"], sc["returned_count"], sc["has_more"], size)
	}
	var prev float64 = -1
	for _, p := range sc["processes"].([]any) {
		rss := p.(map[string]any)["memory_rss"].(float64)
		if prev >= 0 && rss > prev {
			t.Fatalf("not sorted by memory_rss, descending: %v after %v", rss, prev)
		}
		prev = rss
	}
	t.Logf("first page of 50 of %v processes: %d bytes", sc["total_count"], size)

	res, sc = r.as(admin, "process_list_processes", map[string]any{"limit": 1000})
	size = len(res.StructuredContent.(json.RawMessage))
	if sc["truncated"] != true || sc["has_more"] != true || size > processPageBytes+4096 || sc["next_offset"].(float64) != sc["returned_count"].(float64) {
		t.Fatalf("limit 1000: truncated %v, returned %v, next %v, %d bytes", sc["truncated"], sc["returned_count"], sc["next_offset"], size)
	}
	t.Logf("limit 1000 cut at %v processes, %d bytes", sc["returned_count"], size)
}

// BenchmarkListProcesses500 is one page on a machine with 500+ processes,
// without the 500 ms CPU window a real call waits for when the last reading
// is too fresh (calls a few seconds apart do not wait).
func BenchmarkListProcesses500(b *testing.B) {
	r := newRig(b, nil)
	sleepers(b, 500)
	r.a.cpu.window = time.Nanosecond
	benchTool(b, r, "process_list_processes", map[string]any{"limit": 50})
}

// BenchmarkListServices is the agent's own cost over the simulated systemd;
// D-Bus time on a device comes on top (measured in the VM).
func BenchmarkListServices(b *testing.B) {
	r := newRig(b, nil)
	benchTool(b, r, "service_list_services", map[string]any{})
}

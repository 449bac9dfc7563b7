package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exporterChild is the pid of the raspi-mcp-exporter child of agent, 0
// when it has none.
func exporterChild(t *testing.T, agent int) int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so from the last ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(agent) {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", d.Name(), "exe")); err == nil && filepath.Base(exe) == "raspi-mcp-exporter" {
			return pid
		}
	}
	return 0
}

// scrapeChild scrapes s's /metrics, which must show the agent's own
// process metrics, and returns the exporter child that rendered it.
func scrapeChild(t *testing.T, s *sim) int {
	t.Helper()
	url := strings.TrimSuffix(waitURL(t, s), "/mcp") + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\nraspi_mcp_process_resident_memory_bytes ") {
		t.Fatalf("/metrics: %d\n%.600s", resp.StatusCode, body)
	}
	child := exporterChild(t, s.cmd.Process.Pid)
	if child == 0 {
		t.Fatal("no raspi-mcp-exporter child after a scrape")
	}
	return child
}

// waitGone waits for pid to end.
func waitGone(t *testing.T, pid int, after string) {
	t.Helper()
	since := time.Now()
	for syscall.Kill(pid, 0) == nil {
		if time.Since(since) > hangGuard {
			t.Fatalf("exporter %d still alive %v after %s", pid, hangGuard, after)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The agent renders /metrics in its raspi-mcp-exporter child, found beside
// it in bin/: none runs before the first scrape, the page has the agent's
// own process metrics, and the child goes when the agent stops, cleanly
// or killed -9.
func TestExporterChildFollowsAgent(t *testing.T) {
	s := startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0")
	waitURL(t, s)
	if pid := exporterChild(t, s.cmd.Process.Pid); pid != 0 {
		t.Fatalf("exporter %d runs before any scrape", pid)
	}
	child := scrapeChild(t, s)
	s.stop(t)
	waitGone(t, child, "a clean stop of its agent")

	s = startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0")
	child = scrapeChild(t, s)
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
	waitGone(t, child, "kill -9 of its agent")
}

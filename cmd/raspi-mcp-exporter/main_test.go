package main

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

// Started under the name raspi-mcp-exporter (a symlink to this test
// binary), the test binary is the exporter itself: main as the agent runs it.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "raspi-mcp-exporter" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func exporterBin(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "raspi-mcp-exporter")
	if err := os.Symlink(self, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The agent's side of the pipe gets a page in the negotiated format, with
// a NaN and a label that is not UTF-8 handled as the library does.
func TestServesTheAgent(t *testing.T) {
	p := scrape.NewProcess(exporterBin(t), os.Stderr)
	defer p.Close()
	s := &scrape.Snapshot{
		Families: []scrape.Family{
			{Name: "raspi_load1", Type: scrape.Gauge, Help: "Load average over 1 minute."},
			{Name: "raspi_network_receive_bytes_total", Type: scrape.Counter, Help: "Bytes received.", Labels: []string{"interface"}},
		},
		Points: []scrape.Point{
			{Family: 0, Value: math.NaN()},
			{Family: 1, Value: 7, Labels: []string{"eth0"}},
			{Family: 1, Value: 8, Labels: []string{"wlan\xff"}},
		},
		ProcessPID: os.Getpid(), ProcessNamespace: "raspi_mcp",
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	page, err := p.Render(ctx, "application/openmetrics-text;version=1.0.0", s)
	if err != nil {
		t.Fatal(err)
	}
	body := string(page.Body)
	if !strings.HasPrefix(page.ContentType, "application/openmetrics-text") || !strings.Contains(body, "raspi_load1 NaN\n") ||
		!strings.Contains(body, `raspi_network_receive_bytes_total{interface="eth0"} 7.0`) || strings.Contains(body, "wlan") || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("%s\n%s", page.ContentType, body)
	}
	if len(page.Problems) != 1 || !strings.Contains(page.Problems[0], "UTF-8") {
		t.Fatalf("problems %q", page.Problems)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && !strings.Contains(body, "raspi_mcp_process_start_time_seconds") {
		t.Fatalf("no process metrics of the pid asked for:\n%s", body)
	}
}

// Nobody runs it by hand: an argument is refused with a reason.
func TestRefusesArguments(t *testing.T) {
	out, err := exec.Command(exporterBin(t), "--help").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "takes no arguments") {
		t.Fatalf("%v: %s", err, out)
	}
}

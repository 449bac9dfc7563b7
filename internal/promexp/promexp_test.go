package promexp

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

var fams = []scrape.Family{
	{Name: "raspi_load1", Type: scrape.Gauge, Help: "Load average over 1 minute."},
	{Name: "raspi_network_receive_bytes_total", Type: scrape.Counter, Help: "Bytes received.", Labels: []string{"interface"}},
}

// Samples the format cannot carry are left out and named; the rest is
// written, values such as NaN included.
func TestRenderLeavesOutBadSamples(t *testing.T) {
	s := &scrape.Snapshot{Families: fams, Points: []scrape.Point{
		{Family: 0, Value: math.NaN()},
		{Family: 1, Value: 7, Labels: []string{"eth0"}},
		{Family: 1, Value: 8, Labels: []string{"wlan\xff"}}, // not UTF-8
		{Family: 1, Value: 9},                               // a label missing
		{Family: 5, Value: 1},                               // no such family
	}}
	p, err := New().Render(context.Background(), "", s)
	if err != nil {
		t.Fatal(err)
	}
	body := string(p.Body)
	if !strings.HasPrefix(p.ContentType, "text/plain; version=0.0.4") || !strings.Contains(body, "raspi_load1 NaN\n") ||
		!strings.Contains(body, `raspi_network_receive_bytes_total{interface="eth0"} 7`+"\n") || strings.Contains(body, "wlan") {
		t.Fatalf("%s\n%s", p.ContentType, body)
	}
	if len(p.Problems) != 3 {
		t.Fatalf("problems %q, want the three samples left out", p.Problems)
	}
}

// The registry follows the table and the process it is given.
func TestRenderFollowsTable(t *testing.T) {
	r := New()
	if _, err := r.Render(context.Background(), "", &scrape.Snapshot{Families: fams, Points: []scrape.Point{{Family: 0, Value: 1}}}); err != nil {
		t.Fatal(err)
	}
	other := []scrape.Family{{Name: "raspi_up", Type: scrape.Gauge, Help: "Up."}}
	p, err := r.Render(context.Background(), "application/openmetrics-text;version=1.0.0", &scrape.Snapshot{Families: other, Points: []scrape.Point{{Family: 0, Value: 1}},
		ProcessPID: os.Getpid(), ProcessNamespace: "raspi_mcp"})
	if err != nil {
		t.Fatal(err)
	}
	body := string(p.Body)
	if !strings.Contains(body, "raspi_up 1") || strings.Contains(body, "raspi_load1") || !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("%s", body)
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && !strings.Contains(body, "raspi_mcp_process_cpu_seconds_total") {
		t.Fatalf("no process metrics:\n%s", body)
	}
	bad := []scrape.Family{{Name: "raspi_x", Type: 7, Help: "x"}}
	if _, err := r.Render(context.Background(), "", &scrape.Snapshot{Families: bad}); err == nil || !strings.Contains(err.Error(), "type 7") {
		t.Fatalf("a family of type 7: %v", err)
	}
}

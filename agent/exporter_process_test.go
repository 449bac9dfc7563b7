package agent

import (
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/promexp"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

// buildExporter builds raspi-mcp-exporter into a directory of the test.
func buildExporter(t *testing.T) string { t.Helper(); return buildExporterB(t) }

func buildExporterB(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds raspi-mcp-exporter")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/raspi-mcp-exporter")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build raspi-mcp-exporter: %v\n%s", err, out)
	}
	return filepath.Join(dir, "raspi-mcp-exporter")
}

// Through the real exporter process, as a serving agent scrapes: the same
// samples as in process, the agent's own process metrics (not the
// exporter's), OpenMetrics, HEAD, a bad device label left out, and a
// child killed between scrapes replaced.
func TestMetricsThroughExporterProcess(t *testing.T) {
	bin := buildExporter(t)
	r := newSimRig(t, nil)
	base, _ := r.a.sys.(interface {
		sysinfo.CounterSource
		sysinfo.FilesystemSource
	})
	r.a.sys = oddBoard{Source: r.a.sys, base: base}
	r.as(reader, "system_reboot", map[string]any{"dry_run": true, "confirm": true, "reason": "test"})
	inProcess := samples(t, getMetrics(t, r.a))

	p := scrape.NewProcess(bin, os.Stderr)
	t.Cleanup(func() { p.Close() })
	r.a.exp.render = p
	body := getMetrics(t, r.a)
	if strings.Contains(string(body), "wlan\xff") {
		t.Fatal("an interface name that is not UTF-8 was served")
	}
	m := samples(t, body)
	want(t, m, `raspi_mcp_tool_calls_total{decision="deny",tool="system.reboot"}`, 1)
	want(t, m, `raspi_reading_ok{source="counters"}`, 1)
	for k := range inProcess {
		if _, ok := m[k]; !ok {
			t.Errorf("%s is rendered in process but not by raspi-mcp-exporter", k)
		}
	}
	if runtime.GOOS == "linux" {
		// The exporter started long after this process (it was built in
		// between), so a start time equal to the in-process one is ours.
		want(t, m, `raspi_mcp_process_start_time_seconds`, inProcess[`raspi_mcp_process_start_time_seconds`])
	}
	if n := len(r.appLog.Entries(slog.LevelWarn, "agent", 100)); n == 0 {
		t.Fatal("the sample left out was not logged")
	}

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	rec := httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || !strings.HasPrefix(ct, "application/openmetrics-text") || !strings.HasSuffix(rec.Body.String(), "# EOF\n") {
		t.Fatalf("OpenMetrics: %d %q\n%s", rec.Code, ct, rec.Body)
	}
	rec = httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/metrics", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "0" || rec.Header().Get("Content-Length") == "" {
		t.Fatalf("HEAD: %d, %d body bytes, length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}

	// Gzip, as Prometheus asks for it, twice: the second reuses the
	// first's compressor.
	for range 2 {
		req = httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec = httptest.NewRecorder()
		r.a.MetricsHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
			t.Fatalf("gzip: %d %v", rec.Code, rec.Header())
		}
		zr, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		want(t, samples(t, plain), `raspi_mcp_tool_calls_total{decision="deny",tool="system.reboot"}`, 1)
	}

	old := p.Pid()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want(t, samples(t, getMetrics(t, r.a)), `raspi_mcp_tool_calls_total{decision="deny",tool="system.reboot"}`, 1)
	if p.Pid() == old || p.Pid() == 0 {
		t.Fatalf("exporter pid %d after killing %d", p.Pid(), old)
	}
}

// Without the exporter binary a scrape is a 503 with the reason in one
// line, logged once however many scrapes fail, and once more when scrapes
// work again; the agent's calls go on.
func TestMetricsWithoutExporter(t *testing.T) {
	r := newSimRig(t, nil)
	r.a.exp.render = scrape.NewProcess(filepath.Join(t.TempDir(), "raspi-mcp-exporter"), nil)
	for range 3 {
		rec := httptest.NewRecorder()
		r.a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if body := strings.TrimSuffix(rec.Body.String(), "\n"); rec.Code != http.StatusServiceUnavailable || strings.Contains(body, "\n") || !strings.Contains(body, "raspi-mcp-exporter") {
			t.Fatalf("without the exporter: %d %q", rec.Code, rec.Body)
		}
	}
	logged := func(msg string) int {
		n := 0
		for _, e := range r.appLog.Entries(slog.LevelInfo, "agent", 100) {
			if strings.Contains(e.Message, msg) {
				n++
			}
		}
		return n
	}
	if n := logged("cannot render"); n != 1 {
		t.Fatalf("the failure was logged %d times, want once", n)
	}
	if res, sc := r.as(reader, "system_get_basic_info", map[string]any{}); res.IsError {
		t.Fatalf("a call while /metrics fails: %v", sc)
	}

	r.a.exp.render = promexp.New()
	want(t, samples(t, getMetrics(t, r.a)), `raspi_mcp_tool_calls_total{decision="allow",tool="system.get_basic_info"}`, 1)
	if n := logged("renders again"); n != 1 {
		t.Fatalf("the recovery was logged %d times, want once", n)
	}
}

// An agent built without a renderer answers 503, never panics.
func TestMetricsWithoutRenderer(t *testing.T) {
	r := newSimRig(t, nil)
	r.a.exp.handler = r.a.newMetricsHandler(nil)
	rec := httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(context.Background()))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "without a renderer") {
		t.Fatalf("%d %q", rec.Code, rec.Body)
	}
}

// Prometheus asks for gzip; the page comes compressed, and a client that
// refuses gzip (q=0) gets it plain.
func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"gzip": true, "": false, "identity": false, "deflate, gzip;q=0.5": true, "gzip;q=0": false, "GZIP ; q=1": true, "x-gzip": false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v", h, got)
		}
	}
}

// BenchmarkScrapeCollect is the agent's part of a scrape on the simulated
// board: reading the board, the audit counts, the database size and the
// counters into points, without rendering.
func BenchmarkScrapeCollect(b *testing.B) {
	r := newSimRig(b, nil)
	for _, tl := range r.a.tools.All() {
		r.a.count(tl, "allow", nil)
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(r.a.collect(context.Background()).Points)
	}
	b.ReportMetric(float64(n), "points")
}

// BenchmarkScrapeExporterProcess is BenchmarkScrape as a serving agent
// does it: rendered by the raspi-mcp-exporter child, gzip as Prometheus
// asks. Its time includes the child's; cpu_us/op counts this process's
// CPU only (user and system, from getrusage).
func BenchmarkScrapeExporterProcess(b *testing.B) {
	bin := buildExporterB(b)
	r := newSimRig(b, nil)
	for _, tl := range r.a.tools.All() {
		r.a.count(tl, "allow", nil)
	}
	p := scrape.NewProcess(bin, os.Stderr)
	b.Cleanup(func() { p.Close() })
	r.a.exp.render = p
	h := r.a.MetricsHandler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	w := &countingWriter{h: http.Header{}}
	h.ServeHTTP(w, req) // the child starts
	b.ReportAllocs()
	before := cpuTime(b)
	for b.Loop() {
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/float64(b.N), "cpu_us/op")
	b.ReportMetric(float64(w.n), "gzip_bytes")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// getMetrics GETs /metrics from the agent's handler and returns the body.
func getMetrics(t testing.TB, a *Agent) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	// A scraper that states no preference gets the classic text format.
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4;") {
		t.Fatalf("scrape: Content-Type %q, want the text format 0.0.4", ct)
	}
	return rec.Body.Bytes()
}

// samples parses the text format into "name{labels}" -> value, and checks
// on the way what promtool would: every sample follows the HELP and TYPE
// of its own family, no family appears twice, no sample repeats.
func samples(t testing.TB, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	seen := map[string]bool{}
	family, helped := "", false
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if seen[name] {
				t.Fatalf("family %s appears twice", name)
			}
			if help == "" || !strings.HasPrefix(name, "raspi_") {
				t.Fatalf("family %s: want the raspi_ prefix and a help text", name)
			}
			seen[name], family, helped = true, name, true
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			if name != family || !helped {
				t.Fatalf("TYPE of %s without its HELP", name)
			}
			if (typ == "counter") != strings.HasSuffix(name, "_total") {
				t.Fatalf("family %s is a %s: counters and only counters end in _total", name, typ)
			}
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		key, val := line[:i], line[i+1:]
		name, _, _ := strings.Cut(key, "{")
		if name != family {
			t.Fatalf("sample %q outside its family (current family %s)", line, family)
		}
		if _, dup := out[key]; dup {
			t.Fatalf("sample %s repeated", key)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[key] = v
	}
	return out
}

func want(t testing.TB, m map[string]float64, key string, v float64) {
	t.Helper()
	got, ok := m[key]
	if !ok {
		t.Fatalf("no sample %s", key)
	}
	if got != v {
		t.Fatalf("%s = %v, want %v", key, got, v)
	}
}

// The device values come from the simulated board: its memory, its
// temperature source, and the throttling bits as a test sets them.
func TestMetricsFromSimBoard(t *testing.T) {
	r := newSimRig(t, nil)
	board := r.sim.Agent.Sys
	m := samples(t, getMetrics(t, r.a))
	want(t, m, `raspi_reading_ok{source="health"}`, 1)
	want(t, m, `raspi_reading_ok{source="counters"}`, 1)
	want(t, m, `raspi_memory_total_bytes`, 4<<30)
	want(t, m, `raspi_mcp_info{build="",mode="sim",version="test"}`, 1)
	// A past under-voltage and nothing now: the board's start-up state.
	want(t, m, `raspi_throttled{flag="under_voltage",when="now"}`, 0)
	want(t, m, `raspi_throttled{flag="under_voltage",when="since_boot"}`, 1)
	want(t, m, `raspi_throttled{flag="throttled",when="now"}`, 0)
	if c := m[`raspi_temperature_celsius{source="sim"}`]; c < 20 || c > 90 {
		t.Fatalf("sim temperature %v (or absent)", c)
	}
	h, err := board.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want(t, m, `raspi_filesystem_size_bytes{device="/dev/mmcblk0p2",fstype="ext4",mountpoint="/"}`, float64(h.DiskTotalBytes))
	want(t, m, `raspi_filesystem_used_bytes{device="/dev/mmcblk0p2",fstype="ext4",mountpoint="/"}`, float64(h.DiskUsedBytes))
	if _, ok := m[`raspi_filesystem_used_bytes{device="/dev/mmcblk0p1",fstype="vfat",mountpoint="/boot/firmware"}`]; !ok {
		t.Fatal("no use of the boot partition")
	}
	c, err := board.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Net) == 0 || len(c.Disk) == 0 {
		t.Fatalf("the sim board has no interfaces or disks: %+v", c)
	}
	for _, n := range c.Net {
		if _, ok := m[`raspi_network_receive_bytes_total{interface="`+n.Name+`"}`]; !ok {
			t.Fatalf("no receive counter of %s", n.Name)
		}
	}
	for _, d := range c.Disk {
		if _, ok := m[`raspi_disk_written_bytes_total{device="`+d.Name+`"}`]; !ok {
			t.Fatalf("no write counter of %s", d.Name)
		}
	}
	if _, ok := m[`raspi_clock_synchronized`]; ok {
		t.Fatalf("the simulated board has no time service, yet clock sync is reported")
	}
	want(t, m, `raspi_mcp_audit_chain_status{status="ok"}`, 1)
	want(t, m, `raspi_mcp_audit_chain_status{status="tampered"}`, 0)
	if m[`raspi_mcp_database_size_bytes`] <= 0 {
		t.Fatalf("database size %v", m[`raspi_mcp_database_size_bytes`])
	}
	// The agent's own process, from /proc/self (the library reads other
	// systems differently).
	if runtime.GOOS == "linux" && (m[`raspi_mcp_process_resident_memory_bytes`] <= 0 || m[`raspi_mcp_process_open_fds`] <= 0) {
		t.Fatalf("agent process: resident memory %v, open files %v", m[`raspi_mcp_process_resident_memory_bytes`], m[`raspi_mcp_process_open_fds`])
	}

	// Under-voltage and throttling now, as a failing supply shows them.
	board.SetThrottle(1<<0 | 1<<2 | 1<<16 | 1<<18)
	m = samples(t, getMetrics(t, r.a))
	want(t, m, `raspi_throttled{flag="under_voltage",when="now"}`, 1)
	want(t, m, `raspi_throttled{flag="throttled",when="now"}`, 1)
	want(t, m, `raspi_throttled{flag="throttled",when="since_boot"}`, 1)
	want(t, m, `raspi_throttled{flag="frequency_capped",when="now"}`, 0)
}

// A denied call counts as a denial of its tool and as an error of its
// code; an allowed one as allowed; neither touches the other's counters.
func TestMetricsCountDecisions(t *testing.T) {
	r := newSimRig(t, nil)
	m := samples(t, getMetrics(t, r.a))
	want(t, m, `raspi_mcp_denials_total`, 0)
	want(t, m, `raspi_mcp_tool_errors_total{code="permission_denied"}`, 0)
	if _, ok := m[`raspi_mcp_tool_calls_total{decision="deny",tool="system.reboot"}`]; ok {
		t.Fatal("a tool never called is listed")
	}

	// A reader may not reboot, not even as a dry run.
	res, _ := r.as(reader, "system_reboot", map[string]any{"dry_run": true, "confirm": true, "reason": "test"})
	if _, e := decodeResult[SystemPowerOut](t, res); e == nil || e.Code != CodePermissionDenied {
		t.Fatalf("reader's reboot: %+v", e)
	}
	if ev := r.pw.Events(); len(ev) != 0 {
		t.Fatalf("the denied call reached the power backend: %v", ev)
	}
	res, _ = r.as(reader, "system_get_health_snapshot", map[string]any{})
	if _, e := decodeResult[HealthSnapshot](t, res); e != nil {
		t.Fatalf("health: %+v", e)
	}

	m = samples(t, getMetrics(t, r.a))
	want(t, m, `raspi_mcp_denials_total`, 1)
	want(t, m, `raspi_mcp_tool_calls_total{decision="deny",tool="system.reboot"}`, 1)
	want(t, m, `raspi_mcp_tool_calls_total{decision="allow",tool="system.reboot"}`, 0)
	want(t, m, `raspi_mcp_tool_errors_total{code="permission_denied"}`, 1)
	want(t, m, `raspi_mcp_tool_calls_total{decision="allow",tool="system.get_health_snapshot"}`, 1)
	want(t, m, `raspi_mcp_tool_calls_total{decision="deny",tool="system.get_health_snapshot"}`, 0)
	want(t, m, `raspi_mcp_audit_denied_records`, 1)
}

// Only GET and HEAD scrape; anything else is refused and reads nothing.
func TestMetricsMethod(t *testing.T) {
	r := newSimRig(t, nil)
	rec := httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/metrics", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/metrics", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "0" {
		t.Fatalf("HEAD: %d, %d body bytes, length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

// promtool, Prometheus's own checker, accepts the output (names, units,
// HELP, TYPE, counters' _total). CI installs it with the Debian package
// prometheus; elsewhere the test skips.
func TestMetricsPromtool(t *testing.T) {
	t.Parallel() // it mostly waits (a timeout, a scrape): beside the others
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	r := newSimRig(t, nil)
	// Every kind of sample present: a denial, an allowed call, an error.
	r.as(reader, "system_reboot", map[string]any{"dry_run": true})
	r.as(reader, "system_get_basic_info", map[string]any{})
	body := getMetrics(t, r.a)
	f := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s\n(output kept in %s)", err, out, f)
	}
}

// Counting a call is on every call's path: it must not allocate.
func TestCountNoAllocs(t *testing.T) {
	r := newSimRig(t, nil)
	tl, _ := r.a.tools.Lookup("system_reboot")
	e := tool.Errf(CodePermissionDenied, "no")
	if n := testing.AllocsPerRun(1000, func() { r.a.count(tl, "deny", e) }); n != 0 {
		t.Fatalf("count allocates %v times per call", n)
	}
}

func BenchmarkCountCall(b *testing.B) {
	r := newSimRig(b, nil)
	tl, _ := r.a.tools.Lookup("system_reboot")
	e := tool.Errf(CodePermissionDenied, "no")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.a.count(tl, "deny", e)
		}
	})
}

// BenchmarkScrape is one whole scrape on the simulated board after every
// tool has been called once: reading the board, the audit counts, the
// database size, and writing the text.
func BenchmarkScrape(b *testing.B) {
	r := newSimRig(b, nil)
	for _, tl := range r.a.tools.All() {
		r.a.count(tl, "allow", nil)
	}
	h := r.a.MetricsHandler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &countingWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(w.n), "body_bytes")
}

// BenchmarkScrapeLinux is BenchmarkScrape reading this machine's /proc and
// /sys as on a device (mounts, counters, clock sync), without the CPU
// reading's wait for a second /proc/stat sample, which is time asleep, not
// work.
func BenchmarkScrapeLinux(b *testing.B) {
	r := newRig(b, nil)
	r.a.sys = sysinfo.NewLinux(sysinfo.LinuxOptions{Sleep: func(context.Context, time.Duration) error { return nil }})
	r.a.mode = "device"
	for _, tl := range r.a.tools.All() {
		r.a.count(tl, "allow", nil)
	}
	h := r.a.MetricsHandler()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &countingWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(w.n), "body_bytes")
}

// countingWriter is a ResponseWriter that keeps only the body's length, so
// the benchmark counts the scrape's allocations, not a recorder's buffer.
type countingWriter struct {
	h http.Header
	n int
}

func (w *countingWriter) Header() http.Header         { return w.h }
func (w *countingWriter) WriteHeader(int)             {}
func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// dashboardExprs are the PromQL expressions of the packaged Grafana
// dashboard, with its variables replaced by what Grafana would send.
func dashboardExprs(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile("../packaging/prometheus/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Fatalf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, strings.NewReplacer("$instance", ".+", "$__rate_interval", "1m").Replace(tg.Expr))
		}
	}
	return out
}

// The dashboard asks only for metrics the exporter writes: a renamed
// metric must not leave an empty panel behind.
func TestDashboardUsesExportedNames(t *testing.T) {
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.name] = true
	}
	if len(exported) != len(families) {
		t.Fatalf("%d families but %d names: a name is listed twice", len(families), len(exported))
	}
	used := 0
	for _, e := range dashboardExprs(t) {
		for _, n := range regexp.MustCompile(`raspi_[a-z0-9_]+`).FindAllString(e, -1) {
			if !exported[n] {
				t.Errorf("dashboard query %q uses %s, which the exporter does not write", e, n)
			}
			used++
		}
	}
	if used == 0 {
		t.Fatal("the dashboard queries no raspi_ metric")
	}
}

// The packaged scrape configuration is one Prometheus accepts, once the
// token and certificate files it names exist.
func TestPackagedScrapeConfig(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	b, err := os.ReadFile("../packaging/prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := strings.ReplaceAll(string(b), "/etc/prometheus/raspi-mcp/", dir+"/")
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(dir)+`/[a-z0-9.-]+`).FindAllString(cfg, -1) {
		if err := os.WriteFile(m, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(f, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", "--syntax-only", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// A mounted upstream shows as up, with the latency of its answered calls,
// and its tools are counted like ours; the served agent's helper is up and
// its default sampling job is on time.
func TestMetricsUpstreamAndHelper(t *testing.T) {
	f := newFakeLAN(t)
	r, _ := lanRig(t, f)
	res, _ := r.as(reader, "hs4_devices_get_level", map[string]any{})
	if _, e := decodeResult[levelOut](t, res); e != nil {
		t.Fatalf("upstream read: %+v", e)
	}
	var m map[string]float64
	lag := func() (float64, bool) {
		for k, v := range m {
			if strings.HasPrefix(k, `raspi_mcp_sampler_lag_seconds{job="`) {
				return v, true
			}
		}
		return 0, false
	}
	waitFor(t, "the helper watch's first look and the default job's first sample", hangGuard, func() bool {
		m = samples(t, getMetrics(t, r.a))
		_, ok := m[`raspi_mcp_helper_up`]
		_, sampled := lag()
		return ok && sampled
	})
	if l, _ := lag(); l < 0 {
		t.Fatalf("sampler lag %v", l)
	}
	want(t, m, `raspi_mcp_helper_up`, 1)
	want(t, m, `raspi_mcp_upstream_up{upstream="hs4"}`, 1)
	if l := m[`raspi_mcp_upstream_latency_seconds{upstream="hs4"}`]; l <= 0 {
		t.Fatalf("upstream latency %v (or absent)", l)
	}
	tl, _ := r.a.tools.Lookup("hs4_devices_get_level")
	want(t, m, `raspi_mcp_tool_calls_total{decision="allow",tool="`+tl.ID()+`"}`, 1)
}

// failingBoard is a board whose readings all fail.
type failingBoard struct{ sysinfo.Source }

func (failingBoard) Health(context.Context) (sysinfo.Health, error) {
	return sysinfo.Health{}, errors.New("sysinfo: read /proc/meminfo: permission denied")
}

// A board that cannot be read loses its own families and says so; the
// agent's metrics still come, and a tampered audit trail shows.
func TestMetricsSurviveUnreadableBoard(t *testing.T) {
	r := newSimRig(t, nil)
	r.a.sys = failingBoard{r.a.sys}
	r.a.witness.note("gap: record 7 missing")
	m := samples(t, getMetrics(t, r.a))
	want(t, m, `raspi_reading_ok{source="health"}`, 0)
	for k := range m {
		if strings.HasPrefix(k, "raspi_temperature") || strings.HasPrefix(k, "raspi_load1") || strings.HasPrefix(k, "raspi_network_") {
			t.Fatalf("%s reported from a board that cannot be read", k)
		}
	}
	want(t, m, `raspi_mcp_denials_total`, 0)
	want(t, m, `raspi_mcp_audit_chain_status{status="ok"}`, 0)
	want(t, m, `raspi_mcp_audit_chain_status{status="tampered"}`, 1)
}

// oddBoard is the simulated board with an interface whose name is not
// UTF-8 and a file system listed twice, as a device can show them.
type oddBoard struct {
	sysinfo.Source
	base interface {
		sysinfo.CounterSource
		sysinfo.FilesystemSource
	}
}

func (b oddBoard) Counters(ctx context.Context) (sysinfo.Counters, error) {
	c, err := b.base.Counters(ctx)
	c.Net = append(c.Net, sysinfo.NetCounters{Name: "wlan\xff", RxBytes: 7})
	return c, err
}

func (b oddBoard) Filesystems(ctx context.Context) ([]sysinfo.Filesystem, error) {
	fss, err := b.base.Filesystems(ctx)
	if len(fss) > 0 {
		fss = append(fss, fss[0])
	}
	return fss, err
}

// A sample the format cannot carry is left out and the rest is served,
// and the agent does not panic over a device's odd names.
func TestMetricsSkipBadSamples(t *testing.T) {
	r := newSimRig(t, nil)
	base, ok := r.a.sys.(interface {
		sysinfo.CounterSource
		sysinfo.FilesystemSource
	})
	if !ok {
		t.Fatal("the simulated board has no counters or mounts")
	}
	r.a.sys = oddBoard{Source: r.a.sys, base: base}
	body := getMetrics(t, r.a)
	if bytes.Contains(body, []byte("wlan\xff")) {
		t.Fatal("an interface name that is not UTF-8 was served")
	}
	m := samples(t, body) // which also fails on a repeated sample
	want(t, m, `raspi_reading_ok{source="counters"}`, 1)
	want(t, m, `raspi_mcp_denials_total`, 0)
	if _, ok := m[`raspi_filesystem_size_bytes{device="/dev/mmcblk0p2",fstype="ext4",mountpoint="/"}`]; !ok {
		t.Fatal("the root file system is missing")
	}
}

// A scraper that asks for OpenMetrics (as Prometheus does) gets it, with
// the format's closing line.
func TestMetricsOpenMetrics(t *testing.T) {
	r := newSimRig(t, nil)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
	rec := httptest.NewRecorder()
	r.a.MetricsHandler().ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("status %d, Content-Type %q", rec.Code, ct)
	}
	if !bytes.HasSuffix(rec.Body.Bytes(), []byte("# EOF\n")) || !bytes.Contains(rec.Body.Bytes(), []byte("\n# TYPE raspi_mcp_denials counter\nraspi_mcp_denials_total 0.0\n")) {
		t.Fatalf("not OpenMetrics with the agent's metrics:\n%s", rec.Body)
	}
}

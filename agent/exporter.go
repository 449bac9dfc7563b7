package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"io/fs"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/agent/upstream"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

// The agent exports Prometheus metrics at /metrics (served by the HTTP
// endpoint, which decides who may scrape). Owners with several Pis already
// run Prometheus and Grafana, so the fleet view belongs there.
//
// The agent reads the values; Prometheus's own client library,
// client_golang, writes them (internal/promexp): the format, content
// negotiation (OpenMetrics for a Prometheus that asks for it) and the
// registry's consistency checks are the library's. The library and the
// protobuf runtime it brings cost 3.7 MB of the stripped armv6 binary and
// about 3 MiB of idle memory, which every owner would pay though only those
// who scrape use it, so it runs in a small child process,
// raspi-mcp-exporter, started at the first scrape (scrape.Process; the
// renderer is an Option, and the tests render in process).
// VictoriaMetrics/metrics is far smaller but writes HELP lines without
// text, which `promtool check metrics` rejects.
//
// Device values are read at scrape time from the same sources the tools
// read (sysinfo's health snapshot and kernel counters), so a scrape never
// shows something older than the scrape. Network and disk traffic are
// exported as the kernel's cumulative counters (*_total) for PromQL's
// rate() to turn into rates over whatever window a dashboard wants, rather
// than as rates over an interval the exporter would have to choose.
//
// The agent's own counters sit on every call's path, so they are atomics
// that live on the tool (calls by decision) or in a fixed array (errors by
// code): counting a call takes no lock, no map lookup and no allocation.
// A scrape turns them into points.

// exporter is what the agent keeps for /metrics.
type exporter struct {
	errors  [len(exportedCodes) + 1]atomic.Uint64 // by exportedCodes index; the last counts any other code
	handler http.Handler                          // serves /metrics (newMetricsHandler)
	render  scrape.Renderer                       // writes the page: Options.MetricsRenderer
	table   []scrape.Family                       // families, as the renderer takes them
	failing atomic.Bool                           // the last scrape failed to render; logged once until one works
	gzips   sync.Pool                             // *gzip.Writer: one costs 800 KB to make, so scrapes reuse them
}

// exportedCodes are the error codes a call can end with, in the order of
// exporter.errors. The vocabulary is fixed (errors.go), so a fixed array
// counts them without a map.
var exportedCodes = [...]string{CodeInvalidArgument, CodePermissionDenied, CodeUnauthenticated, CodeNotFound,
	CodeFailedPrecondition, CodeResourceExhausted, CodeUnavailable, CodeInternal}

func codeIndex(code string) int {
	for i, c := range exportedCodes {
		if c == code {
			return i
		}
	}
	return len(exportedCodes)
}

// count records the error code of one finished call that failed (the
// pipeline counts the tool's calls by decision). It runs on every call.
func (a *Agent) count(_ *tool.Tool, _ string, e *tool.Error) {
	if e != nil {
		a.exp.errors[codeIndex(e.Code)].Add(1)
	}
}

// scrapeTimeout bounds how long reading the device may take for one
// scrape, and renderTimeout how long the renderer may take for the page:
// a scraper gives up after its own timeout (10 s by default), and a stuck
// read or renderer must not pile up scrapes behind it.
const (
	scrapeTimeout = 10 * time.Second
	renderTimeout = 10 * time.Second
)

// MetricsHandler serves the agent's metrics in the Prometheus text format,
// or OpenMetrics to a scraper that asks for it. It does no authentication:
// whoever mounts it decides who may scrape.
func (a *Agent) MetricsHandler() http.Handler { return a.exp.handler }

// newMetricsHandler sets up /metrics with the renderer r; nil serves 503.
func (a *Agent) newMetricsHandler(r scrape.Renderer) http.Handler {
	if r == nil {
		r = scrape.Unavailable("metrics: this agent was started without a renderer")
	}
	a.exp.render = r
	a.exp.table = make([]scrape.Family, len(families))
	for i, f := range families {
		a.exp.table[i] = scrape.Family{Name: f.name, Type: f.typ, Help: f.help, Labels: f.labels}
	}
	return http.HandlerFunc(a.serveMetrics)
}

// serveMetrics answers GET and HEAD with a fresh scrape. A page that cannot
// be rendered (the exporter binary missing, its process failing) is a 503
// with the reason in one line, logged when it starts failing and not again
// until a scrape works: Prometheus marks the target down and retries.
func (a *Agent) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "metrics: method "+r.Method+" not allowed; scrape with GET", http.StatusMethodNotAllowed)
		return
	}
	s := a.collect(r.Context())
	ctx, cancel := context.WithTimeout(r.Context(), renderTimeout)
	page, err := a.exp.render.Render(ctx, r.Header.Get("Accept"), s)
	cancel()
	if err != nil {
		reason := strings.Join(strings.Fields(err.Error()), " ")
		if !a.exp.failing.Swap(true) {
			a.log.Warn("metrics: cannot render /metrics; scrapes answer 503 until it works again", "err", reason)
		}
		http.Error(w, reason, http.StatusServiceUnavailable)
		return
	}
	if a.exp.failing.Swap(false) {
		a.log.Info("metrics: /metrics renders again")
	}
	for _, p := range page.Problems {
		a.log.Warn("metrics: serving", "err", p)
	}
	body := page.Body
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = a.exp.gzip(body)
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Type", page.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	_, _ = w.Write(body)
}

// gzip compresses a page at gzip's fastest level: a Pi Zero's CPU is
// scarcer than the LAN's bytes, and a page of text still shrinks to a
// fifth or less.
func (x *exporter) gzip(body []byte) []byte {
	var zb bytes.Buffer
	zb.Grow(len(body) / 3)
	zw, _ := x.gzips.Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&zb, gzip.BestSpeed) // a valid level: no error
	} else {
		zw.Reset(&zb)
	}
	_, _ = zw.Write(body) // a bytes.Buffer does not fail
	_ = zw.Close()
	x.gzips.Put(zw)
	return zb.Bytes()
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip, as
// Prometheus's always does: a gzip entry whose q is not 0.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(strings.TrimSpace(params), " ", ""), "q=")
		if !ok {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}

// family is one metric family the agent exports; families holds them all,
// so the renderer registers every one and the tests can check the
// dashboard against their names.
type family int

const (
	famReadingOK family = iota
	famTemperature
	famThrottled
	famCPUUsage
	famCPUFreq
	famLoad1
	famLoad5
	famLoad15
	famMemTotal
	famMemUsed
	famMemAvailable
	famSwapTotal
	famSwapUsed
	famUptime
	famFSSize
	famFSUsed
	famNetRxBytes
	famNetTxBytes
	famNetRxPackets
	famNetTxPackets
	famNetRxErrors
	famNetTxErrors
	famNetRxDrops
	famNetTxDrops
	famDiskReadBytes
	famDiskWrittenBytes
	famDiskReads
	famDiskWrites
	famDiskIOTime
	famDiskIONow
	famClockSync
	famInfo
	famStartTime
	famToolCalls
	famDenials
	famRefused
	famToolErrors
	famAuditRecords
	famAuditDenied
	famAuditErrors
	famChainStatus
	famHelperUp
	famUpstreamUp
	famUpstreamLatency
	famSamplerLag
	famSamplerBuffered
	famSamplerFlushOK
	famDatabaseSize
	numFamilies
)

const (
	gauge   = scrape.Gauge
	counter = scrape.Counter
)

var (
	fsLabels   = []string{"mountpoint", "device", "fstype"}
	netLabels  = []string{"interface"}
	diskLabels = []string{"device"}
)

var families = [numFamilies]struct {
	name   string
	typ    scrape.ValueType
	help   string
	labels []string
}{
	famReadingOK:    {"raspi_reading_ok", gauge, "1 when the agent could read this source of device metrics at this scrape, 0 when its metrics are missing (see the agent log).", []string{"source"}},
	famTemperature:  {"raspi_temperature_celsius", gauge, "SoC temperature in degrees Celsius.", []string{"source"}},
	famThrottled:    {"raspi_throttled", gauge, "Firmware throttling flags (get_throttled): 1 when the flag is set now (when=\"now\") or was set at any time since boot (when=\"since_boot\").", []string{"flag", "when"}},
	famCPUUsage:     {"raspi_cpu_usage_ratio", gauge, "Share of CPU time in use over all cores since the previous reading, 0 to 1.", nil},
	famCPUFreq:      {"raspi_cpu_frequency_hertz", gauge, "Current frequency of CPU 0 in hertz.", nil},
	famLoad1:        {"raspi_load1", gauge, "Load average over 1 minute.", nil},
	famLoad5:        {"raspi_load5", gauge, "Load average over 5 minutes.", nil},
	famLoad15:       {"raspi_load15", gauge, "Load average over 15 minutes.", nil},
	famMemTotal:     {"raspi_memory_total_bytes", gauge, "Physical memory in bytes.", nil},
	famMemUsed:      {"raspi_memory_used_bytes", gauge, "Memory in use in bytes: total minus available.", nil},
	famMemAvailable: {"raspi_memory_available_bytes", gauge, "Memory available to new programs without swapping, in bytes.", nil},
	famSwapTotal:    {"raspi_swap_total_bytes", gauge, "Swap space in bytes.", nil},
	famSwapUsed:     {"raspi_swap_used_bytes", gauge, "Swap in use in bytes.", nil},
	famUptime:       {"raspi_uptime_seconds", gauge, "Seconds since the board booted.", nil},
	famFSSize:       {"raspi_filesystem_size_bytes", gauge, "Size of the mounted file system in bytes, as df counts it.", fsLabels},
	famFSUsed:       {"raspi_filesystem_used_bytes", gauge, "Bytes in use on the mounted file system, as df counts them.", fsLabels},

	famNetRxBytes:   {"raspi_network_receive_bytes_total", counter, "Bytes received by the interface.", netLabels},
	famNetTxBytes:   {"raspi_network_transmit_bytes_total", counter, "Bytes sent by the interface.", netLabels},
	famNetRxPackets: {"raspi_network_receive_packets_total", counter, "Packets received by the interface.", netLabels},
	famNetTxPackets: {"raspi_network_transmit_packets_total", counter, "Packets sent by the interface.", netLabels},
	famNetRxErrors:  {"raspi_network_receive_errors_total", counter, "Receive errors of the interface.", netLabels},
	famNetTxErrors:  {"raspi_network_transmit_errors_total", counter, "Transmit errors of the interface.", netLabels},
	famNetRxDrops:   {"raspi_network_receive_drops_total", counter, "Received packets dropped, including those the NIC had no room for.", netLabels},
	famNetTxDrops:   {"raspi_network_transmit_drops_total", counter, "Packets dropped before sending.", netLabels},

	famDiskReadBytes:    {"raspi_disk_read_bytes_total", counter, "Bytes read from the whole disk.", diskLabels},
	famDiskWrittenBytes: {"raspi_disk_written_bytes_total", counter, "Bytes written to the whole disk.", diskLabels},
	famDiskReads:        {"raspi_disk_reads_completed_total", counter, "Reads completed by the disk.", diskLabels},
	famDiskWrites:       {"raspi_disk_writes_completed_total", counter, "Writes completed by the disk.", diskLabels},
	famDiskIOTime:       {"raspi_disk_io_time_seconds_total", counter, "Seconds the disk spent with I/O in flight; its rate is the share of time busy.", diskLabels},
	famDiskIONow:        {"raspi_disk_io_now", gauge, "I/Os in flight on the disk at the scrape.", diskLabels},
	famClockSync:        {"raspi_clock_synchronized", gauge, "1 when an NTP client has synchronised the clock (a Pi has no battery clock), else 0.", nil},

	famInfo:            {"raspi_mcp_info", gauge, "Always 1; the labels say which raspi-mcp runs and in which mode (device or sim).", []string{"version", "build", "mode"}},
	famStartTime:       {"raspi_mcp_start_time_seconds", gauge, "When the agent started, in seconds since the Unix epoch.", nil},
	famToolCalls:       {"raspi_mcp_tool_calls_total", counter, "Tool calls since the agent started, by tool and decision: allow (the call ran), deny (refused by validation, policy or an allowlist), declined (the person said no when asked).", []string{"tool", "decision"}},
	famDenials:         {"raspi_mcp_denials_total", counter, "Tool calls denied or declined since the agent started, all tools together.", nil},
	famRefused:         {"raspi_mcp_connections_refused_total", counter, "Connections refused before any call since the agent started, because the caller has no role.", nil},
	famToolErrors:      {"raspi_mcp_tool_errors_total", counter, "Tool calls that ended in an error since the agent started, by error code.", []string{"code"}},
	famAuditRecords:    {"raspi_mcp_audit_records", gauge, "Records in the audit trail (retention removes old ones).", nil},
	famAuditDenied:     {"raspi_mcp_audit_denied_records", gauge, "Records in the audit trail of calls denied or declined.", nil},
	famAuditErrors:     {"raspi_mcp_audit_error_records", gauge, "Records in the audit trail of calls that ended in an error.", nil},
	famChainStatus:     {"raspi_mcp_audit_chain_status", gauge, "1 for the audit hash chain's state as verified at the agent's start: ok, or tampered (raspi-mcp audit verify shows what).", []string{"status"}},
	famHelperUp:        {"raspi_mcp_helper_up", gauge, "1 when the root helper answered the agent's last look (every few seconds), else 0.", nil},
	famUpstreamUp:      {"raspi_mcp_upstream_up", gauge, "1 when the mounted MCP server ([[upstream]]) is connected, else 0.", []string{"upstream"}},
	famUpstreamLatency: {"raspi_mcp_upstream_latency_seconds", gauge, "Median latency of the upstream's last answered calls (up to 64), in seconds; absent before the first.", []string{"upstream"}},
	famSamplerLag:      {"raspi_mcp_sampler_lag_seconds", gauge, "How long a running sampling job's newest sample is overdue, in seconds: 0 on time, growing when the job has stopped sampling.", []string{"job"}},
	famSamplerBuffered: {"raspi_mcp_sampler_buffered_samples", gauge, "Samples taken but not yet written to the database (written once per flush interval to spare the SD card).", nil},
	famSamplerFlushOK:  {"raspi_mcp_sampler_flush_ok", gauge, "1 when the last write of samples to the database succeeded, else 0.", nil},
	famDatabaseSize:    {"raspi_mcp_database_size_bytes", gauge, "Size of the agent's database file in bytes (bbolt reuses freed pages but never shrinks the file).", nil},
}

// collect reads the device and the agent's counters into one scrape's
// snapshot. A source that fails leaves its families out and says so in
// raspi_reading_ok, rather than failing the whole scrape: Prometheus would
// then lose the agent's own metrics too.
func (a *Agent) collect(ctx context.Context) *scrape.Snapshot {
	ctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
	defer cancel()
	s := &scrape.Snapshot{Families: a.exp.table, Points: make([]scrape.Point, 0, 256)}
	if runtime.GOOS == "linux" {
		// The agent process's own CPU time, memory and file descriptors,
		// as raspi_mcp_process_*: a leak on a 512 MB Pi shows on the
		// dashboard. The renderer reads them from /proc/PID, which names
		// the agent even from the exporter's process; elsewhere the
		// library reads only the process it runs in, which is not ours.
		s.ProcessPID, s.ProcessNamespace = os.Getpid(), "raspi_mcp"
	}
	e := &emitter{s: s}
	h, herr := a.sys.Health(ctx)
	if herr != nil {
		a.log.Warn("metrics: reading health", "err", herr)
	}
	var ctr sysinfo.Counters
	cs, hasCtr := a.sys.(sysinfo.CounterSource)
	var cerr error
	if hasCtr {
		if ctr, cerr = cs.Counters(ctx); cerr != nil {
			a.log.Warn("metrics: reading network and disk counters", "err", cerr)
		}
	}
	e.bool(famReadingOK, herr == nil, "health")
	if hasCtr {
		e.bool(famReadingOK, cerr == nil, "counters")
	}
	if herr == nil {
		e.health(h)
	}
	if hasCtr && cerr == nil {
		e.counters(ctr)
	}
	a.filesystems(ctx, e, h, herr == nil)
	if synced, ok := a.clockSynced(); ok {
		e.bool(famClockSync, synced)
	}
	a.collectOwn(e)
	return s
}

// emitter adds the samples of one scrape to its snapshot.
type emitter struct{ s *scrape.Snapshot }

// val adds one sample. Label values come from the device (interface and
// mount names) and go to the renderer as they are: one the format cannot
// carry (not UTF-8) is the renderer's to leave out and report.
func (e *emitter) val(f family, v float64, labels ...string) {
	e.s.Points = append(e.s.Points, scrape.Point{Family: int(f), Value: v, Labels: labels})
}

// bool adds 1 for true and 0 for false, the format's way to say yes or no.
func (e *emitter) bool(f family, v bool, labels ...string) {
	var n float64
	if v {
		n = 1
	}
	e.val(f, n, labels...)
}

func (e *emitter) uint(f family, v uint64, labels ...string) { e.val(f, float64(v), labels...) }

func (e *emitter) health(h sysinfo.Health) {
	if h.TemperatureCelsius != nil {
		e.val(famTemperature, *h.TemperatureCelsius, h.TemperatureSource)
	}
	if t := h.Throttle; t != nil {
		for _, f := range [...]struct {
			name           string
			now, sinceBoot bool
		}{
			{"under_voltage", t.UnderVoltage, t.UnderVoltageOccurred},
			{"frequency_capped", t.FreqCapped, t.FreqCappedOccurred},
			{"throttled", t.Throttled, t.ThrottledOccurred},
			{"soft_temperature_limit", t.SoftTempLimit, t.SoftTempLimitOccurred},
		} {
			if t.UnderVoltageOnly && f.name != "under_voltage" {
				continue // unknown from this source, not clear
			}
			e.bool(famThrottled, f.now, f.name, "now")
			if !t.UnderVoltageOnly {
				e.bool(famThrottled, f.sinceBoot, f.name, "since_boot")
			}
		}
	}
	e.val(famCPUUsage, min(max(h.CPUUsagePercent/100, 0), 1))
	if h.CPUFreqMHz != nil {
		e.val(famCPUFreq, *h.CPUFreqMHz*1e6)
	}
	e.val(famLoad1, h.Load1)
	e.val(famLoad5, h.Load5)
	e.val(famLoad15, h.Load15)
	e.uint(famMemTotal, h.MemoryTotalBytes)
	e.uint(famMemUsed, h.MemoryUsedBytes)
	e.uint(famMemAvailable, h.MemoryAvailableBytes)
	e.uint(famSwapTotal, h.SwapTotalBytes)
	e.uint(famSwapUsed, h.SwapUsedBytes)
	e.uint(famUptime, h.UptimeSeconds)
}

// filesystems sends the use of each mounted block-device file system. A
// source that cannot list its mounts still has the root's, from the
// health snapshot.
func (a *Agent) filesystems(ctx context.Context, e *emitter, h sysinfo.Health, hok bool) {
	var fss []sysinfo.Filesystem
	if src, ok := a.sys.(sysinfo.FilesystemSource); ok {
		var err error
		if fss, err = src.Filesystems(ctx); err != nil {
			a.log.Warn("metrics: reading mounts", "err", err)
			fss = nil
		}
	}
	if fss == nil && hok {
		fss = []sysinfo.Filesystem{{Mountpoint: "/", TotalBytes: h.DiskTotalBytes, UsedBytes: h.DiskUsedBytes}}
	}
	for _, f := range fss {
		e.uint(famFSSize, f.TotalBytes, f.Mountpoint, f.Device, f.Type)
		e.uint(famFSUsed, f.UsedBytes, f.Mountpoint, f.Device, f.Type)
	}
}

// counters sends the kernel's cumulative network and disk counters.
// Values past 2^53 bytes lose their last digits as float64, the library's
// value type, which rate() does not notice.
func (e *emitter) counters(c sysinfo.Counters) {
	for i := range c.Net {
		n := &c.Net[i]
		e.uint(famNetRxBytes, n.RxBytes, n.Name)
		e.uint(famNetTxBytes, n.TxBytes, n.Name)
		e.uint(famNetRxPackets, n.RxPackets, n.Name)
		e.uint(famNetTxPackets, n.TxPackets, n.Name)
		e.uint(famNetRxErrors, n.RxErrors, n.Name)
		e.uint(famNetTxErrors, n.TxErrors, n.Name)
		e.uint(famNetRxDrops, n.RxDrops, n.Name)
		e.uint(famNetTxDrops, n.TxDrops, n.Name)
	}
	for i := range c.Disk {
		d := &c.Disk[i]
		e.uint(famDiskReadBytes, d.SectorsRead*512, d.Name)
		e.uint(famDiskWrittenBytes, d.SectorsWritten*512, d.Name)
		e.uint(famDiskReads, d.ReadsCompleted, d.Name)
		e.uint(famDiskWrites, d.WritesCompleted, d.Name)
		e.val(famDiskIOTime, float64(d.IOTicksMs)/1000, d.Name)
		e.uint(famDiskIONow, d.InFlight, d.Name)
	}
}

// clockSynced reads whether an NTP client has synchronised the clock, as
// the self-test does; ok is false when it cannot tell, and in laptop mode,
// whose simulated board has no time service.
func (a *Agent) clockSynced() (synced, ok bool) {
	if a.mode == "sim" {
		return false, false // and its rendered file tree is costly to walk
	}
	if _, err := fs.Stat(a.root, "run/systemd/timesync/synchronized"); err == nil {
		return true, true
	}
	s, err := kernelClockSynced()
	return s, err == nil
}

// collectOwn sends raspi-mcp's own metrics.
func (a *Agent) collectOwn(e *emitter) {
	e.val(famInfo, 1, a.version, a.build, a.mode)
	e.uint(famStartTime, uint64(a.started.Unix()))

	var denials uint64
	for _, t := range a.tools.All() {
		st := t.Stats()
		al, de, dc := st.Allowed, st.Denied, st.Declined
		denials += de + dc
		if al+de+dc == 0 {
			continue // a tool never called adds nothing but lines
		}
		e.uint(famToolCalls, al, t.ID(), "allow")
		e.uint(famToolCalls, de, t.ID(), "deny")
		e.uint(famToolCalls, dc, t.ID(), "declined")
	}
	e.uint(famDenials, denials)
	e.uint(famRefused, a.doors.RefusedConns())
	for i, c := range exportedCodes {
		e.uint(famToolErrors, a.exp.errors[i].Load(), c)
	}
	if n := a.exp.errors[len(exportedCodes)].Load(); n > 0 {
		e.uint(famToolErrors, n, "other")
	}

	if total, denied, errored, _, err := a.store.AuditCounts(); err != nil {
		a.log.Warn("metrics: audit counts", "err", err)
	} else {
		e.uint(famAuditRecords, uint64(total))
		e.uint(famAuditDenied, uint64(denied))
		e.uint(famAuditErrors, uint64(errored))
	}
	_, _, findings := a.witness.status()
	e.bool(famChainStatus, len(findings) == 0, "ok")
	e.bool(famChainStatus, len(findings) > 0, "tampered")

	if up, known := a.watch.helper(); known {
		e.bool(famHelperUp, up)
	}
	for _, d := range a.lan.domains {
		st := d.client.Status()
		e.bool(famUpstreamUp, st.State == upstream.StateUp, d.cfg.Name)
		if st.P50Latency > 0 {
			e.val(famUpstreamLatency, st.P50Latency.Seconds(), d.cfg.Name)
		}
	}

	a.collectSampler(e)
	if n, err := a.store.Size(); err != nil {
		a.log.Warn("metrics: database size", "err", err)
	} else {
		e.uint(famDatabaseSize, uint64(n))
	}
}

// collectSampler sends how far each running sampling job is behind: the
// age of its newest sample beyond one interval. 0 is on time; a growing
// value is a job that stopped sampling.
func (a *Agent) collectSampler(e *emitter) {
	h, err := a.sampler.Health()
	if err != nil {
		a.log.Warn("metrics: sampling jobs", "err", err)
		return
	}
	for _, j := range h.Jobs {
		if j.Measured {
			e.val(famSamplerLag, j.Lag.Seconds(), j.ID)
		}
	}
	e.uint(famSamplerBuffered, uint64(h.Buffered))
	e.bool(famSamplerFlushOK, h.FlushOK)
}

package agent

import (
	"context"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/upstream"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/promtext"
)

// The agent exports Prometheus metrics at /metrics (served by the HTTP
// endpoint, which decides who may scrape). Owners with several Pis already
// run Prometheus and Grafana, so the fleet view belongs there.
//
// Device values are read at scrape time from the same sources the tools
// read (sysinfo's health snapshot and kernel counters), so a scrape never
// shows something older than the scrape. Network and disk traffic are
// exported as the kernel's cumulative counters (*_total) for PromQL's rate()
// to turn into rates over whatever window a dashboard wants, rather than as
// rates over an interval the exporter would have to choose.
//
// The agent's own counters sit on every call's path, so they are atomics
// that live on the tool (calls by decision) or in a fixed array (errors by
// code): counting a call takes no lock, no map lookup and no allocation.
// The text format is written by internal/promtext, which says why no metrics
// library is used.

// exporter is what the agent keeps for /metrics.
type exporter struct {
	errors  [len(exportedCodes) + 1]atomic.Uint64 // by exportedCodes index; the last counts any other code
	refused atomic.Uint64                         // connections refused before any call: the principal had no role
	bufs    sync.Pool                             // *promtext.Writer, so a scrape reuses the last one's buffer
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

// count records one finished call: its decision, and its error code if it
// failed. It runs on every call.
func (a *Agent) count(t *tool, decision string, e *ToolError) {
	switch decision {
	case store.DecisionAllow:
		t.allowed.Add(1)
	case store.DecisionDeclined:
		t.declined.Add(1)
	default:
		t.denied.Add(1)
	}
	if e != nil {
		a.exp.errors[codeIndex(e.Code)].Add(1)
	}
}

// scrapeTimeout bounds how long reading the device may take for one scrape
// when the scraper sets no deadline of its own.
const scrapeTimeout = 10 * time.Second

// MetricsHandler serves the Prometheus text format. It does no
// authentication: whoever mounts it decides who may scrape.
func (a *Agent) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "metrics: method "+r.Method+" not allowed; scrape with GET", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
		defer cancel()
		pw, _ := a.exp.bufs.Get().(*promtext.Writer)
		if pw == nil {
			pw = &promtext.Writer{}
		}
		pw.Reset()
		a.writeMetrics(ctx, pw)
		w.Header().Set("Content-Type", promtext.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(pw.Bytes())))
		if r.Method == http.MethodGet {
			_, _ = w.Write(pw.Bytes())
		}
		a.exp.bufs.Put(pw)
	})
}

// writeMetrics writes every family. A source that fails leaves its
// families out and says so in raspi_reading_ok, rather than failing the
// whole scrape: Prometheus would then lose the agent's own metrics too.
func (a *Agent) writeMetrics(ctx context.Context, w *promtext.Writer) {
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
	w.Family("raspi_reading_ok", promtext.Gauge, "1 when the agent could read this source of device metrics at this scrape, 0 when its metrics are missing (see the agent log).")
	w.Bool("raspi_reading_ok", herr == nil, "source", "health")
	if hasCtr {
		w.Bool("raspi_reading_ok", cerr == nil, "source", "counters")
	}
	if herr == nil {
		writeHealth(w, h)
	}
	if hasCtr && cerr == nil {
		writeCounters(w, ctr)
	}
	a.writeFilesystems(ctx, w, h, herr == nil)
	if synced, ok := a.clockSynced(); ok {
		w.Family("raspi_clock_synchronized", promtext.Gauge, "1 when an NTP client has synchronised the clock (a Pi has no battery clock), else 0.")
		w.Bool("raspi_clock_synchronized", synced)
	}
	a.writeOwn(w)
}

func writeHealth(w *promtext.Writer, h sysinfo.Health) {
	if h.TemperatureCelsius != nil {
		w.Family("raspi_temperature_celsius", promtext.Gauge, "SoC temperature in degrees Celsius.")
		w.Float("raspi_temperature_celsius", *h.TemperatureCelsius, "source", h.TemperatureSource)
	}
	if t := h.Throttle; t != nil {
		w.Family("raspi_throttled", promtext.Gauge, "Firmware throttling flags (get_throttled): 1 when the flag is set now (when=\"now\") or was set at any time since boot (when=\"since_boot\").")
		for _, f := range [...]struct {
			name           string
			now, sinceBoot bool
		}{
			{"under_voltage", t.UnderVoltage, t.UnderVoltageOccurred},
			{"frequency_capped", t.FreqCapped, t.FreqCappedOccurred},
			{"throttled", t.Throttled, t.ThrottledOccurred},
			{"soft_temperature_limit", t.SoftTempLimit, t.SoftTempLimitOccurred},
		} {
			w.Bool("raspi_throttled", f.now, "flag", f.name, "when", "now")
			w.Bool("raspi_throttled", f.sinceBoot, "flag", f.name, "when", "since_boot")
		}
	}
	w.Family("raspi_cpu_usage_ratio", promtext.Gauge, "Share of CPU time in use over all cores since the previous reading, 0 to 1.")
	w.Float("raspi_cpu_usage_ratio", min(max(h.CPUUsagePercent/100, 0), 1))
	if h.CPUFreqMHz != nil {
		w.Family("raspi_cpu_frequency_hertz", promtext.Gauge, "Current frequency of CPU 0 in hertz.")
		w.Float("raspi_cpu_frequency_hertz", *h.CPUFreqMHz*1e6)
	}
	w.Family("raspi_load1", promtext.Gauge, "Load average over 1 minute.")
	w.Float("raspi_load1", h.Load1)
	w.Family("raspi_load5", promtext.Gauge, "Load average over 5 minutes.")
	w.Float("raspi_load5", h.Load5)
	w.Family("raspi_load15", promtext.Gauge, "Load average over 15 minutes.")
	w.Float("raspi_load15", h.Load15)
	w.Family("raspi_memory_total_bytes", promtext.Gauge, "Physical memory in bytes.")
	w.Uint("raspi_memory_total_bytes", h.MemoryTotalBytes)
	w.Family("raspi_memory_used_bytes", promtext.Gauge, "Memory in use in bytes: total minus available.")
	w.Uint("raspi_memory_used_bytes", h.MemoryUsedBytes)
	w.Family("raspi_memory_available_bytes", promtext.Gauge, "Memory available to new programs without swapping, in bytes.")
	w.Uint("raspi_memory_available_bytes", h.MemoryAvailableBytes)
	w.Family("raspi_swap_total_bytes", promtext.Gauge, "Swap space in bytes.")
	w.Uint("raspi_swap_total_bytes", h.SwapTotalBytes)
	w.Family("raspi_swap_used_bytes", promtext.Gauge, "Swap in use in bytes.")
	w.Uint("raspi_swap_used_bytes", h.SwapUsedBytes)
	w.Family("raspi_uptime_seconds", promtext.Gauge, "Seconds since the board booted.")
	w.Uint("raspi_uptime_seconds", h.UptimeSeconds)
}

// writeFilesystems writes the use of each mounted block-device file
// system. A source that cannot list its mounts still has the root's, from
// the health snapshot.
func (a *Agent) writeFilesystems(ctx context.Context, w *promtext.Writer, h sysinfo.Health, hok bool) {
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
	if fss == nil {
		return
	}
	w.Family("raspi_filesystem_size_bytes", promtext.Gauge, "Size of the mounted file system in bytes, as df counts it.")
	for _, f := range fss {
		w.Uint("raspi_filesystem_size_bytes", f.TotalBytes, "mountpoint", f.Mountpoint, "device", f.Device, "fstype", f.Type)
	}
	w.Family("raspi_filesystem_used_bytes", promtext.Gauge, "Bytes in use on the mounted file system, as df counts them.")
	for _, f := range fss {
		w.Uint("raspi_filesystem_used_bytes", f.UsedBytes, "mountpoint", f.Mountpoint, "device", f.Device, "fstype", f.Type)
	}
}

// writeCounters writes the kernel's cumulative network and disk counters,
// one family at a time as the format wants.
func writeCounters(w *promtext.Writer, c sysinfo.Counters) {
	netFam := func(name, help string, v func(n *sysinfo.NetCounters) uint64) {
		w.Family(name, promtext.Counter, help)
		for i := range c.Net {
			w.Uint(name, v(&c.Net[i]), "interface", c.Net[i].Name)
		}
	}
	netFam("raspi_network_receive_bytes_total", "Bytes received by the interface.", func(n *sysinfo.NetCounters) uint64 { return n.RxBytes })
	netFam("raspi_network_transmit_bytes_total", "Bytes sent by the interface.", func(n *sysinfo.NetCounters) uint64 { return n.TxBytes })
	netFam("raspi_network_receive_packets_total", "Packets received by the interface.", func(n *sysinfo.NetCounters) uint64 { return n.RxPackets })
	netFam("raspi_network_transmit_packets_total", "Packets sent by the interface.", func(n *sysinfo.NetCounters) uint64 { return n.TxPackets })
	netFam("raspi_network_receive_errors_total", "Receive errors of the interface.", func(n *sysinfo.NetCounters) uint64 { return n.RxErrors })
	netFam("raspi_network_transmit_errors_total", "Transmit errors of the interface.", func(n *sysinfo.NetCounters) uint64 { return n.TxErrors })
	netFam("raspi_network_receive_drops_total", "Received packets dropped, including those the NIC had no room for.", func(n *sysinfo.NetCounters) uint64 { return n.RxDrops })
	netFam("raspi_network_transmit_drops_total", "Packets dropped before sending.", func(n *sysinfo.NetCounters) uint64 { return n.TxDrops })

	diskFam := func(name, help string, v func(d *sysinfo.DiskCounters) uint64) {
		w.Family(name, promtext.Counter, help)
		for i := range c.Disk {
			w.Uint(name, v(&c.Disk[i]), "device", c.Disk[i].Name)
		}
	}
	diskFam("raspi_disk_read_bytes_total", "Bytes read from the whole disk.", func(d *sysinfo.DiskCounters) uint64 { return d.SectorsRead * 512 })
	diskFam("raspi_disk_written_bytes_total", "Bytes written to the whole disk.", func(d *sysinfo.DiskCounters) uint64 { return d.SectorsWritten * 512 })
	diskFam("raspi_disk_reads_completed_total", "Reads completed by the disk.", func(d *sysinfo.DiskCounters) uint64 { return d.ReadsCompleted })
	diskFam("raspi_disk_writes_completed_total", "Writes completed by the disk.", func(d *sysinfo.DiskCounters) uint64 { return d.WritesCompleted })
	w.Family("raspi_disk_io_time_seconds_total", promtext.Counter, "Seconds the disk spent with I/O in flight; its rate is the share of time busy.")
	for _, d := range c.Disk {
		w.Float("raspi_disk_io_time_seconds_total", float64(d.IOTicksMs)/1000, "device", d.Name)
	}
	w.Family("raspi_disk_io_now", promtext.Gauge, "I/Os in flight on the disk at the scrape.")
	for _, d := range c.Disk {
		w.Uint("raspi_disk_io_now", d.InFlight, "device", d.Name)
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

// writeOwn writes raspi-mcp's own metrics.
func (a *Agent) writeOwn(w *promtext.Writer) {
	w.Family("raspi_mcp_info", promtext.Gauge, "Always 1; the labels say which raspi-mcp runs and in which mode (device or sim).")
	w.Uint("raspi_mcp_info", 1, "version", a.version, "build", a.build, "mode", a.mode)
	w.Family("raspi_mcp_start_time_seconds", promtext.Gauge, "When the agent started, in seconds since the Unix epoch.")
	w.Uint("raspi_mcp_start_time_seconds", uint64(a.started.Unix()))

	tools := a.tools.all()
	w.Family("raspi_mcp_tool_calls_total", promtext.Counter, "Tool calls since the agent started, by tool and decision: allow (the call ran), deny (refused by validation, policy or an allowlist), declined (the person said no when asked).")
	var denials uint64
	for _, t := range tools {
		al, de, dc := t.allowed.Load(), t.denied.Load(), t.declined.Load()
		denials += de + dc
		if al+de+dc == 0 {
			continue // a tool never called adds nothing but lines
		}
		w.Uint("raspi_mcp_tool_calls_total", al, "tool", t.id, "decision", "allow")
		w.Uint("raspi_mcp_tool_calls_total", de, "tool", t.id, "decision", "deny")
		w.Uint("raspi_mcp_tool_calls_total", dc, "tool", t.id, "decision", "declined")
	}
	w.Family("raspi_mcp_denials_total", promtext.Counter, "Tool calls denied or declined since the agent started, all tools together.")
	w.Uint("raspi_mcp_denials_total", denials)
	w.Family("raspi_mcp_connections_refused_total", promtext.Counter, "Connections refused before any call since the agent started, because the caller has no role.")
	w.Uint("raspi_mcp_connections_refused_total", a.exp.refused.Load())
	w.Family("raspi_mcp_tool_errors_total", promtext.Counter, "Tool calls that ended in an error since the agent started, by error code.")
	for i, c := range exportedCodes {
		w.Uint("raspi_mcp_tool_errors_total", a.exp.errors[i].Load(), "code", c)
	}
	if n := a.exp.errors[len(exportedCodes)].Load(); n > 0 {
		w.Uint("raspi_mcp_tool_errors_total", n, "code", "other")
	}

	if total, denied, errored, _, err := a.store.AuditCounts(); err != nil {
		a.log.Warn("metrics: audit counts", "err", err)
	} else {
		w.Family("raspi_mcp_audit_records", promtext.Gauge, "Records in the audit trail (retention removes old ones).")
		w.Uint("raspi_mcp_audit_records", uint64(total))
		w.Family("raspi_mcp_audit_denied_records", promtext.Gauge, "Records in the audit trail of calls denied or declined.")
		w.Uint("raspi_mcp_audit_denied_records", uint64(denied))
		w.Family("raspi_mcp_audit_error_records", promtext.Gauge, "Records in the audit trail of calls that ended in an error.")
		w.Uint("raspi_mcp_audit_error_records", uint64(errored))
	}
	_, _, findings := a.witness.status()
	w.Family("raspi_mcp_audit_chain_status", promtext.Gauge, "1 for the audit hash chain's state as verified at the agent's start: ok, or tampered (raspi-mcp audit verify shows what).")
	w.Bool("raspi_mcp_audit_chain_status", len(findings) == 0, "status", "ok")
	w.Bool("raspi_mcp_audit_chain_status", len(findings) > 0, "status", "tampered")

	a.watch.mu.Lock()
	helperUp := a.watch.helperUp
	a.watch.mu.Unlock()
	if helperUp != nil {
		w.Family("raspi_mcp_helper_up", promtext.Gauge, "1 when the root helper answered the agent's last look (every few seconds), else 0.")
		w.Bool("raspi_mcp_helper_up", *helperUp)
	}
	if len(a.lan) > 0 {
		w.Family("raspi_mcp_upstream_up", promtext.Gauge, "1 when the mounted MCP server ([[upstream]]) is connected, else 0.")
		sts := make([]upstream.Status, len(a.lan))
		for i, d := range a.lan {
			sts[i] = d.client.Status()
			w.Bool("raspi_mcp_upstream_up", sts[i].State == upstream.StateUp, "upstream", d.cfg.Name)
		}
		w.Family("raspi_mcp_upstream_latency_seconds", promtext.Gauge, "Median latency of the upstream's last answered calls (up to 64), in seconds; absent before the first.")
		for i, d := range a.lan {
			if sts[i].P50Latency > 0 {
				w.Float("raspi_mcp_upstream_latency_seconds", sts[i].P50Latency.Seconds(), "upstream", d.cfg.Name)
			}
		}
	}

	a.writeSampler(w)
	if n, err := a.store.Size(); err != nil {
		a.log.Warn("metrics: database size", "err", err)
	} else {
		w.Family("raspi_mcp_database_size_bytes", promtext.Gauge, "Size of the agent's database file in bytes (bbolt reuses freed pages but never shrinks the file).")
		w.Uint("raspi_mcp_database_size_bytes", uint64(n))
	}
}

// writeSampler writes how far each running sampling job is behind: the
// age of its newest sample beyond one interval. 0 is on time; a growing
// value is a job that stopped sampling.
func (a *Agent) writeSampler(w *promtext.Writer) {
	s := a.sampler
	jobs, err := s.db.ListJobs()
	if err != nil {
		a.log.Warn("metrics: sampling jobs", "err", err)
		return
	}
	now := s.now()
	s.mu.Lock()
	buffered := 0
	for _, b := range s.buf {
		buffered += len(b)
	}
	flushOK := s.flushErr == nil
	lags := make([]float64, len(jobs))
	for i, j := range jobs {
		lags[i] = -1
		_, running := s.running[j.ID]
		if last, ok := s.last[j.ID]; ok && running && j.Status == "running" {
			lags[i] = max(now.Sub(last).Seconds()-float64(j.IntervalSeconds)*s.unit.Seconds(), 0)
		}
	}
	s.mu.Unlock()
	w.Family("raspi_mcp_sampler_lag_seconds", promtext.Gauge, "How long a running sampling job's newest sample is overdue, in seconds: 0 on time, growing when the job has stopped sampling.")
	for i, j := range jobs {
		if lags[i] >= 0 {
			w.Float("raspi_mcp_sampler_lag_seconds", lags[i], "job", j.ID)
		}
	}
	w.Family("raspi_mcp_sampler_buffered_samples", promtext.Gauge, "Samples taken but not yet written to the database (written once per flush interval to spare the SD card).")
	w.Uint("raspi_mcp_sampler_buffered_samples", uint64(buffered))
	w.Family("raspi_mcp_sampler_flush_ok", promtext.Gauge, "1 when the last write of samples to the database succeeded, else 0.")
	w.Bool("raspi_mcp_sampler_flush_ok", flushOK)
}

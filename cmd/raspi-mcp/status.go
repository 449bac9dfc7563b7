package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// statusWidth is the widest status prints, whatever the terminal: a
// console, an ssh window and a README all show 80 columns.
const statusWidth = 80

func cmdStatus(args []string) error {
	c := newCommand("status", "[--dir DIR] [--json] [--check]", "the device (temperature, throttling, CPU, memory, disk, failed units, pending power actions), then the agent, helper, audit and recent problems; exit 0 when all is up, 1 agent down, 2 helper down (with --check: a check failed)")
	var w where
	w.flags(c.fs)
	asJSON := c.fs.Bool("json", false, "machine-readable output")
	check := c.fs.Bool("check", false, "run the live device's self-test (selftest_run): pass/warn/fail per check, with the fix for each failure")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("status takes no arguments")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // --check waits for every check's own bound
	defer cancel()
	socket := w.agentSocket()
	s, err := session(ctx, &w)
	if err != nil {
		if *asJSON {
			b, _ := json.MarshalIndent(map[string]any{"agent": map[string]any{"running": false, "socket": socket, "error": err.Error()}}, "", "  ")
			fmt.Println(string(b))
			return &exitError{code: 1}
		}
		return err
	}
	defer s.Close()
	if *check {
		return statusCheck(ctx, s, os.Stdout, *asJSON)
	}
	v := fetchStatus(ctx, s, time.Now())
	v.socket = socket
	if *asJSON {
		out := map[string]any{"agent": map[string]any{"running": true, "socket": socket}, "device": v.deviceJSON()}
		if v.server != nil {
			out["status"] = v.server
			if v.server.HTTP != nil {
				if fp, ok := opensslFingerprint(v.server.HTTP.Fingerprint); ok {
					out["tls_fingerprint_openssl"] = fp
				}
			}
		} else {
			out["status_error"] = v.serverErr
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Println(string(b))
	} else {
		o := stdoutOutput(statusWidth)
		o.width = min(o.width, statusWidth)
		renderStatus(os.Stdout, v, o, time.Local)
	}
	switch {
	case v.server == nil:
		return &exitError{code: 1}
	case !v.server.Helper.Reachable:
		return &exitError{code: 2}
	}
	return nil
}

// basicInfo is what status shows of system_get_basic_info.
type basicInfo struct {
	Hostname      string `json:"hostname"`
	Model         string `json:"model"`
	OSName        string `json:"os_name"`
	OSVersion     string `json:"os_version"`
	KernelVersion string `json:"kernel_version"`
	CPUCores      int    `json:"cpu_cores"`
	UptimeSeconds int64  `json:"uptime_seconds"`

	Raw json.RawMessage `json:"-"` // the whole answer, for --json
}

// healthSnap is what status shows of system_get_health_snapshot.
type healthSnap struct {
	CPUUsage      float64         `json:"cpu_usage_percent"`
	CPUFreqMHz    *float64        `json:"cpu_frequency_mhz"`
	Temperature   *float64        `json:"cpu_temperature_celsius"`
	Load          []float64       `json:"load_average"`
	MemTotal      float64         `json:"memory_total_bytes"`
	MemAvailable  float64         `json:"memory_available_bytes"`
	DiskTotal     float64         `json:"disk_total_bytes"`
	DiskUsed      float64         `json:"disk_used_bytes"`
	ThrottleNow   map[string]any  `json:"throttling_flags"`
	ThrottleSince map[string]any  `json:"throttling_history"`
	ThrottleSrc   string          `json:"throttling_source"`
	UnderVoltage  *bool           `json:"under_voltage_now"`
	UptimeSeconds int64           `json:"uptime_seconds"`
	Raw           json.RawMessage `json:"-"` // the whole answer, for --json
}

// powerJob is a scheduled reboot or shutdown from manage_list_jobs.
type powerJob struct {
	JobID   string `json:"job_id"`
	Kind    string `json:"kind"`
	Summary string `json:"summary"`
	Due     string `json:"due"`
}

// statusView is everything status shows; a part the agent did not give
// (a tool refused, failed or is absent) is nil with the reason in missing.
type statusView struct {
	now       time.Time
	socket    string
	server    *agent.ServerStatus
	serverErr string
	basic     *basicInfo
	health    *healthSnap
	failed    []string
	failedOK  bool
	power     []powerJob
	powerOK   bool
	temps     *metricChart // per-column max temperature
	tempSpan  time.Duration
	missing   []string // "what: why"
}

// fetchStatus asks the agent for every part of the front panel; a part
// that fails is noted in missing, and the rest is still shown.
func fetchStatus(ctx context.Context, s *mcp.ClientSession, now time.Time) statusView {
	v := statusView{now: now}
	miss := func(what string, err error) {
		v.missing = append(v.missing, fmt.Sprintf("%s: %s", what, firstLine(err.Error())))
	}
	var st agent.ServerStatus
	if _, err := callTool(ctx, s, "manage_get_server_status", nil, &st); err != nil {
		v.serverErr = err.Error()
		miss("agent status (manage_get_server_status)", err)
	} else {
		v.server = &st
	}
	var bi basicInfo
	if res, err := callTool(ctx, s, "system_get_basic_info", nil, &bi); err != nil {
		miss("device basics (system_get_basic_info)", err)
	} else {
		bi.Raw, _ = json.Marshal(res.StructuredContent)
		v.basic = &bi
	}
	var hs healthSnap
	if res, err := callTool(ctx, s, "system_get_health_snapshot", nil, &hs); err != nil {
		miss("health (system_get_health_snapshot)", err)
	} else {
		hs.Raw, _ = json.Marshal(res.StructuredContent)
		v.health = &hs
	}
	var svc struct {
		Failed []string `json:"failed"`
	}
	if _, err := callTool(ctx, s, "service_list_services", map[string]any{"state": "failed", "limit": 1}, &svc); err != nil {
		miss("failed units (service_list_services)", err)
	} else {
		v.failed, v.failedOK = svc.Failed, true
	}
	var jobs struct {
		Jobs []powerJob `json:"jobs"`
	}
	if _, err := callTool(ctx, s, "manage_list_jobs", nil, &jobs); err != nil {
		miss("pending power actions (manage_list_jobs)", err)
	} else {
		v.powerOK = true
		for _, j := range jobs.Jobs {
			if j.Kind == "power" {
				v.power = append(v.power, j)
			}
		}
	}
	if err := v.fetchTemps(ctx, s); err != nil {
		miss("temperature history (metrics_query_history)", err)
	}
	return v
}

// tempChartWidth is the temperature sparkline's columns at statusWidth.
const tempChartWidth = 40

// fetchTemps reads the temperature of the last hours, up to six: as far
// back as the default job has samples, so a fresh agent shows minutes.
func (v *statusView) fetchTemps(ctx context.Context, s *mcp.ClientSession) error {
	var job samplingJob
	if v.server != nil {
		for _, j := range v.server.Sampling.Jobs {
			if j.Default {
				job = samplingJob{JobID: j.JobID, IntervalSeconds: j.IntervalSeconds, Samples: j.Samples, FirstSample: j.FirstSample, LastSample: j.LastSample}
			}
		}
	}
	// As far back as there are samples, but at least a full chart's worth
	// of them and at most six hours.
	interval := time.Duration(max(job.IntervalSeconds, 1)) * time.Second
	span := 6 * time.Hour
	if first, err := time.Parse(time.RFC3339Nano, job.FirstSample); err == nil {
		span = min(span, max(v.now.Sub(first), tempChartWidth*interval).Truncate(time.Minute)+time.Minute)
	}
	v.tempSpan = span
	end := v.now.UTC().Truncate(time.Second)
	start := end.Add(-span)
	step := chartStep(span, tempChartWidth, interval)
	q := func(agg string) ([]point, time.Duration, error) {
		var h history
		_, err := callTool(ctx, s, "metrics_query_history", map[string]any{
			"metric_names": []string{"cpu_temperature_celsius"}, "start_time": start.Format(time.RFC3339), "end_time": end.Format(time.RFC3339),
			"resolution": step.String(), "aggregation": agg}, &h)
		var pts []point
		for _, se := range h.series() {
			pts = append(pts, se.points...)
		}
		return pts, h.step(), err
	}
	maxes, used, err := q("max")
	if err != nil {
		return err
	}
	if used > 0 {
		step = used
	}
	mins, _, err := q("min")
	if err != nil {
		return err
	}
	c := metricChart{name: "cpu_temperature_celsius", cols: columns(maxes, start, step, tempChartWidth)}
	c.lo, c.hi, c.last, c.ok = windowStats(mins, maxes, maxes)
	c.oneSample = job.Samples == 1
	v.temps = &c
	return nil
}

// deviceJSON is --json's device object: the tools' own answers, and what is missing.
func (v statusView) deviceJSON() map[string]any {
	d := map[string]any{}
	if v.basic != nil {
		d["basic"] = json.RawMessage(v.basic.Raw)
	}
	if v.health != nil {
		d["health"] = json.RawMessage(v.health.Raw)
	}
	if v.failedOK {
		d["failed_units"] = append([]string{}, v.failed...)
	}
	if v.powerOK {
		d["pending_power"] = append([]powerJob{}, v.power...)
	}
	if len(v.missing) > 0 {
		d["missing"] = v.missing
	}
	return d
}

// rows prints label/value lines of a fixed label column, each value
// wrapped to the width with a hanging indent.
type rows struct {
	out   io.Writer
	o     output
	label int
}

// add prints one row; paint colours the whole value when set.
func (r rows) add(label, value, paint string) {
	lines := wrapText(value, r.o.width-r.label)
	for i, l := range lines {
		if paint != "" {
			l = r.o.paint(paint, l)
		}
		lab := ""
		if i == 0 {
			lab = label
		}
		fmt.Fprintln(r.out, padRight(lab, r.label)+l)
	}
}

// raw prints a row whose value is already laid out (bars, charts).
func (r rows) raw(label, value string) {
	fmt.Fprintln(r.out, padRight(label, r.label)+value)
}

// renderStatus prints the front panel: the device first, then the agent,
// in o.width columns, times in loc.
func renderStatus(out io.Writer, v statusView, o output, loc *time.Location) {
	r := rows{out: out, o: o, label: 14}
	head := func(s string) { fmt.Fprintln(out, o.paint(bold, s)) }

	// The device.
	switch {
	case v.basic != nil:
		title := v.basic.Model
		if v.basic.Hostname != "" {
			title = v.basic.Hostname + ": " + title
		}
		for _, l := range wrapText(title, o.width) {
			head(l)
		}
		// A part the device does not report (no os-release on a minimal
		// image) is left out, not shown as an empty gap.
		var parts []string
		if osName := strings.TrimSpace(v.basic.OSName + " " + v.basic.OSVersion); osName != "" {
			parts = append(parts, osName)
		}
		if v.basic.KernelVersion != "" {
			parts = append(parts, "kernel "+v.basic.KernelVersion)
		}
		sys := strings.Join(append(parts, "up "+formatUptime(time.Duration(v.basic.UptimeSeconds)*time.Second)), ", ")
		for _, l := range wrapText(sys, o.width) {
			fmt.Fprintln(out, l)
		}
	case v.server != nil:
		head(v.server.Device.Model)
	default:
		head("device")
	}
	fmt.Fprintln(out)
	if h := v.health; h != nil {
		if h.Temperature != nil {
			r.add("temperature", formatValue(*h.Temperature, "°C")+" now", tempColour(*h.Temperature))
		}
		now, since := throttleWords(h.ThrottleNow, ""), throttleWords(h.ThrottleSince, "_occurred")
		switch {
		case len(now) > 0:
			r.add("throttling", "NOW: "+strings.Join(now, ", ")+"; since boot: "+orNone(strings.Join(since, ", ")), red)
		case len(since) > 0:
			r.add("throttling", "none now; since boot: "+strings.Join(since, ", "), yellow)
		case h.ThrottleNow != nil:
			r.add("throttling", "none now, none since boot", green)
		case h.UnderVoltage != nil && *h.UnderVoltage:
			r.add("throttling", "UNDER-VOLTAGE now ("+h.ThrottleSrc+"); throttling unknown", red)
		case h.UnderVoltage != nil:
			r.add("throttling", "no under-voltage now ("+h.ThrottleSrc+"); throttling unknown", dim)
		case h.ThrottleSrc == sysinfo.ThrottleNone:
			// Not "none": this kernel has no source, so nothing is known.
			r.add("throttling", "unknown: this kernel offers no source (no get_throttled, no vcgencmd)", dim)
		}
		barW := 20
		cpu := formatValue(h.CPUUsage, "%")
		detail := ""
		if h.CPUFreqMHz != nil {
			detail = formatValue(*h.CPUFreqMHz, "MHz")
		}
		if len(h.Load) == 3 {
			detail = strings.TrimPrefix(detail+", load "+fmt.Sprintf("%.2f %.2f %.2f", h.Load[0], h.Load[1], h.Load[2]), ", ")
		}
		r.raw("cpu", meter(o, h.CPUUsage/100, barW, cpu, detail))
		if h.MemTotal > 0 {
			used := h.MemTotal - h.MemAvailable
			r.raw("memory", meter(o, used/h.MemTotal, barW, formatValue(100*used/h.MemTotal, "%"), sizeOf(used, h.MemTotal)))
		}
		if h.DiskTotal > 0 {
			r.raw("disk", meter(o, h.DiskUsed/h.DiskTotal, barW, formatValue(100*h.DiskUsed/h.DiskTotal, "%"), sizeOf(h.DiskUsed, h.DiskTotal)+" on /"))
		}
	}
	if c := v.temps; c != nil {
		label := "last " + formatSpan(v.tempSpan)
		switch {
		case !c.ok:
			r.add(label, "no temperature samples yet", dim)
		case c.oneSample || countCols(c.cols) < 2:
			r.add(label, "too few samples yet for a chart of the temperature", dim)
		default:
			var b strings.Builder
			for _, x := range c.cols {
				if math.IsNaN(x) {
					b.WriteByte(' ')
				} else {
					b.WriteRune(sparkRune(x, c.lo, c.hi))
				}
			}
			legend := fmt.Sprintf("  ▁ %s  █ %s", formatValue(c.lo, "°C"), formatValue(c.hi, "°C"))
			r.raw(label, o.paint(tempColour(c.hi), b.String())+legend)
		}
	}
	if v.failedOK {
		if len(v.failed) == 0 {
			r.add("failed units", "none", green)
		} else {
			r.add("failed units", fmt.Sprintf("%d: %s; why: raspi-mcp call service_get_status service_name=%s", len(v.failed), strings.Join(v.failed, ", "), v.failed[0]), red)
		}
	}
	if v.powerOK {
		if len(v.power) == 0 {
			r.add("power", "no reboot or shutdown scheduled", "")
		}
		for _, p := range v.power {
			r.add("power", powerLine(p, v.now, loc)+"; raspi-mcp call manage_cancel_job job_id="+p.JobID+" calls it off", yellow)
		}
	}

	// The agent.
	fmt.Fprintln(out)
	head("raspi-mcp agent")
	if st := v.server; st != nil {
		renderAgent(r, st, v.socket, loc)
	}
	if len(v.missing) > 0 {
		fmt.Fprintln(out)
		head("not shown")
		for _, m := range v.missing {
			for i, l := range wrapText(m, o.width-2) {
				pre := "  "
				if i == 0 {
					pre = "- "
				}
				fmt.Fprintln(out, pre+o.paint(yellow, l))
			}
		}
	}
}

// renderAgent prints the agent's part: what status showed before the device came first.
func renderAgent(r rows, st *agent.ServerStatus, socket string, loc *time.Location) {
	up := formatUptime(time.Duration(st.UptimeSeconds) * time.Second)
	r.add("agent", fmt.Sprintf("running, raspi-mcp %s (%s), pid %d, up %s, %s mode", st.Version, st.Build, st.PID, up, st.Mode), "")
	r.add("socket", socket, "")
	if st.Helper.Reachable {
		r.add("helper", fmt.Sprintf("running, %s, pid %d, %s backend", st.Helper.Version, st.Helper.PID, st.Helper.Backend), "")
	} else {
		r.add("helper", fmt.Sprintf("DOWN: privileged tools answer unavailable (%s)", st.Helper.Error), red)
	}
	r.add("you", fmt.Sprintf("%s, role %s", st.Caller.Principal, st.Caller.Role), "")
	r.add("tools", fmt.Sprintf("%d, %d calls since start (%d failed)", st.Tools, st.Calls.Total, st.Calls.Failed), "")
	r.add("audit", fmt.Sprintf("%d records, %d denied, %d errors; last %s", st.Audit.Records, st.Audit.Denied, st.Audit.Errors, orNone(localTime(st.Audit.LastTime, loc))), "")
	r.add("problems", fmt.Sprintf("%d denied or failed in the last hour, %d in the last day", st.Problems.LastHour, st.Problems.LastDay), "")
	switch {
	case st.Audit.Tampered:
		// Whole lines, past the width if need be: an alarm is copied and
		// searched for, and a finding cut in two is found by neither.
		for _, f := range st.Audit.Findings {
			fmt.Fprintln(r.out, r.o.paint(red, "AUDIT TAMPERED: "+f))
		}
	case st.Audit.WitnessError != "":
		r.add("witness", fmt.Sprintf("unavailable (%s); %d records not yet witnessed", st.Audit.WitnessError, st.Audit.Unwitnessed), yellow)
	case st.Audit.Unwitnessed > 0:
		r.add("witness", fmt.Sprintf("through seq %d, %d newer records not yet witnessed", st.Audit.WitnessSeq, st.Audit.Unwitnessed), "")
	default:
		r.add("witness", fmt.Sprintf("through seq %d", st.Audit.WitnessSeq), "")
	}
	r.add("database", fmt.Sprintf("%s, %s", st.Database.Path, formatValue(float64(st.Database.SizeBytes), "B")), "")
	if st.HTTP != nil {
		r.add("http", st.HTTP.URL, "")
		if st.HTTP.Fingerprint != "" {
			for _, l := range wrapText("tls certificate: its SHA-256 fingerprint as raspi-mcp prints it, then as openssl x509 -noout -fingerprint -sha256 does:", r.o.width) {
				fmt.Fprintln(r.out, l)
			}
			fmt.Fprintln(r.out, "  "+st.HTTP.Fingerprint)
			if fp, ok := opensslFingerprint(st.HTTP.Fingerprint); ok {
				fmt.Fprintln(r.out, "  "+fp[:48])
				fmt.Fprintln(r.out, "  "+fp[48:])
			}
		}
	}
	for _, j := range st.Sampling.Jobs {
		age := "no sample yet"
		if j.LastSample != "" {
			age = "last sample " + formatUptime(time.Duration(j.LastSampleAgeSecs*float64(time.Second))) + " ago"
		}
		def := ""
		if j.Default {
			def = ", default"
		}
		r.add("sampling", fmt.Sprintf("%s %s%s: every %ds, kept %dh, %d samples, %s", j.JobID, j.Status, def, j.IntervalSeconds, j.RetentionHours, j.Samples, age), "")
	}
	if st.Sampling.FlushError != "" {
		r.add("sampling", "FLUSH FAILING: "+st.Sampling.FlushError, red)
	}
	if w, ok := st.ConfigSummary["writes"].(map[string]any); ok {
		var on []string
		for k, v := range w {
			if v == true {
				on = append(on, k)
			}
		}
		sort.Strings(on)
		r.add("writes on", orNone(strings.Join(on, ", ")), "")
	}
	if gen, ok := st.ConfigSummary["generation"].(float64); ok {
		r.add("config", fmt.Sprintf("generation %d, loaded %s", int(gen), localTime(fmt.Sprint(st.ConfigSummary["loaded_at"]), loc)), "")
	}
	for _, u := range st.Upstreams {
		line := fmt.Sprintf("%s %s %s (%s), %d of %d tools mounted", u.Name, u.State, u.Endpoint, orNone(u.Transport), u.Mounted, u.Tools)
		if u.LatencyP50MS > 0 {
			line += fmt.Sprintf(", p50 %.1f ms", u.LatencyP50MS)
		}
		if u.LastError != "" {
			line += "; last error: " + u.LastError
		}
		r.add("upstream", line, "")
	}
	if st.Problems.Withheld != "" {
		fmt.Fprintln(r.out)
		r.add("recent", "denials and errors: "+st.Problems.Withheld, "")
	}
	if len(st.Recent) > 0 {
		fmt.Fprintln(r.out)
		fmt.Fprintln(r.out, r.o.paint(bold, "recent denials and errors"))
		for _, e := range st.Recent {
			line := fmt.Sprintf("%s %s %s %s: %s", localTime(e.Time, loc), e.Principal, e.Tool, e.ErrorCode, e.Message)
			for i, l := range wrapText(line, r.o.width-4) {
				pre := "    "
				if i == 0 {
					pre = "  "
				}
				fmt.Fprintln(r.out, pre+l)
			}
		}
	}
}

// meter is a bar of frac with its figure and a detail: "█████░░░ 30 %  1800 MHz".
func meter(o output, frac float64, width int, figure, detail string) string {
	c := green
	switch {
	case frac >= 0.9:
		c = red
	case frac >= 0.75:
		c = yellow
	}
	s := o.paint(c, bar(frac, width)) + " " + fmt.Sprintf("%5s", figure)
	if detail != "" {
		s += "  " + detail
	}
	return s
}

// sizeOf is "1.5 GiB of 4 GiB".
func sizeOf(used, total float64) string {
	return formatValue(used, "B") + " of " + formatValue(total, "B")
}

// tempColour is a temperature's colour: the Pi 4 throttles from 80 °C (soft limit 60-70 °C on some boards).
func tempColour(c float64) string {
	switch {
	case c >= 80:
		return red
	case c >= 70:
		return yellow
	}
	return ""
}

// throttleNames are the firmware's flags as a person reads them.
var throttleNames = []struct{ key, name string }{
	{"under_voltage", "under-voltage"}, {"throttled", "throttled"}, {"freq_capped", "frequency capped"}, {"soft_temp_limit", "soft temperature limit"},
}

// throttleWords lists the flags set in m: throttling_flags' keys, or
// throttling_history's with suffix "_occurred".
func throttleWords(m map[string]any, suffix string) []string {
	var out []string
	for _, t := range throttleNames {
		if m[t.key+suffix] == true {
			out = append(out, t.name)
		}
	}
	return out
}

// powerLine is "reboot at 14:05, in 4m" from a power job.
func powerLine(p powerJob, now time.Time, loc *time.Location) string {
	action, _, _ := strings.Cut(p.Summary, " ")
	due, err := time.Parse(time.RFC3339, p.Due)
	if err != nil {
		return p.Summary
	}
	in := "due"
	if d := due.Sub(now); d > 0 {
		in = "in " + formatUptime(d)
	}
	return fmt.Sprintf("%s at %s, %s", action, due.In(loc).Format("15:04"), in)
}

// localTime is an RFC 3339 time as "2006-01-02 15:04:05" in loc, or s as it came.
func localTime(s string, loc *time.Location) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.In(loc).Format("2006-01-02 15:04:05")
}

func countCols(cols []float64) int {
	n := 0
	for _, x := range cols {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

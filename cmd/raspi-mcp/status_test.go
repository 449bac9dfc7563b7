package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/internal/tmuxtest"
)

// A fixed front panel renders the same every time, within 80 columns: a
// board throttled now, a failed unit, a reboot pending, the TLS
// fingerprint in our form and openssl's, and a part the agent refused
// named under "not shown".
func TestRenderStatusGolden(t *testing.T) {
	now := time.Date(2027, 1, 15, 14, 0, 0, 0, time.UTC)
	var st agent.ServerStatus
	if err := json.Unmarshal([]byte(`{"version":"1.2.0","build":"abc1234","uptime_seconds":93784,"mode":"systemd","pid":812,
		"helper":{"reachable":true,"version":"raspi-mcp-helper/1.2.0","pid":640,"backend":"linux"},
		"caller":{"principal":"pi","role":"operate"},"device":{"model":"Raspberry Pi 4 Model B Rev 1.4","is_raspberry_pi":true},"tools":56,"calls":{"total":1204,"failed":3},
		"audit":{"records":88,"denied":2,"errors":1,"last_time":"2027-01-15T13:55:02Z","witness_seq":87,"unwitnessed":1},
		"problems":{"last_hour":1,"last_day":3,"withheld":""},
		"recent_problems":[{"time":"2027-01-15T13:55:02Z","principal":"pi","tool":"system_reboot","error_code":"failed_precondition","message":"a reboot is scheduled at 14:05; cancel it first with manage_cancel_job"}],
		"database":{"path":"/var/lib/raspi-mcp/state.db","size_bytes":1572864},
		"sampling":{"jobs":[{"job_id":"job-1","interval_seconds":10,"retention_hours":48,"status":"running","default":true,"samples":17280,"last_sample":"2027-01-15T13:59:55Z","last_sample_age_seconds":5}]},
		"config_summary":{"generation":3,"loaded_at":"2027-01-14T12:00:00Z","writes":{"[system] reboot":true,"[gpio] writes":true,"[system] shutdown":false}},
		"http":{"url":"https://raspberrypi.local:8443/mcp","tls_fingerprint":"sha256:16abed0c9d8e7f6a5b4c3d2e1f00112233445566778899aabbccddeeff001122"}}`), &st); err != nil {
		t.Fatal(err)
	}
	temp, freq := 81.2, 1500.0
	cols := make([]float64, tempChartWidth)
	for i := range cols {
		cols[i] = 60 + 20*float64(i)/float64(len(cols)-1)
	}
	cols[0] = math.NaN()
	v := statusView{now: now, socket: "/run/raspi-mcp/mcp.sock", server: &st,
		basic: &basicInfo{Hostname: "greenhouse", Model: "Raspberry Pi 4 Model B Rev 1.4", OSName: "Debian GNU/Linux", OSVersion: "12 (bookworm)",
			KernelVersion: "6.6.51+rpt-rpi-v8", UptimeSeconds: 3*86400 + 7200},
		health: &healthSnap{CPUUsage: 92.5, CPUFreqMHz: &freq, Temperature: &temp, Load: []float64{3.9, 3.2, 2.1},
			MemTotal: 4 << 30, MemAvailable: 1 << 30, DiskTotal: 32e9, DiskUsed: 8e9,
			ThrottleNow:   map[string]any{"throttled": true, "under_voltage": false, "soft_temp_limit": true},
			ThrottleSince: map[string]any{"throttled_occurred": true, "under_voltage_occurred": true}},
		failedOK: true, failed: []string{"backup.service", "wg-quick@wg0.service"},
		powerOK: true, power: []powerJob{{JobID: "power-7", Kind: "power", Summary: "reboot at 2027-01-15T14:05:00Z", Due: "2027-01-15T14:05:00Z"}},
		temps:    &metricChart{name: "cpu_temperature_celsius", cols: cols, lo: 58.1, hi: 80, ok: true},
		tempSpan: 6 * time.Hour,
		missing:  []string{"pending updates (manage_check_for_updates): permission_denied: role operate may not call it"},
	}
	var b strings.Builder
	renderStatus(&b, v, output{width: 80}, time.UTC)
	checkWidth(t, b.String(), 80)
	for _, want := range []string{"16:AB:ED:0C:9D:8E:7F:6A:5B:4C:3D:2E:1F:00:11:22:", "33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22", "sha256:16abed0c"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q", want)
		}
	}
	// The agent's part alone, as when every device tool failed.
	b.WriteString("----\n")
	renderStatus(&b, statusView{now: now, socket: "/run/raspi-mcp/mcp.sock", server: &st,
		missing: []string{"device basics (system_get_basic_info): unavailable: the helper is down"}}, output{width: 80}, time.UTC)
	checkWidth(t, b.String(), 80)
	tmuxtest.Golden(t, "status-render.golden", b.String())
}

// cliBinaries builds raspi-mcp and raspi-mcp-simhelper side by side, as
// `serve --sim` finds its helper.
var cliBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "raspi-mcp-cli-bin-")
	if err != nil {
		return "", err
	}
	if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../raspi-mcp-simhelper").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "raspi-mcp"), nil
})

// startSimAgent starts `raspi-mcp serve --sim` in a fresh directory,
// sampling every 5 s (the least the config allows), and waits until its
// default job has taken at least three samples, so charts have columns.
func startSimAgent(t *testing.T) (bin, dir string) {
	t.Helper()
	bin, err := cliBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[metrics]\ndefault_interval = \"5s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startServe(t, bin, nil, "--dir", dir, "--config", cfg) // its log shows if the test fails
	deadline := time.Now().Add(2 * time.Minute)            // a hang guard, not a speed requirement
	for {
		out, err := exec.Command(bin, "call", "--json", "--dir", dir, "metrics_list_sampling_jobs").Output()
		var res struct {
			StructuredContent struct {
				Jobs []samplingJob `json:"jobs"`
			} `json:"structuredContent"`
		}
		if err == nil && json.Unmarshal(out, &res) == nil && len(res.StructuredContent.Jobs) > 0 && res.StructuredContent.Jobs[0].Samples >= 3 {
			return bin, dir
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sim agent in %s has not taken three samples in 2 minutes (last: %v %s)", dir, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// maskScreen keeps a screen's layout and words and drops what changes from
// run to run: the directory, job ids, durations, numbers, the lengths of
// bars and sparklines, and the padding and wrapping that follow from them.
func maskScreen(s, dir string) string {
	s = strings.ReplaceAll(s, dir, "$DIR")
	for _, m := range []struct{ re, to string }{
		{`job-[0-9a-f]+`, "job-ID"},
		{`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`, "TIME"},
		{`\b\d\d:\d\d\b`, "HH:MM"},
		{`\b(\d+[dhms])+( \d+[dhms])*\b`, "DUR"},
		{`\b\d+(\.\d+)*\b`, "N"},
		{`[\x{2581}-\x{258F}░]([\x{2581}-\x{258F}░ ]*[\x{2581}-\x{258F}░])?`, "▒"},
		{`\n {2,}`, " "}, // a wrapped row's next line: where a row wraps depends on its numbers' widths
		{` {2,}`, "  "},
		{` +\n`, "\n"},
	} {
		s = regexp.MustCompile(m.re).ReplaceAllString(s, m.to)
	}
	return s
}

// status and metrics in a real 80-column terminal against a running sim
// agent: the screens match the golden files (masked), and at 81 columns
// (metrics told --width 80) every line still ends by column 80, so nothing
// was wrapped at 80. Piped, they print no colour.
func TestStatusAndMetricsInTerminal(t *testing.T) {
	bin, dir := startSimAgent(t)
	env := []string{"TZ=UTC"}
	st := tmuxtest.Run(t, tmuxtest.Options{Width: 80, Height: 60, Env: env}, bin, "status", "--dir", dir)
	if st.Exit != 0 {
		t.Fatalf("status exit %d:\n%s", st.Exit, st.Text())
	}
	if !strings.Contains(st.Text(), "Raspberry Pi 4 Model B") || !strings.Contains(st.Text(), "°C now") || !strings.Contains(st.Text(), "raspi-mcp agent") {
		t.Errorf("status lacks the device or the agent:\n%s", st.Text())
	}
	tmuxtest.Golden(t, "status-sim.golden", maskScreen(st.Text(), dir))
	wide := tmuxtest.Run(t, tmuxtest.Options{Width: 81, Height: 60, Env: env}, bin, "status", "--dir", dir)
	checkWidth(t, wide.Text(), 80)

	me := tmuxtest.Run(t, tmuxtest.Options{Width: 80, Height: 60, Env: env}, bin, "metrics", "--dir", dir)
	if me.Exit != 0 {
		t.Fatalf("metrics exit %d:\n%s", me.Exit, me.Text())
	}
	tmuxtest.Golden(t, "metrics-sim.golden", maskScreen(me.Text(), dir))
	me81 := tmuxtest.Run(t, tmuxtest.Options{Width: 81, Height: 60, Env: env}, bin, "metrics", "--dir", dir, "--width", "80")
	checkWidth(t, me81.Text(), 80)
	if a, b := maskScreen(me.Text(), dir), maskScreen(me81.Text(), dir); a != b {
		t.Errorf("metrics at 80 columns differs from --width 80 at 81:\n%s\n---\n%s", a, b)
	}

	for _, args := range [][]string{{"status", "--dir", dir}, {"metrics", "--dir", dir}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || bytes.Contains(out, []byte("\x1b[")) {
			t.Errorf("%v piped: err %v, colour in %q", args, err, out)
		}
	}
}

// With no os-release (the emulated Pi Zero's busybox image) the device's
// line has no empty gap: "kernel …, up …", not ", kernel …".
func TestRenderStatusWithoutOSRelease(t *testing.T) {
	var b strings.Builder
	renderStatus(&b, statusView{now: time.Date(2027, 1, 15, 14, 0, 0, 0, time.UTC), socket: "/run/raspi-mcp/mcp.sock",
		basic: &basicInfo{Model: "Raspberry Pi Zero", KernelVersion: "6.1.0-31-rpi", UptimeSeconds: 9}}, output{width: 80}, time.UTC)
	if !strings.Contains(b.String(), "\nkernel 6.1.0-31-rpi, up ") || strings.Contains(b.String(), ", kernel") {
		t.Errorf("device line:\n%s", b.String())
	}
}

// A board whose kernel has no get_throttled (Debian's, on the emulated Pis)
// gets a throttling line that says what is known, never "none".
func TestRenderStatusThrottlingSources(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		h    healthSnap
		want string
	}{
		{healthSnap{ThrottleSrc: "hwmon rpi_volt", UnderVoltage: &yes}, "throttling UNDER-VOLTAGE now (hwmon rpi_volt); throttling unknown"},
		{healthSnap{ThrottleSrc: "hwmon rpi_volt", UnderVoltage: &no}, "throttling no under-voltage now (hwmon rpi_volt); throttling unknown"},
		{healthSnap{ThrottleSrc: "none"}, "throttling unknown: this kernel offers no source"},
		{healthSnap{ThrottleSrc: "firmware", ThrottleNow: map[string]any{}, ThrottleSince: map[string]any{}}, "throttling none now, none since boot"},
	} {
		var b strings.Builder
		h := c.h
		renderStatus(&b, statusView{now: time.Unix(0, 0), health: &h}, output{width: 100}, time.UTC)
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), c.want) {
			t.Errorf("%+v: want %q in\n%s", c.h, c.want, b.String())
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/simagent"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// `raspi-mcp selftest` proves a (cross-compiled) binary works: agent, bbolt
// and an MCP client run in this process on the simulated board, with the
// helper as a child, as in laptop mode (`serve --sim`). Under qemu-user
// without binfmt, where this binary cannot start an ARM child itself,
// --helper names a wrapper that runs the helper under qemu
// (packaging/arm-selftest writes one). The helper's server is not linked
// into this binary: the agent has no use for it.

func cmdSelftest(args []string) error {
	c := newCommand("selftest", "[--dir DIR] [--helper FILE] [--timeout D]", "check this binary: agent, store and an MCP session on the simulated board, with the helper as a child")
	dir := c.fs.String("dir", "", "keep sockets, state and logs in `DIR` (default: a temporary directory, removed afterwards)")
	helperBin := c.fs.String("helper", "", "raspi-mcp-simhelper's `FILE`, or a wrapper that runs it (default: beside this binary, in ../lib/raspi-mcp/, then $PATH)")
	timeout := c.fs.Duration("timeout", 5*time.Minute, "give up after `D` (qemu-user is 10-30x slower than native)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("selftest takes no arguments")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := selftest(ctx, selftestOptions{Dir: *dir, Helper: *helperBin, Out: os.Stdout, Log: os.Stderr}); err != nil {
		// The report on stdout already says what failed.
		return &exitError{code: 1}
	}
	return nil
}

// selftestOptions says where the self-test runs and reports.
type selftestOptions struct {
	Dir    string         // kept; "" means a temporary directory, removed afterwards
	Helper string         // the helper binary or a wrapper; "" means findHelper's
	Out    io.Writer      // the report: one line per step, then runtime and total time
	Log    io.Writer      // warnings of the agent and the helper; nil discards
	Steps  []selftestStep // nil means selftestSteps()
}

// selftestStep is one line of the report. A setup step's failure ends the
// run, since the steps after it need what it builds.
type selftestStep struct {
	name  string
	setup bool
	run   func(r *selftestRig, ctx context.Context) (detail string, err error)
}

// selftestSteps are the standard checks, in order.
func selftestSteps() []selftestStep {
	return []selftestStep{
		{name: "config", setup: true, run: (*selftestRig).config},
		{name: "store", setup: true, run: (*selftestRig).openStore},
		{name: "helper", setup: true, run: (*selftestRig).startHelper},
		{name: "agent", setup: true, run: (*selftestRig).startAgent},
		{name: "initialize", setup: true, run: (*selftestRig).initialize},
		{name: "tools_list", run: (*selftestRig).toolsList},
		{name: "health", run: (*selftestRig).health},
		{name: "gpio_write", run: (*selftestRig).gpioWrite},
		{name: "sensor_read", run: (*selftestRig).sensorRead},
		{name: "denied", run: (*selftestRig).denied},
		{name: "reboot_dry_run", run: (*selftestRig).rebootDryRun},
		{name: "audit_chain", run: (*selftestRig).auditChain},
		{name: "metrics_store", run: (*selftestRig).metricsStore},
		{name: "shutdown", run: (*selftestRig).shutdown},
		{name: "store_reopen", run: (*selftestRig).reopenStore},
	}
}

// selftest runs the steps and prints the report; the error says how many
// failed. Every step runs even after a failed check, so one CI log shows
// everything that is broken; only a failed setup step stops the run.
func selftest(ctx context.Context, o selftestOptions) error {
	start := time.Now()
	steps := o.Steps
	if steps == nil {
		steps = selftestSteps()
	}
	var logw io.Writer = io.Discard
	if o.Log != nil {
		// Two writers share it: the helper child's output, copied by
		// os/exec's goroutine, and the agent's logger, from every call
		// that logs (a refusal does). The caller's writer need not be safe
		// for that (a bytes.Buffer is not).
		logw = &lockedWriter{w: o.Log}
	}
	r := &selftestRig{dir: o.Dir, helperBin: o.Helper, log: logw}
	width := 0
	for _, s := range steps {
		width = max(width, len(s.name))
	}
	failed, skipped := 0, 0
	for i, s := range steps {
		t0 := time.Now()
		detail, err := s.run(r, ctx)
		took := time.Since(t0).Round(time.Millisecond)
		if err != nil {
			failed++
			fmt.Fprintf(o.Out, "FAIL %-*s  %v (%s)\n", width, s.name, err, took)
			if s.setup {
				skipped = len(steps) - i - 1
				break
			}
			continue
		}
		fmt.Fprintf(o.Out, "ok   %-*s  %s (%s)\n", width, s.name, detail, took)
	}
	if err := r.close(); err != nil {
		failed++
		fmt.Fprintf(o.Out, "FAIL %-*s  %v\n", width, "cleanup", err)
	}
	fmt.Fprintf(o.Out, "runtime: %s\n", runtimeInfo())
	total := time.Since(start).Round(time.Millisecond)
	if failed > 0 {
		msg := fmt.Sprintf("%d of %d steps failed", failed, len(steps))
		if skipped > 0 {
			msg += fmt.Sprintf(", %d not run", skipped)
		}
		fmt.Fprintf(o.Out, "selftest FAILED: %s, in %s\n", msg, total)
		return errors.New("selftest: " + msg)
	}
	fmt.Fprintf(o.Out, "selftest passed: %d steps in %s\n", len(steps), total)
	return nil
}

// runtimeInfo names what the binary was built for, e.g. "go1.26 linux/arm
// GOARM=6": the point of running it under qemu with -cpu arm1176.
func runtimeInfo() string {
	s := fmt.Sprintf("raspi-mcp %s (%s), %s %s/%s", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	key := map[string]string{"arm": "GOARM", "arm64": "GOARM64", "amd64": "GOAMD64", "386": "GO386", "riscv64": "GORISCV64"}[runtime.GOARCH]
	if bi, ok := debug.ReadBuildInfo(); ok && key != "" {
		for _, kv := range bi.Settings {
			if kv.Key == key {
				s += " " + key + "=" + kv.Value
			}
		}
	}
	cpus := "CPUs"
	if runtime.NumCPU() == 1 {
		cpus = "CPU"
	}
	return fmt.Sprintf("%s, %d %s", s, runtime.NumCPU(), cpus)
}

// selftestRig is what the steps share: the agent's side of the simulated
// board, its store, and the helper child serving the board's hardware.
type selftestRig struct {
	dir       string
	tempDir   bool // created here, removed by close
	helperBin string
	log       io.Writer
	cfg       config.Config
	board     simagent.Board
	db        *store.DB      // nil before the store step and after shutdown
	helper    *client.Client // the agent's client of the helper child
	check     *client.Client // the steps' own client: what the helper itself says
	session   *mcp.ClientSession

	stopHelper func() error // nil when not running
	stopAgent  func() error // nil when not running

	pin, deniedPin int    // an allowed output pin, and a pin not in the allowlist
	audited        int    // audit records seen by audit_chain, checked after reopening
	sampleJob      string // the job metrics_store wrote to
	sample         store.Sample
}

func (r *selftestRig) config(context.Context) (string, error) {
	if r.dir == "" {
		d, err := os.MkdirTemp("", "raspi-mcp-selftest-")
		if err != nil {
			return "", err
		}
		r.dir, r.tempDir = d, true
	} else if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(r.dir)
	if err != nil {
		return "", err
	}
	r.dir = abs
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	// Written and read back, as serve --sim does for its helper: this runs
	// the TOML codec and the validation on the target too.
	// The helper child logs at the config's level: warnings only, as the
	// agent here does, so the report stays readable.
	lc := config.Laptop(r.dir, name)
	lc.Agent.LogLevel = "warn"
	data, err := lc.Encode()
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.dir, "config.toml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	if r.cfg, err = config.Load(path); err != nil {
		return "", err
	}
	r.pin, r.deniedPin = -1, -1
	for _, p := range r.cfg.GPIO.Pins {
		if p.Mode == "output" && !p.PWM && r.pin < 0 {
			r.pin = p.Pin
		}
	}
	for n := 2; n <= 27 && r.deniedPin < 0; n++ {
		if _, ok := r.cfg.GPIO.Pin(n); !ok {
			r.deniedPin = n
		}
	}
	if r.pin < 0 || r.deniedPin < 0 {
		return "", fmt.Errorf("laptop config: no plain output pin or no pin outside the allowlist in [gpio] pins")
	}
	return fmt.Sprintf("%s, user %s, %d GPIO pins, %d sensors", r.dir, name, len(r.cfg.GPIO.Pins), len(r.cfg.I2C.Sensors)), nil
}

// openStore opens the simulated board's agent side and the bbolt file.
func (r *selftestRig) openStore(context.Context) (string, error) {
	var err error
	if r.board, err = simagent.Open(r.dir, false); err != nil {
		return "", err
	}
	if r.db, err = store.Open(r.cfg.Agent.State, store.Options{}); err != nil {
		return "", err
	}
	size, err := r.db.Size()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("bbolt %s, %d bytes", filepath.Base(r.cfg.Agent.State), size), nil
}

// startHelper starts the helper child on the simulated board, as `serve
// --sim` does; power actions are recorded in power.log, never performed.
// Timeouts are generous: under qemu-user every call is many times slower.
func (r *selftestRig) startHelper(ctx context.Context) (string, error) {
	bin, err := findHelper(r.helperBin)
	if err != nil {
		return "", err
	}
	name := "raspi-mcp/" + version
	r.helper = client.New(client.Options{Socket: r.cfg.Helper.Socket, ClientName: name, Timeout: 30 * time.Second, DialTimeout: 10 * time.Second})
	r.check = client.New(client.Options{Socket: r.cfg.Helper.Socket, ClientName: name + " selftest", Timeout: 30 * time.Second, DialTimeout: 10 * time.Second})
	if r.stopHelper, err = startChild(bin, simHelperArgs(r.dir), r.log); err != nil {
		return "", fmt.Errorf("start %s: %w", bin, err)
	}
	if err := waitHelper(ctx, r.check, 2*time.Minute); err != nil {
		return "", err
	}
	st, err := client.Call(ctx, r.check, proto.Status, proto.StatusReq{})
	if err != nil {
		return "", fmt.Errorf("helper status: %w", err)
	}
	if st.Backend != "sim" {
		return "", fmt.Errorf("helper backend %q, want sim", st.Backend)
	}
	// Before serving, the helper put every configured pin in its safe state.
	for _, p := range r.cfg.GPIO.Pins {
		got, err := client.Call(ctx, r.check, proto.GPIORead, proto.GPIOReadReq{Pin: p.Pin})
		if err != nil {
			return "", fmt.Errorf("safe states: GPIO%d: %w", p.Pin, err)
		}
		if got.Mode != p.Mode || (p.Mode == "output" && (got.Value == nil || *got.Value != p.Value)) {
			level := "none"
			if got.Value != nil {
				level = strconv.Itoa(*got.Value)
			}
			return "", fmt.Errorf("safe states: GPIO%d is %s at %s, want %s at %d", p.Pin, got.Mode, level, p.Mode, p.Value)
		}
	}
	return fmt.Sprintf("%s, %s backend, %d methods, pid %d, on %s", st.Helper, st.Backend, len(st.Methods), st.PID, filepath.Base(r.cfg.Helper.Socket)), nil
}

// line is a pin's level as the helper itself reads it, not as the agent
// reports it.
func (r *selftestRig) line(ctx context.Context, pin int) (int, error) {
	p, err := client.Call(ctx, r.check, proto.GPIORead, proto.GPIOReadReq{Pin: pin})
	if err != nil {
		return 0, err
	}
	if p.Value == nil {
		return 0, fmt.Errorf("helper: GPIO%d has no value", pin)
	}
	return *p.Value, nil
}

// powerEvents is the simulated power log's size: empty unless a power
// action was scheduled.
func (r *selftestRig) powerEvents() (int64, error) {
	fi, err := os.Stat(filepath.Join(r.dir, "power.log"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// startAgent builds the agent as `serve --sim` does and serves it on its
// real socket: the caller's role comes from SO_PEERCRED, as in production.
func (r *selftestRig) startAgent(context.Context) (string, error) {
	ring := applog.NewRing(200)
	log := slog.New(ring.Handler(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelWarn}), "agent"))
	b := r.board
	a, err := agent.New(agent.Options{Config: &r.cfg, Store: r.db, Sys: b.Sys, Helper: r.helper, CheckOutput: true,
		Version: version, Build: commit, Mode: "sim", Logger: log, AppLog: ring, Units: b.Units, Journal: b.Units.Journal(),
		SimProcs: b.Procs, Net: b.Net})
	if err != nil {
		return "", err
	}
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		return "", err
	}
	r.stopAgent = serveUntilStopped(func(ctx context.Context) error { return a.Serve(ctx, ln) })
	return "serving " + filepath.Base(r.cfg.Agent.Socket), nil
}

// serveUntilStopped runs serve in the background; the returned func stops it
// and returns its error.
func serveUntilStopped(serve func(context.Context) error) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

func (r *selftestRig) initialize(ctx context.Context) (string, error) {
	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		return "", err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raspi-mcp-selftest", Version: version}, nil)
	s, err := c.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		conn.Close()
		return "", err
	}
	r.session = s
	ir := s.InitializeResult()
	if ir == nil || ir.ServerInfo == nil {
		return "", errors.New("no initialize result")
	}
	if ir.ServerInfo.Name != "raspi-mcp" || ir.ServerInfo.Version != version {
		return "", fmt.Errorf("server %s %s, want raspi-mcp %s", ir.ServerInfo.Name, ir.ServerInfo.Version, version)
	}
	return fmt.Sprintf("server %s %s, protocol %s", ir.ServerInfo.Name, ir.ServerInfo.Version, ir.ProtocolVersion), nil
}

// wireName is the rule every exported tool name must follow: snake case of
// at most 48 characters, which every MCP client accepts (several reject dots).
var wireName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

func (r *selftestRig) toolsList(ctx context.Context) (string, error) {
	var names []string
	for t, err := range r.session.Tools(ctx, nil) {
		if err != nil {
			return "", err
		}
		if !wireName.MatchString(t.Name) {
			return "", fmt.Errorf("tool name %q breaks %s", t.Name, wireName)
		}
		if slices.Contains(names, t.Name) {
			return "", fmt.Errorf("tool %q listed twice", t.Name)
		}
		names = append(names, t.Name)
	}
	for _, want := range []string{"system_get_health_snapshot", "gpio_write_pin", "system_reboot", "logs_verify_audit_chain"} {
		if !slices.Contains(names, want) {
			return "", fmt.Errorf("%s missing from %d tools", want, len(names))
		}
	}
	return fmt.Sprintf("%d tools, names valid", len(names)), nil
}

func (r *selftestRig) health(ctx context.Context) (string, error) {
	var h agent.HealthSnapshot
	if _, err := r.call(ctx, "system_get_health_snapshot", nil, &h); err != nil {
		return "", err
	}
	if h.Timestamp == "" || h.MemoryTotalBytes == 0 {
		return "", fmt.Errorf("structured content lacks timestamp or memory_total_bytes: %+v", h)
	}
	s := fmt.Sprintf("cpu %.1f%%, memory %d/%d MiB", h.CPUUsagePercent, h.MemoryUsedBytes>>20, h.MemoryTotalBytes>>20)
	if h.CPUTemperatureCelsius != nil {
		s += fmt.Sprintf(", %.1f°C", *h.CPUTemperatureCelsius)
	}
	return s, nil
}

// gpioWrite drives the pin high then low through agent and helper, reading
// each level back, and checks the simulated line itself.
func (r *selftestRig) gpioWrite(ctx context.Context) (string, error) {
	for _, v := range []string{"high", "low"} {
		var w agent.GPIOWriteOut
		if _, err := r.call(ctx, "gpio_write_pin", map[string]any{"pin": r.pin, "value": v}, &w); err != nil {
			return "", err
		}
		var p agent.GpioPinInfo
		if _, err := r.call(ctx, "gpio_read_pin", map[string]any{"pin": r.pin}, &p); err != nil {
			return "", err
		}
		if w.Value != v || p.Value != v {
			return "", fmt.Errorf("GPIO%d: wrote %s, write says %q, read says %q", r.pin, v, w.Value, p.Value)
		}
		line, err := r.line(ctx, r.pin)
		if err != nil {
			return "", err
		}
		if want := map[string]int{"high": 1, "low": 0}[v]; line != want {
			return "", fmt.Errorf("GPIO%d: read %s over MCP but the helper reads the line as %d", r.pin, v, line)
		}
	}
	c, _ := r.cfg.GPIO.Pin(r.pin)
	return fmt.Sprintf("GPIO%d (%s) set high and low, each read back", r.pin, c.Name), nil
}

func (r *selftestRig) sensorRead(ctx context.Context) (string, error) {
	if len(r.cfg.I2C.Sensors) == 0 {
		return "", errors.New("no sensor in [i2c] sensors")
	}
	sn := r.cfg.I2C.Sensors[0]
	var o agent.SensorsReadOut
	if _, err := r.call(ctx, "sensors_read", map[string]any{"name": sn.Name}, &o); err != nil {
		return "", err
	}
	if o.TemperatureC == nil || *o.TemperatureC < -40 || *o.TemperatureC > 85 {
		return "", fmt.Errorf("sensor %s: temperature %v out of the chip's range", sn.Name, o.TemperatureC)
	}
	s := fmt.Sprintf("%s (%s at %d:0x%02x): %.1f°C", o.Name, o.Type, sn.Bus, sn.Address, *o.TemperatureC)
	if o.PressureHPa != nil {
		s += fmt.Sprintf(", %.1f hPa", *o.PressureHPa)
	}
	return s, nil
}

// denied checks that policy holds: a pin outside the allowlist and a
// high-risk call without confirm are refused with codes a model can act on.
func (r *selftestRig) denied(ctx context.Context) (string, error) {
	checks := []struct {
		tool string
		args map[string]any
		code string
	}{
		{"gpio_write_pin", map[string]any{"pin": r.deniedPin, "value": "high"}, agent.CodePermissionDenied},
		{"system_reboot", map[string]any{"reason": "selftest"}, agent.CodeFailedPrecondition},
	}
	var got []string
	for _, c := range checks {
		res, err := r.call(ctx, c.tool, c.args, nil)
		if res == nil {
			return "", err
		}
		code := errorCode(res)
		if !res.IsError || code != c.code {
			return "", fmt.Errorf("%s %v: isError %v, code %q, want %s", c.tool, c.args, res.IsError, code, c.code)
		}
		got = append(got, c.tool+" → "+code)
	}
	// The helper, which alone drives pins, refuses the pin too; if it
	// allowed it, the line must still be low.
	var pe *proto.Error
	switch line, err := r.line(ctx, r.deniedPin); {
	case errors.As(err, &pe) && pe.Code == proto.CodePermissionDenied:
		got = append(got, "helper: "+pe.Code)
	case err != nil:
		return "", fmt.Errorf("GPIO%d after a denied write: %w", r.deniedPin, err)
	case line != 0:
		return "", fmt.Errorf("GPIO%d is high after a denied write", r.deniedPin)
	}
	if n, err := r.powerEvents(); err != nil || n != 0 {
		return "", fmt.Errorf("power log after a refused reboot: %d bytes, %v", n, err)
	}
	return fmt.Sprintf("GPIO%d: %s", r.deniedPin, strings.Join(got, ", ")), nil
}

func (r *selftestRig) rebootDryRun(ctx context.Context) (string, error) {
	var o agent.SystemPowerOut
	if _, err := r.call(ctx, "system_reboot", map[string]any{"dry_run": true, "reason": "selftest"}, &o); err != nil {
		return "", err
	}
	if !o.DryRun || o.Scheduled || len(o.Plan) == 0 {
		return "", fmt.Errorf("dry run: dry_run %v, scheduled %v, %d plan steps", o.DryRun, o.Scheduled, len(o.Plan))
	}
	if n, err := r.powerEvents(); err != nil || n != 0 {
		return "", fmt.Errorf("power log after a dry run: %d bytes, %v", n, err)
	}
	return fmt.Sprintf("plan %q, power log empty", o.Plan[0]), nil
}

func (r *selftestRig) auditChain(ctx context.Context) (string, error) {
	var v agent.AuditVerifyOut
	if _, err := r.call(ctx, "logs_verify_audit_chain", nil, &v); err != nil {
		return "", err
	}
	if !v.OK {
		return "", fmt.Errorf("audit chain broken: %+v", v.Problems)
	}
	total, denied, _, _, err := r.db.AuditCounts()
	if err != nil {
		return "", err
	}
	if total == 0 || denied == 0 {
		return "", fmt.Errorf("audit has %d records, %d denied; want the writes and the denials", total, denied)
	}
	r.audited = total
	return fmt.Sprintf("%d records (%d denied), chain intact seq %d..%d", total, denied, v.FirstSeq, v.LastSeq), nil
}

// metricsStore writes one sample and reads it back: the sample codec and
// bbolt on a 32-bit target.
func (r *selftestRig) metricsStore(context.Context) (string, error) {
	r.sampleJob = "selftest"
	r.sample = store.Sample{Time: time.UnixMilli(time.Now().UnixMilli()), CPUPercent: 12.5, FreqMHz: 1000, TempC: 47.25,
		Load1: 0.5, Load5: 0.25, Load15: 0.125, MemTotal: 512 << 20, MemUsed: 200 << 20, MemAvail: 300 << 20,
		DiskTotal: 16 << 30, DiskUsed: 3 << 30, HasThrottle: true, Throttle: 1<<16 | 1<<2,
		Net:  []store.NetRate{{Name: "wlan0", RxBytesPerSec: 1024, TxBytesPerSec: 512}},
		Disk: []store.DiskRate{{Name: "mmcblk0", ReadBytesPerSec: 4096, BusyPercent: 1.5}}}
	if err := r.db.AppendSamples(r.sampleJob, []store.Sample{r.sample}); err != nil {
		return "", err
	}
	if err := r.checkSample(r.db); err != nil {
		return "", err
	}
	return fmt.Sprintf("1 sample written to job %q and read back equal", r.sampleJob), nil
}

func (r *selftestRig) checkSample(db *store.DB) error {
	var got []store.Sample
	if err := db.ScanSamples(r.sampleJob, r.sample.Time, r.sample.Time.Add(time.Millisecond), func(s store.Sample) bool {
		got = append(got, s)
		return true
	}); err != nil {
		return err
	}
	if len(got) != 1 {
		return fmt.Errorf("job %q: %d samples read back, want 1", r.sampleJob, len(got))
	}
	g := got[0]
	if !g.Time.Equal(r.sample.Time) {
		return fmt.Errorf("sample time %s read back as %s", r.sample.Time, g.Time)
	}
	g.Time = r.sample.Time
	if !reflect.DeepEqual(g, r.sample) {
		return fmt.Errorf("sample read back differs:\n got %+v\nwant %+v", g, r.sample)
	}
	return nil
}

// shutdown stops everything in order, as a SIGTERM does; the sampler's last
// flush goes to bbolt before the file is closed.
func (r *selftestRig) shutdown(context.Context) (string, error) {
	if r.session != nil {
		_ = r.session.Close()
		r.session = nil
	}
	var errs []error
	if r.stopAgent != nil {
		errs = append(errs, wrapErr("agent", r.stopAgent()))
		r.stopAgent = nil
	}
	if r.stopHelper != nil {
		errs = append(errs, wrapErr("helper", r.stopHelper()))
		r.stopHelper = nil
	}
	if r.db != nil {
		errs = append(errs, wrapErr("store", r.db.Close()))
		r.db = nil
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return "agent, helper and store closed", nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// reopenStore reads the closed file back, as `raspi-mcp audit verify` does.
func (r *selftestRig) reopenStore(context.Context) (string, error) {
	db, err := store.Open(r.cfg.Agent.State, store.Options{ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer db.Close()
	v, err := agent.VerifyFile(db, witness.Path(r.cfg.Helper.StateDir))
	if err != nil {
		return "", err
	}
	if !v.OK || v.Records < r.audited {
		return "", fmt.Errorf("after reopening: chain ok %v, %d records, want at least %d", v.OK, v.Records, r.audited)
	}
	// Every record was witnessed by the helper before its tool answered.
	if v.Witness == nil || v.Witness.Seq != v.LastSeq || v.Witness.Unwitnessed != 0 {
		return "", fmt.Errorf("after reopening: witness %+v, want it at the last record %d", v.Witness, v.LastSeq)
	}
	if r.sampleJob != "" {
		if err := r.checkSample(db); err != nil {
			return "", err
		}
	}
	size, err := db.Size()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("read-only: %d audit records intact and witnessed, sample present, %d KiB", v.Records, size>>10), nil
}

// call calls a tool; a tool error becomes err (res is still returned).
func (r *selftestRig) call(ctx context.Context, name string, args, out any) (*mcp.CallToolResult, error) {
	if r.session == nil {
		return nil, errors.New("no MCP session")
	}
	res, err := callTool(ctx, r.session, name, args, out)
	if err != nil && res != nil && res.IsError {
		return res, fmt.Errorf("%s: %s", name, firstLine(textOf(res)))
	}
	return res, err
}

// errorCode is error.code of a tool error, from _meta where clients find it.
func errorCode(res *mcp.CallToolResult) string {
	b, err := json.Marshal(res.Meta["error"])
	if err != nil {
		return ""
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Code
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// close releases whatever the steps left open and removes a temporary dir.
func (r *selftestRig) close() error {
	_, err := r.shutdown(context.Background())
	for _, c := range []*client.Client{r.helper, r.check} {
		if c != nil {
			c.Close()
		}
	}
	if r.tempDir {
		err = errors.Join(err, os.RemoveAll(r.dir))
	}
	return err
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

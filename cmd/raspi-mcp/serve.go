package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/approval"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/chart"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
	"github.com/raspi-mcp/raspi-mcp/internal/simagent"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/sdnotify"
)

func cmdServe(args []string) error {
	c := newCommand("serve", "[--config FILE] | --sim [--dir DIR] [--config FILE] [--helper FILE]",
		"run the agent; with --sim, laptop mode: the helper as a child on a simulated board, you as admin")
	fs := c.fs
	cfgPath := fs.String("config", config.DefaultPath, "configuration `FILE` (with --sim: its settings under the laptop overrides, e.g. [[upstream]])")
	sim := fs.Bool("sim", false, "laptop mode: start the helper as a child, simulated board, caller is admin")
	dir := fs.String("dir", "", "with --sim: `DIR` for sockets, state and logs (default "+simDir("")+", where every client command looks)")
	helperBin := fs.String("helper", "", "with --sim: raspi-mcp-simhelper's `FILE` (default: beside this binary, in ../lib/raspi-mcp/, then $PATH)")
	httpListen := fs.String("http", "", "serve MCP over HTTP at `HOST:PORT` too (overrides [http] listen; port 0 picks a free one, the URL is printed)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("serve takes no arguments")
	}
	if *dir != "" && !*sim {
		return c.wrongArgs("--dir is for laptop mode: serve --sim --dir DIR")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var (
		cfg   config.Config
		mode  = "device"
		sys   sysinfo.Source
		board simagent.Board
	)
	if *sim {
		// A second laptop-mode agent in the same directory would take the
		// first one's socket and state from under it.
		if conn, err := net.Dial("unix", filepath.Join(simDir(*dir), "mcp.sock")); err == nil {
			conn.Close()
			status := "raspi-mcp status"
			if *dir != "" {
				status += " --dir " + *dir
			}
			return &exitError{code: 1, msg: fmt.Sprintf("a laptop-mode agent already runs in %s (%s shows it); stop it with Ctrl-C in its terminal, or start another with --dir DIR", simDir(*dir), status)}
		}
		mode = "sim"
		base := config.Default()
		if flagSet(fs, "config") {
			if base, err = config.Load(*cfgPath); err != nil {
				return err
			}
		}
		if cfg, err = laptopConfig(base, *dir); err != nil {
			return err
		}
		// The drop-ins of the laptop directory's config.d (those
		// manage_config_apply wrote) count as they do for the helper
		// child, which loads the same file.
		*cfgPath = filepath.Join(filepath.Dir(cfg.Agent.Socket), "config.toml")
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
		// The simulated board's systemd and processes, shared with the
		// helper child through units.json and procs.json; the system's
		// uptime counts from the same boot.
		if board, err = simagent.Open(filepath.Dir(cfg.Agent.Socket), false); err != nil {
			return err
		}
		sys = board.Sys
	} else {
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
		sys = sysinfo.NewLinux(sysinfo.LinuxOptions{})
	}
	if flagSet(fs, "http") {
		cfg.HTTP.Listen = *httpListen
		if err := cfg.Validate(); err != nil {
			return c.wrongArgs("--http: " + err.Error())
		}
	}
	// Taken first: systemd's socket must not leak into the helper child.
	httpLn, err := httpListener(cfg.HTTP.Listen)
	if err != nil {
		return err
	}
	if httpLn != nil {
		defer httpLn.Close()
	}
	started := tuneGC(cfg.Agent)
	// The ring keeps the latest records for logs.get_recent_app_logs.
	ring := applog.NewRing(500)
	log := slog.New(ring.Handler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level(cfg.Agent.LogLevel)}), "agent"))

	// The calls that wait on systemd wait the helper's bounds on them
	// ([helper] systemd_timeout, job_timeout) and a margin, not Timeout.
	helper := client.New(client.Options{Socket: cfg.Helper.Socket, ClientName: "raspi-mcp/" + version, Timeout: cfg.Helper.Timeout.D(),
		SystemdTimeout: cfg.Helper.SystemdTimeout.D(), JobTimeout: cfg.Helper.JobTimeout.D()})
	defer helper.Close()
	// The audit witness has its own connection: an append never queues
	// behind a slow privileged call on the shared one.
	witnessConn := client.New(client.Options{Socket: cfg.Helper.Socket, ClientName: "raspi-mcp/" + version + " audit-witness"})
	defer witnessConn.Close()
	var sup *supervisor // laptop mode's helper child
	if *sim {
		bin, err := findHelper(*helperBin)
		if err != nil {
			return err
		}
		dirPath := filepath.Dir(cfg.Agent.Socket)
		helperLog := ring.Writer("helper", os.Stderr)
		defer helperLog.Close()
		sup = &supervisor{bin: bin, args: simHelperArgs(dirPath), log: log, output: helperLog}
		done := make(chan struct{})
		go func() { sup.run(ctx); close(done) }()
		defer func() { stop(); <-done }()
		if err := waitHelper(ctx, helper, 10*time.Second); err != nil {
			return err
		}
	}

	db, err := store.Open(cfg.Agent.State, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	opts := agent.Options{Config: &cfg, ConfigPath: *cfgPath, Store: db, Sys: sys, Helper: helper, Witness: witnessConn, Version: version, Build: commit, Mode: mode, Logger: log,
		AppLog: ring, SelfCheckFault: selfCheckFault}
	if *sim {
		// Nothing of this machine: processes, network and units are the
		// simulated board's.
		opts.SimProcs, opts.Net = board.Procs, board.Net
		opts.Units, opts.Journal = board.Units, board.Units.Journal()
		opts.Apt = board.Apt
	} else {
		opts.Apt = apt.Linux{}
		u, err := units.NewDBus(ctx)
		if err != nil {
			// Service tools answer unavailable; everything else works.
			log.Warn("systemd over D-Bus unavailable; service tools will fail", "err", err)
			opts.Units = units.Unavailable{Err: err}
		} else {
			defer u.Close()
			opts.Units = u
		}
		opts.Journal = journal.Journalctl{}
		opts.Root, opts.Net = os.DirFS("/"), netinfo.Linux{Root: "/"}
	}
	// raspi-mcp-exporter writes the /metrics pages, in a child started at
	// the first scrape, so that an agent nobody scrapes does not carry
	// Prometheus's library (internal/scrape says why).
	opts.MetricsRenderer = scrape.Unavailable("metrics: raspi-mcp-exporter is installed neither beside raspi-mcp nor in ../lib/raspi-mcp/")
	if bin := libBinary("raspi-mcp-exporter"); bin != "" {
		exp := scrape.NewProcess(bin, os.Stderr)
		defer exp.Close() // after the HTTP endpoint stopped: nothing scrapes any more
		opts.MetricsRenderer = exp
	}
	// raspi-mcp-chart draws metrics_get_chart's PNGs, a child for each
	// chart, so that the agent does not carry the plotting library
	// (internal/chart says why); without it the tool answers unavailable.
	if bin := libBinary("raspi-mcp-chart"); bin != "" {
		opts.ChartRenderer = chart.Process{Bin: bin}
	}
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	// Registering the tools (resolving their schemas) leaves MiB of
	// garbage that a collector tuned for fewer cycles would keep until
	// the first calls; an idle agent should not hold it.
	started()
	if err := os.MkdirAll(filepath.Dir(cfg.Agent.Socket), 0o755); err != nil {
		return err
	}
	// Members of agent.socket_group may connect; what they may do is their
	// role's business, decided from their peer credentials.
	gid := -1
	if cfg.Agent.SocketGroup != "" {
		g, err := user.LookupGroup(cfg.Agent.SocketGroup)
		if err != nil {
			return fmt.Errorf("agent.socket_group: %w", err)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	ln, err := unixsock.Listen(cfg.Agent.Socket, 0o660, -1, gid)
	if err != nil {
		return fmt.Errorf("agent.socket: %w", err)
	}
	// The approval console (`raspi-mcp approve`): any local user may
	// connect; root and [guard] approvers are served, by peer credentials.
	consolePath := approval.SocketPath(cfg.Agent.Socket)
	consoleLn, err := unixsock.Listen(consolePath, approval.SocketMode, -1, -1)
	if err != nil {
		return fmt.Errorf("approval console: %w", err)
	}
	go func() {
		if err := a.ServeConsole(ctx, consoleLn); err != nil {
			log.Error("approval console stopped", "err", err)
		}
	}()
	log.Info("raspi-mcp ready", "version", version, "mode", mode, "socket", cfg.Agent.Socket, "state", cfg.Agent.State, "approve", consolePath)
	sdnotify.Ready("serving " + cfg.Agent.Socket)
	if *sim {
		printLaptopHelp(os.Stdout, filepath.Dir(cfg.Agent.Socket))
	}
	go sdnotify.Watchdog(ctx, func() error { _, err := db.Size(); return err })
	go reloadOnHUP(ctx, a, sup, log)
	var announce io.Writer
	if *sim {
		announce = os.Stdout
	}
	httpDone := serveHTTP(ctx, stop, a, cfg, httpLn, log, announce)
	err = a.Serve(ctx, ln)
	stop()
	if herr := <-httpDone; err == nil {
		err = herr
	}
	sdnotify.Stopping()
	log.Info("raspi-mcp stopped")
	return err
}

// reloadOnHUP reloads the config on SIGHUP (`systemctl reload raspi-mcp`)
// without dropping sessions; a bad file keeps the config in force, and
// Reload logs why.
// In laptop mode the helper child is sent the signal too, as systemd's
// PropagatesReloadTo does on a device.
func reloadOnHUP(ctx context.Context, a *agent.Agent, sup *supervisor, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading the config")
			_ = a.Reload()
			sup.signal(syscall.SIGHUP)
		}
	}
}

// laptopConfig prepares DIR for `serve --sim`: the effective config is
// written there so the helper child reads the same file the agent uses.
func laptopConfig(base config.Config, dir string) (config.Config, error) {
	dir = simDir(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return config.Config{}, err
	}
	u, err := user.Current()
	name := ""
	if err == nil {
		name = u.Username
	} else {
		name = strconv.Itoa(os.Getuid())
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return config.Config{}, err
	}
	cfg := config.LaptopFrom(base, abs, name)
	data, err := cfg.Encode()
	if err != nil {
		return config.Config{}, err
	}
	if err := os.WriteFile(filepath.Join(abs, "config.toml"), data, 0o600); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// simDir is the laptop-mode directory, shared with the client commands' --dir.
// By default it must be the same for `serve --sim` in a terminal and for
// `raspi-mcp stdio` started by an MCP client, which may pass only a few
// variables (HOME, PATH, USER) on. On macOS TMPDIR is a per-user folder a
// terminal has and such a child lacks, so the folder there hangs off HOME.
func simDir(dir string) string {
	if dir != "" {
		return dir
	}
	if runtime.GOOS == "darwin" {
		if c, err := os.UserCacheDir(); err == nil {
			return filepath.Join(c, "raspi-mcp")
		}
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "raspi-mcp")
	}
	return filepath.Join(os.TempDir(), "raspi-mcp-"+strconv.Itoa(os.Getuid()))
}

// findHelper is the laptop-mode helper, raspi-mcp-simhelper: the --helper
// flag's file, else beside this binary or in ../lib/raspi-mcp/ from it (as
// the package installs it), else on $PATH.
func findHelper(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if p := libBinary(simHelper); p != "" {
		return p, nil
	}
	p, err := exec.LookPath(simHelper)
	if err != nil {
		return "", errors.New(simHelper + " not found beside raspi-mcp, in ../lib/raspi-mcp/ nor in $PATH (build it: make build)")
	}
	return p, nil
}

// simHelper is the simulated board's helper binary; the device's
// raspi-mcp-helper cannot simulate.
const simHelper = "raspi-mcp-simhelper"

func waitHelper(ctx context.Context, c *client.Client, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := client.Call(ctx, c, proto.Status, proto.StatusReq{})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the helper did not come up: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// supervisor keeps the laptop-mode helper running, as systemd does on a Pi:
// if it dies it is restarted after a pause, and the agent's client redials.
type supervisor struct {
	bin    string
	args   []string
	log    *slog.Logger
	output io.Writer // the child's stdout and stderr

	mu    sync.Mutex
	child *os.Process // the running helper, nil between runs
}

// signal sends sig to the running helper child, if any; s may be nil
// (no child outside laptop mode).
func (s *supervisor) signal(sig os.Signal) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.child != nil {
		_ = s.child.Signal(sig)
	}
}

func (s *supervisor) setChild(p *os.Process) {
	s.mu.Lock()
	s.child = p
	s.mu.Unlock()
}

const restartDelay = 2 * time.Second

func (s *supervisor) run(ctx context.Context) {
	for ctx.Err() == nil {
		cmd := helperCommand(s.bin, s.args, s.output)
		if err := cmd.Start(); err != nil {
			s.log.Error("cannot start helper", "bin", s.bin, "err", err)
		} else {
			s.setChild(cmd.Process)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait(); s.setChild(nil) }()
			select {
			case <-ctx.Done():
				terminate(cmd, done)
				return
			case err := <-done:
				s.log.Warn("helper exited; restarting", "err", err, "in", restartDelay)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(restartDelay):
		}
	}
}

// simHelperArgs are the laptop-mode helper's arguments: the simulated board
// whose state files are in dir, beside the config the agent wrote there.
func simHelperArgs(dir string) []string {
	return []string{"--config", filepath.Join(dir, "config.toml"), "--power-log", filepath.Join(dir, "power.log"),
		"--sim-units", filepath.Join(dir, simagent.UnitsFile), "--sim-procs", filepath.Join(dir, simagent.ProcsFile), "--sim-apt", dir}
}

// helperCommand is the laptop-mode helper child, writing to out.
func helperCommand(bin string, args []string, out io.Writer) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// The child is not the unit's main process: it must not tell systemd
	// it is ready or feed the agent's watchdog.
	cmd.Env = withoutEnv(os.Environ(), "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
	cmd.SysProcAttr = helperAttr()
	return cmd
}

// terminate stops a child with SIGTERM, and kills it if it has not exited
// 3 s later; done receives cmd.Wait's result.
func terminate(cmd *exec.Cmd, done <-chan error) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(3 * time.Second):
		_ = cmd.Process.Kill()
		return <-done
	}
}

// startChild starts one helper child, not restarted if it dies; stop ends
// it and says how it exited (nil after a clean SIGTERM).
func startChild(bin string, args []string, out io.Writer) (stop func() error, err error) {
	cmd := helperCommand(bin, args, out)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() error { return terminate(cmd, done) }, nil
}

func level(s string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(s))
	return l
}

func withoutEnv(env []string, keys ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(keys, k) {
			out = append(out, kv)
		}
	}
	return out
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// printLaptopHelp tells the person who started laptop mode the exact
// commands to use it: --dir only when the directory is not the one every
// client command looks in, and this binary's absolute path for the MCP
// client, whose PATH may not have it. The client's command always names
// the directory: clients built on the MCP TypeScript SDK (the Inspector,
// Claude Desktop) start a server with a few variables only, without
// XDG_RUNTIME_DIR, and would look in another directory.
func printLaptopHelp(w io.Writer, dir string) {
	self, err := os.Executable()
	if err != nil {
		self = "raspi-mcp"
	}
	flag := ""
	if abs, _ := filepath.Abs(simDir("")); dir != abs {
		flag = " --dir " + dir
	}
	fmt.Fprintf(w, `laptop mode is ready: a simulated Raspberry Pi, every switch on, you are admin (state in %s).
From another terminal:
  raspi-mcp status%s
  raspi-mcp tools%s
  raspi-mcp call%s system_get_health_snapshot
  raspi-mcp call%s gpio_write_pin pin=17 value=high
The command for an MCP client (Claude, Cursor, VS Code, ...):
  %s stdio%s
Stop with Ctrl-C.
`, dir, flag, flag, flag, flag, self, " --dir "+dir)
}

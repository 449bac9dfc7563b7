// Command raspi-mcp-helper is the root helper: the only raspi-mcp process
// that touches power, hardware and systemd units. It serves a Unix socket
// that only the agent's user and root may use, and re-checks every request
// against its own reading of the root-owned config.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
	"github.com/raspi-mcp/raspi-mcp/sdnotify"
)

// version is set at link time (-X main.version=...).
var version = "0.1.0-dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "self-update" {
		if err := runSelfUpdate(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "raspi-mcp-helper:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp-helper:", err)
		os.Exit(1)
	}
}

func run() error {
	cfgPath := flag.String("config", config.DefaultPath, "configuration file")
	sim := flag.Bool("sim", false, "simulated board: record power actions instead of performing them")
	powerLog := flag.String("power-log", "", "with --sim: append power events as JSON lines to this file")
	simUnits := flag.String("sim-units", "", "with --sim: the simulated systemd's state file (shared with the agent)")
	simApt := flag.String("sim-apt", "", "with --sim: the directory of the simulated package manager's state (shared with the agent); without it no package method is served")
	simProcs := flag.String("sim-procs", "", "with --sim: the simulated process table's state file (shared with the agent); without it no process is signalled")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("raspi-mcp-helper", version)
		return nil
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level(cfg.Agent.LogLevel)}))
	var pw power.Power
	backend := "linux"
	if *sim {
		backend = "sim"
		s := power.NewSim(*powerLog)
		defer s.Close()
		pw = s
	} else {
		l, err := power.NewLogind()
		if err != nil {
			// Power tools will fail with a clear error; everything else still works.
			log.Warn("logind unavailable; power actions will fail", "err", err)
		} else {
			defer l.Close()
			pw = l
		}
	}
	hw, closeHW := hardware(*sim, log)
	defer closeHW()
	var cam camera.Camera
	if *sim {
		cam = camsim.New(cfg.Camera.MediaRoot)
	} else {
		cam = camera.NewRpicam(camera.RpicamOptions{MediaRoot: cfg.Camera.MediaRoot})
	}
	ops, accounts, closeOps, err := operations(*sim, *simUnits, *simProcs, *simApt, log)
	if err != nil {
		return err
	}
	defer closeOps()
	wit := openWitness(cfg.Helper.StateDir, log)
	if wit != nil {
		defer wit.Close()
	}
	updates, closeUpdates := selfUpdates(*sim, &cfg, *cfgPath, log)
	defer closeUpdates()
	backends := privhelper.Backends{Power: pw, Hardware: hw, Camera: cam, Ops: ops,
		Witness: wit, Backend: backend, Version: version, Logger: log, Accounts: accounts, Updates: updates}
	opts, err := privhelper.OptionsFromConfig(&cfg, backends)
	if err != nil {
		return err
	}
	// A reload (SIGHUP, config.apply) reads the file again over the same
	// backends; the socket and the backends themselves stay as started.
	opts.ConfigPath = *cfgPath
	opts.Reload = func() (privhelper.Options, error) {
		next, err := config.Load(*cfgPath)
		if err != nil {
			return privhelper.Options{}, err
		}
		return privhelper.OptionsFromConfig(&next, backends)
	}
	agentUID := opts.Policy.AgentUID
	// The agent runs as its own user: it must own the socket to connect. The
	// group stays root's: the agent's group is the one SSH users are put in.
	owner := -1
	if os.Geteuid() == 0 && agentUID != 0 {
		owner = agentUID
	}
	ln, err := unixsock.Listen(cfg.Helper.Socket, privhelper.SocketMode, owner, -1)
	if err != nil {
		return err
	}
	srv := privhelper.NewServer(opts)
	// Relays off, inputs pulled as the owner said, before anyone may ask.
	if err := srv.ApplySafeStates(context.Background()); err != nil {
		log.Warn("some pins could not be put in their safe state", "err", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *sim {
		go stopWithParent(ctx, os.Getppid(), stop, log)
	}
	go reloadOnHUP(ctx, srv, log)
	log.Info("raspi-mcp-helper ready", "version", version, "socket", cfg.Helper.Socket, "agent_uid", agentUID, "backend", backend)
	sdnotify.Ready("serving " + cfg.Helper.Socket)
	go sdnotify.Watchdog(ctx, nil)
	err = srv.Serve(ctx, ln)
	sdnotify.Stopping()
	return err
}

// reloadOnHUP reloads the config on SIGHUP (`systemctl reload
// raspi-mcp-helper`): connections stay open; a bad file keeps the policy in
// force, and Reload logs why.
func reloadOnHUP(ctx context.Context, srv *privhelper.Server, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			log.Info("SIGHUP: reloading the config")
			_ = srv.Reload(ctx)
		}
	}
}

// openWitness opens the audit witness in the helper's state directory. The
// directory must not be writable by anyone but its owner: the witness is
// worth nothing if the agent's user can replace it. Without a witness the
// helper still serves everything else, and the agent reports the witness
// as unavailable.
func openWitness(dir string, log *slog.Logger) *witness.Log {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Warn("audit witness off: cannot create the state directory", "dir", dir, "err", err)
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		log.Warn("audit witness off", "dir", dir, "err", err)
		return nil
	}
	if st.Mode().Perm()&0o022 != 0 {
		log.Warn("audit witness off: the state directory is writable by group or others", "dir", dir, "mode", st.Mode().Perm().String())
		return nil
	}
	w, err := witness.Open(dir)
	if err != nil {
		log.Warn("audit witness off", "err", err)
		return nil
	}
	head := w.Head()
	log.Info("audit witness open", "path", w.Path(), "seq", head.Seq)
	return w
}

func level(s string) slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(s))
	return l
}

// hardware opens the backends: the simulated board, or the kernel's GPIO
// character devices and /sys/class/pwm. A Linux backend that cannot open
// (no gpiochip on this machine) is left out and its methods are not served.
func hardware(sim bool, log *slog.Logger) (privhelper.Hardware, func()) {
	if sim {
		b := privhelper.NewSimBoard()
		return b.Hardware(), b.Close
	}
	ic := privhelper.I2CFrom(i2c.NewLinux("/"), "/")
	hw := privhelper.Hardware{PWM: privhelper.PWMFrom(pwm.NewSysfs("/")), I2C: ic}
	g, err := gpio.NewLinux(gpio.DefaultConsumer)
	if err != nil {
		log.Warn("no GPIO controller; gpio methods are off", "err", err)
		return hw, func() { ic.Close() }
	}
	hw.GPIO = privhelper.GPIOFrom(g)
	return hw, func() { g.Close(); ic.Close() }
}

// operations opens systemd and the process signaller: on a device, systemd
// over D-Bus and the real /proc; under --sim, the simulated systemd and
// process table in the files the agent shares, with the board's accounts
// for protected users (nil without --sim-procs: then no process is
// signalled, and never a real one). Without a system bus the service
// methods are not served; signals on a device always are.
func operations(sim bool, simUnits, simProcs, simApt string, log *slog.Logger) (ops privhelper.Ops, accounts func(string) (int, bool), closeAll func(), err error) {
	if sim {
		ops, accounts, err = privhelper.OpenSimOps(simUnits, simProcs)
		if err == nil && simApt != "" {
			ops.Apt, err = privhelper.OpenSimApt(simApt)
		}
		return ops, accounts, func() {}, err
	}
	ops.Processes = privhelper.ProcessesFrom("/")
	d, err := units.NewDBus(context.Background())
	if err != nil {
		log.Warn("systemd over D-Bus unavailable; service methods are off", "err", err)
		return ops, nil, func() {}, nil
	}
	ops.Units = privhelper.UnitsFrom(d)
	// apt runs as transient units of the same systemd, outside the
	// helper's sandbox.
	ops.Apt = privhelper.NewAptRunner(d)
	return ops, nil, d.Close, nil
}

// Package daemon is the helper process around privhelper's server: it
// loads the config, opens the audit witness, serves the socket, reloads on
// SIGHUP and tells systemd it is ready. raspi-mcp-helper runs it with the
// device's backends and nothing else; raspi-mcp-simhelper (laptop mode,
// the self-test) runs it with the simulated board's. So the root helper
// carries no code that pretends to drive hardware, and no flag can make it.
package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
	"github.com/raspi-mcp/raspi-mcp/sdnotify"
)

// Options says which helper runs.
type Options struct {
	Name    string // the binary's name, for --version and the log
	Version string
	// Flags holds the binary's own flags; Run adds --config and --version
	// and parses Args with it.
	Flags *flag.FlagSet
	Args  []string
	// Open opens the backends the helper drives, from the loaded config;
	// Run fills in the witness, version and logger. close releases them.
	Open func(cfg *config.Config, cfgPath string, log *slog.Logger) (b privhelper.Backends, close func(), err error)
	// StopWithParent ends the helper once the process that started it has
	// gone: laptop mode's agent starts it as a child.
	StopWithParent bool
}

// Run serves the helper until SIGINT or SIGTERM.
func Run(o Options) error {
	cfgPath := o.Flags.String("config", config.DefaultPath, "configuration file")
	showVersion := o.Flags.Bool("version", false, "print the version and exit")
	if err := o.Flags.Parse(o.Args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(o.Name, o.Version)
		return nil
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log := Logger(cfg)
	backends, closeBackends, err := o.Open(&cfg, *cfgPath, log)
	if err != nil {
		return err
	}
	defer closeBackends()
	if backends.Witness = openWitness(cfg.Helper.StateDir, log); backends.Witness != nil {
		defer backends.Witness.Close()
	}
	backends.Version, backends.Logger = o.Version, log
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
	defer srv.Close()
	// Relays off, inputs pulled as the owner said, before anyone may ask.
	if err := srv.ApplySafeStates(context.Background()); err != nil {
		log.Warn("some pins could not be put in their safe state", "err", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.StopWithParent {
		go stopWithParent(ctx, os.Getppid(), stop, log)
	}
	go reloadOnHUP(ctx, srv, log)
	log.Info(o.Name+" ready", "version", o.Version, "socket", cfg.Helper.Socket, "agent_uid", agentUID, "backend", backends.Backend)
	sdnotify.Ready("serving " + cfg.Helper.Socket)
	go sdnotify.Watchdog(ctx, nil)
	err = srv.Serve(ctx, ln)
	sdnotify.Stopping()
	return err
}

// Logger writes text records to stderr at the config's [agent] log_level.
func Logger(cfg config.Config) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(cfg.Agent.LogLevel))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
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

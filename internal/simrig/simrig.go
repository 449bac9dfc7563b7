// Package simrig builds a complete simulated Raspberry Pi in one process:
// the board's hardware, power, systemd, processes, system information and
// network, the root helper's server on its real socket (with its audit
// witness and the policy of privhelper.OptionsFromConfig), the agent's
// bbolt store and a helper client. The agent's tests run on it; `serve
// --sim` and `raspi-mcp selftest` share its agent side (internal/simagent)
// and start the helper binary instead.
//
// It builds everything but the agent itself: the agent's own tests are in
// package agent and import this package, which therefore must not import
// agent. The caller fills agent.Options from a Rig's fields.
package simrig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim"
	hwi2c "github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/internal/simagent"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// Options says where the device lives and how it differs from laptop mode.
type Options struct {
	// Dir holds the board's shared state files (units.json, procs.json);
	// it must exist. Sockets, store and witness are where Config puts them.
	Dir string
	// Config is the effective config, usually config.Laptop(Dir, user)
	// with the caller's changes. The helper's policy comes from it through
	// privhelper.OptionsFromConfig, as in the helper binary.
	Config config.Config
	// Version is the helper's version and the client's name suffix.
	Version string
	// HelperLog receives the helper server's records; nil discards.
	HelperLog *slog.Logger
	// PowerLog is where the simulated power backend appends its events;
	// "" keeps them in memory only.
	PowerLog string
	// Chips join the board's I²C bus 1 beside the BME280 and TMP102.
	Chips []hwi2c.Chip
	// HostProcesses lets the helper identify and signal this machine's
	// processes, and protects this machine's accounts, for tests of the
	// real /proc reader that signal only their own children. Otherwise
	// the processes are the simulated board's table, as in laptop mode.
	HostProcesses bool
	// HelperTimeout and DialTimeout are the client's; 0 means its defaults.
	HelperTimeout, DialTimeout time.Duration
	// HandlerTimeout bounds each helper request; 0 means the server's
	// default. Tests on a busy machine raise it (a sim photo can take seconds).
	HandlerTimeout time.Duration
	// ConfigPath, when set, is the file Config was loaded from: the helper
	// then serves config.apply and reloads from it, as the binary does.
	ConfigPath string
	// NoLogind starts the helper without a power backend, as on an image
	// without systemd-logind: it then serves no power methods.
	NoLogind bool
}

// Rig is one simulated device. Its devices outlive helper restarts, as a
// real board's do.
type Rig struct {
	Config *config.Config
	Board  *privhelper.SimBoard
	Power  *power.Sim
	Store  *store.DB // nil before OpenStore
	// Packages is the simulated package manager raspi-mcp updates itself
	// with (manage_update_server); it outlives helper restarts.
	Packages *selfupdate.Sim
	Agent    simagent.Board // what the agent reads; Agent.Procs is nil with HostProcesses
	Helper   *client.Client
	// SafeStates is what applying the pins' safe states said at the last
	// helper start: the helper serves even when it fails, as the binary
	// does (a line another program holds), and logs a warning.
	SafeStates error

	o       Options
	mu      sync.Mutex
	stop    context.CancelFunc // nil when the helper is not running
	done    chan error
	witness *witness.Log // the running helper's
}

// New builds the board and the agent's side of it; the store and the
// helper are opened by OpenStore and StartHelper (or all at once by Start).
func New(o Options) (*Rig, error) {
	cfg := o.Config
	r := &Rig{Config: &cfg, o: o, Board: privhelper.NewSimBoard(o.Chips...), Power: power.NewSim(o.PowerLog)}
	var err error
	if r.Packages, err = selfupdate.NewSim(filepath.Join(o.Dir, SimPackagesFile)); err != nil {
		r.Close()
		return nil, err
	}
	if r.Agent, err = simagent.Open(o.Dir, o.HostProcesses); err != nil {
		r.Close()
		return nil, err
	}
	r.Helper = client.New(client.Options{Socket: cfg.Helper.Socket, ClientName: "raspi-mcp/" + o.Version,
		Timeout: o.HelperTimeout, DialTimeout: o.DialTimeout})
	return r, nil
}

// Start is New, OpenStore and StartHelper.
func Start(o Options) (*Rig, error) {
	r, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := r.OpenStore(); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.StartHelper(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenStore opens the agent's bbolt file at [agent] state.
func (r *Rig) OpenStore() error {
	db, err := store.Open(r.Config.Agent.State, store.Options{})
	if err != nil {
		return err
	}
	r.Store = db
	return nil
}

// StartHelper serves the helper protocol on [helper] socket, built as
// raspi-mcp-simhelper builds it: its own handles on the shared
// systemd and process files, the witness in [helper] state_dir, and the
// policy from the config.
func (r *Rig) StartHelper() error {
	r.mu.Lock()
	running := r.stop != nil
	r.mu.Unlock()
	if running {
		return errors.New("simrig: the helper is already running")
	}
	opts, wit, err := r.helperOptions()
	if err != nil {
		return err
	}
	srv := privhelper.NewServer(opts)
	// Relays off, inputs pulled as the owner said, before anyone may ask.
	if r.SafeStates = srv.ApplySafeStates(context.Background()); r.SafeStates != nil {
		opts.Logger.Warn("some pins could not be put in their safe state", "err", r.SafeStates)
	}
	ln, err := unixsock.Listen(r.Config.Helper.Socket, privhelper.SocketMode, -1, -1)
	if err != nil {
		wit.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	r.mu.Lock()
	r.stop, r.done, r.witness = cancel, done, wit
	r.mu.Unlock()
	return nil
}

func (r *Rig) helperOptions() (privhelper.Options, *witness.Log, error) {
	log := r.o.HelperLog
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b, err := r.helperOps(privhelper.Backends{Power: r.Power, Hardware: r.Board.Hardware(),
		Camera: camsim.New(r.Config.Camera.MediaRoot), Backend: "sim", Version: r.o.Version, Logger: log})
	if r.o.NoLogind {
		b.Power = nil
	}
	if err != nil {
		return privhelper.Options{}, nil, err
	}
	b.Updates = privhelper.SimUpdates(r.Config, r.Packages, log)
	if b.Witness, err = witness.Open(r.Config.Helper.StateDir); err != nil {
		return privhelper.Options{}, nil, err
	}
	opts, err := privhelper.OptionsFromConfig(r.Config, b)
	if err != nil {
		b.Witness.Close()
		return privhelper.Options{}, nil, err
	}
	opts.HandlerTimeout = r.o.HandlerTimeout
	if p := r.o.ConfigPath; p != "" {
		opts.ConfigPath = p
		opts.Reload = func() (privhelper.Options, error) {
			next, err := config.Load(p)
			if err != nil {
				return privhelper.Options{}, err
			}
			return privhelper.OptionsFromConfig(&next, b)
		}
	}
	return opts, b.Witness, nil
}

// helperOps opens the helper's own handles on the simulated systemd and
// process table, as raspi-mcp-simhelper does with --sim-units and --sim-procs.
func (r *Rig) helperOps(b privhelper.Backends) (privhelper.Backends, error) {
	procsPath := filepath.Join(r.o.Dir, simagent.ProcsFile)
	if r.o.HostProcesses {
		procsPath = ""
	}
	var err error
	if b.Ops, b.Accounts, err = privhelper.OpenSimOps(filepath.Join(r.o.Dir, simagent.UnitsFile), procsPath); err != nil {
		return b, err
	}
	if r.o.HostProcesses {
		b.Ops.Processes = privhelper.ProcessesFrom("/")
	}
	if b.Ops.Apt, err = privhelper.OpenSimApt(r.o.Dir); err != nil {
		return b, err
	}
	return b, nil
}

// SimPackagesFile holds the simulated package manager's state in the
// device's directory.
const SimPackagesFile = "packages.json"

// StopHelper ends the helper server, as a crash or a restart would: its
// connections drop and its witness closes; the board keeps its state.
func (r *Rig) StopHelper() error {
	r.mu.Lock()
	stop, done, wit := r.stop, r.done, r.witness
	r.stop, r.done, r.witness = nil, nil, nil
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	err := <-done
	if wit != nil {
		err = errors.Join(err, wit.Close())
	}
	if err != nil {
		return fmt.Errorf("simrig: helper: %w", err)
	}
	return nil
}

// CloseStore closes the agent's store, for a caller that reopens the file.
func (r *Rig) CloseStore() error {
	if r.Store == nil {
		return nil
	}
	err := r.Store.Close()
	r.Store = nil
	return err
}

// Close stops the helper and releases everything the rig opened.
func (r *Rig) Close() error {
	err := r.StopHelper()
	if r.Helper != nil {
		r.Helper.Close()
	}
	err = errors.Join(err, r.CloseStore())
	r.Board.Close()
	return errors.Join(err, r.Power.Close())
}

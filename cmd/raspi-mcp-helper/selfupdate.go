package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/daemon"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// selfUpdates opens what updating raspi-mcp needs: the updater runs as
// `raspi-mcp-helper self-update` in a transient unit, on apt. The second
// return closes it; without a system bus nothing is served.
func selfUpdates(cfg *config.Config, cfgPath string, log *slog.Logger) (privhelper.Updates, func()) {
	exe, err := os.Executable()
	if err != nil {
		log.Warn("self-update off: cannot name this binary", "err", err)
		return privhelper.Updates{}, func() {}
	}
	// The unit runs in /: the config's path must not depend on where the
	// helper was started.
	if abs, err := filepath.Abs(cfgPath); err == nil {
		cfgPath = abs
	}
	d, err := units.NewDBus(context.Background())
	if err != nil {
		log.Warn("self-update off: systemd over D-Bus unavailable", "err", err)
		return privhelper.Updates{}, func() {}
	}
	return privhelper.Updates{
		Dir:      selfupdate.Dir(cfg.Helper.StateDir),
		Catalog:  selfupdate.Apt{},
		Launcher: selfupdate.Unit{Runner: d, Argv: []string{exe, "self-update", "--config", cfgPath}},
		Restarts: privhelper.DeviceRestarts(),
	}, d.Close
}

// runSelfUpdate is `raspi-mcp-helper self-update --id ID`: the updater,
// started by the helper as a transient unit. It carries out the run the
// helper recorded in its state directory and records the outcome there;
// everything it needs besides the id comes from that record and the
// root-owned config, never from the agent.
func runSelfUpdate(args []string) error {
	fs := flag.NewFlagSet("self-update", flag.ContinueOnError)
	cfgPath := fs.String("config", config.DefaultPath, "configuration file")
	id := fs.String("id", "", "the run the helper recorded")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("self-update: --id is required")
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log := daemon.Logger(cfg)
	dir := selfupdate.Dir(cfg.Helper.StateDir)
	u := &selfupdate.Updater{Dir: dir, Packages: selfupdate.Apt{}, Health: selfupdate.FileHealth{Dir: dir},
		Deadline: cfg.Manage.UpdateHealthTimeout.D(), Log: log.Info}
	run, err := u.Run(context.Background(), *id)
	if err != nil {
		return err
	}
	fmt.Printf("self-update %s: %s to %s %s %s\n", run.ID, run.From, run.To, run.Phase, run.Reason)
	if run.Phase != selfupdate.PhaseSucceeded {
		os.Exit(2)
	}
	return nil
}

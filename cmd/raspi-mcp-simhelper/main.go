// Command raspi-mcp-simhelper is the helper of laptop mode and of
// `raspi-mcp selftest`: the helper's server, policy and audit witness, as
// raspi-mcp-helper runs them, over the simulated board. Power actions are
// recorded, never performed; the systemd, process table and package
// manager are the board's, in state files the agent shares. It is a binary
// of its own so that the root helper on a device carries no simulation.
// `raspi-mcp serve --sim` starts it as a child.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/daemon"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// version is set at link time (-X main.version=...).
var version = "0.1.0-dev"

// packagesFile is the simulated package manager raspi-mcp updates itself
// with, in the helper's state directory.
const packagesFile = "sim-packages.json"

func main() {
	powerLog := flag.String("power-log", "", "append power events as JSON lines to this file")
	simUnits := flag.String("sim-units", "", "the simulated systemd's state file (shared with the agent)")
	simApt := flag.String("sim-apt", "", "the directory of the simulated package manager's state (shared with the agent); without it no package method is served")
	simProcs := flag.String("sim-procs", "", "the simulated process table's state file (shared with the agent); without it no process is signalled")
	open := func(cfg *config.Config, _ string, log *slog.Logger) (privhelper.Backends, func(), error) {
		pw := power.NewSim(*powerLog)
		board := privhelper.NewSimBoard()
		closeAll := func() { board.Close(); pw.Close() }
		b := privhelper.Backends{Backend: "sim", Power: pw, Hardware: board.Hardware(), Camera: camsim.New(cfg.Camera.MediaRoot)}
		var err error
		// The board's accounts protect its users; without --sim-procs no
		// process is signalled, and never one of this machine.
		if b.Ops, b.Accounts, err = privhelper.OpenSimOps(*simUnits, *simProcs); err == nil && *simApt != "" {
			b.Ops.Apt, err = privhelper.OpenSimApt(*simApt)
		}
		if err != nil {
			closeAll()
			return b, nil, err
		}
		if pk, err := selfupdate.NewSim(filepath.Join(cfg.Helper.StateDir, packagesFile)); err != nil {
			log.Warn("simulated self-update off", "err", err)
		} else {
			b.Updates = privhelper.SimUpdates(cfg, pk, log)
		}
		return b, closeAll, nil
	}
	err := daemon.Run(daemon.Options{Name: "raspi-mcp-simhelper", Version: version, Flags: flag.CommandLine, Args: os.Args[1:], Open: open, StopWithParent: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp-simhelper:", err)
		os.Exit(1)
	}
}

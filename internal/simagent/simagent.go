// Package simagent is the agent's side of the simulated board: what a
// laptop-mode agent reads instead of the host's systemd, processes, system
// information, network and packages. The helper's side (the simulated
// hardware and power, in privhelper) shares the board's state files with it
// in the device's directory. This package is all `raspi-mcp serve --sim`
// links of the simulation; internal/simrig builds both sides in one
// process for tests.
package simagent

import (
	"context"
	"path/filepath"

	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
)

// The simulated board's state files, shared by the agent and the helper
// (in laptop mode, two processes) in the device's directory.
const (
	UnitsFile = "units.json"
	ProcsFile = "procs.json"
)

// Board is what the agent reads of the simulated board: laptop mode's
// values of agent.Options' Units, Journal (Units.Journal()), SimProcs, Sys
// and Net, so nothing of the host machine is read.
type Board struct {
	Units *units.Sim
	Procs *procs.Sim // nil when the processes are the host's
	Sys   *sysinfo.Sim
	Net   netinfo.Sim
	Apt   *apt.Sim // the simulated package manager, run by the helper
}

// Open opens the board's systemd and process table in dir, which the
// helper opens too, with the system's uptime counted from the table's boot
// and the network's counters from the system's. With hostProcs the
// processes are the host's (Procs is nil), for tests of the real /proc
// reader that signal only their own children.
func Open(dir string, hostProcs bool) (Board, error) {
	var a Board
	var err error
	if a.Units, err = units.NewSim(filepath.Join(dir, UnitsFile)); err != nil {
		return a, err
	}
	var so sysinfo.SimOptions
	if !hostProcs {
		if a.Procs, err = privhelper.NewSimProcesses(filepath.Join(dir, ProcsFile), a.Units); err != nil {
			return a, err
		}
		if so.Start, err = a.Procs.BootTime(); err != nil {
			return a, err
		}
	}
	if a.Apt, err = apt.NewSim(dir); err != nil {
		return a, err
	}
	a.Sys = sysinfo.NewSim(so)
	a.Net = Network(a.Sys)
	return a, nil
}

// Network is laptop mode's network: the simulated board's interfaces,
// routes and sockets, with the traffic counters of sys (the simulated
// system information) so the network tools and the metrics agree.
func Network(sys sysinfo.CounterSource) netinfo.Sim {
	return netinfo.Sim{Stats: func(ctx context.Context) (map[string]netinfo.Stats, error) {
		c, err := sys.Counters(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[string]netinfo.Stats, len(c.Net))
		for _, n := range c.Net {
			out[n.Name] = netinfo.Stats{BytesSent: n.TxBytes, BytesRecv: n.RxBytes, PacketsSent: n.TxPackets, PacketsRecv: n.RxPackets,
				ErrorsIn: n.RxErrors, ErrorsOut: n.TxErrors, DropsIn: n.RxDrops, DropsOut: n.TxDrops}
		}
		return out, nil
	}}
}

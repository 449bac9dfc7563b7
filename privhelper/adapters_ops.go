package privhelper

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// UnitsFrom adapts systemd (over D-Bus, or the simulated one) to the helper.
func UnitsFrom(u units.Units) Units { return unitsAdapter{u} }

type unitsAdapter struct{ u units.Units }

func unitErr(err error) error {
	if errors.Is(err, units.ErrNotFound) {
		return proto.Errorf(proto.CodeNotFound, "%v", err)
	}
	return err
}

func stateOf(u units.Unit) proto.UnitState {
	return proto.UnitState{ActiveState: u.ActiveState, SubState: u.SubState, UnitFileState: u.UnitFileState, MainPID: u.MainPID}
}

func (a unitsAdapter) ActiveDependents(ctx context.Context, unit string) ([]string, error) {
	d, err := a.u.ActiveDependents(ctx, unit)
	return d, unitErr(err)
}

func (a unitsAdapter) Control(ctx context.Context, unit, action string) (proto.ServiceControlResp, error) {
	r, err := a.u.Control(ctx, unit, action)
	if err != nil {
		return proto.ServiceControlResp{}, unitErr(err)
	}
	return proto.ServiceControlResp{Unit: unit, Action: action, Job: r.Job, Before: stateOf(r.Before), After: stateOf(r.After)}, nil
}

func (a unitsAdapter) SetEnabled(ctx context.Context, unit string, enabled bool) (proto.ServiceEnableResp, error) {
	r, err := a.u.SetEnabled(ctx, unit, enabled)
	if err != nil {
		return proto.ServiceEnableResp{}, unitErr(err)
	}
	out := proto.ServiceEnableResp{Unit: unit, Before: r.Before, After: r.After, Changes: []proto.UnitFileChange{}}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, proto.UnitFileChange{Type: c.Type, File: c.File, Destination: c.Destination})
	}
	return out, nil
}

// ProcessesFrom reads identities from root's /proc and signals through it
// ("/" on a device).
func ProcessesFrom(root string) Processes { return procsAdapter{root: root, fsys: os.DirFS(root)} }

type procsAdapter struct {
	root string
	fsys fs.FS
}

func (p procsAdapter) Identify(pid int) (ProcIdentity, error) {
	id, err := procs.ReadIdentity(p.fsys, pid)
	if errors.Is(err, fs.ErrNotExist) {
		return ProcIdentity{}, proto.Errorf(proto.CodeNotFound, "privhelper: no process %d", pid).With("pid", pid)
	}
	if err != nil {
		return ProcIdentity{}, err
	}
	return ProcIdentity{PID: id.PID, PPID: id.PPID, UID: id.UID, StartTicks: id.StartTicks, Kernel: id.Kernel, Name: id.Name}, nil
}

func (p procsAdapter) Signal(pid int, startTicks uint64, sig string) error {
	s, _, err := procs.ParseSignal(sig)
	if err != nil {
		return proto.Errorf(proto.CodeInvalidArgument, "%v", err)
	}
	return procs.Signal(p.root, pid, startTicks, s)
}

// SimProcessesFrom adapts the simulated board's process table: identities
// are read from its rendered /proc with the same parser as the real one,
// and signals change the table, never a real process.
func SimProcessesFrom(s *procs.Sim) Processes { return simProcsAdapter{s} }

type simProcsAdapter struct{ s *procs.Sim }

func (p simProcsAdapter) Identify(pid int) (ProcIdentity, error) {
	id, err := procsAdapter{fsys: p.s.FS()}.Identify(pid)
	if err != nil {
		return id, err
	}
	id.Simulated, id.Self = true, p.s.IsSelf(pid)
	return id, nil
}

func (p simProcsAdapter) Signal(pid int, startTicks uint64, sig string) error {
	err := p.s.Signal(pid, startTicks, sig)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return proto.Errorf(proto.CodeNotFound, "privhelper: no process %d", pid).With("pid", pid)
	case errors.Is(err, procs.ErrReused):
		return proto.Errorf(proto.CodeFailedPrecondition, "privhelper: %v", err).With("pid", pid)
	}
	return err
}

// NewSimProcesses opens the simulated board's process table in the state
// file at path, which the agent and the helper share (as units.json): as
// many CPUs and as much memory as the simulated system information
// reports, so every tool counts the same board.
//
// u, the simulated systemd (nil for none), owns the table's services: a
// stopped unit's processes are gone, a restarted one's have its new main
// PID, and a signal that ends a unit's main process stops, fails or
// restarts the unit.
func NewSimProcesses(path string, u *units.Sim) (*procs.Sim, error) {
	b, err := sysinfo.NewSim(sysinfo.SimOptions{}).Basic(context.Background())
	if err != nil {
		return nil, err
	}
	o := procs.SimOptions{CPUs: b.CPUCores, MemTotal: b.MemoryTotalBytes}
	if u != nil {
		o.Systemd = simSystemd{u}
	}
	return procs.NewSim(path, o)
}

// simSystemd adapts the simulated systemd to the process table.
type simSystemd struct{ u *units.Sim }

func (s simSystemd) Services() ([]procs.SimService, error) {
	mains, err := s.u.MainProcesses(context.Background())
	if err != nil {
		return nil, err
	}
	out := make([]procs.SimService, 0, len(mains))
	for _, m := range mains {
		out = append(out, procs.SimService{Unit: m.Unit, PID: m.PID, Since: m.Since, Exe: m.Exe, Args: m.Args, User: m.User, MemoryBytes: m.MemoryBytes})
	}
	return out, nil
}

func (s simSystemd) MainExited(unit string, pid int, sig string) error {
	return s.u.MainExited(context.Background(), unit, pid, sig)
}

package privhelper

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
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

package privhelper

import (
	"context"
	"os"
	"slices"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Units is what the helper needs of systemd: changes, and the dependents
// check it repeats before a stop.
type Units interface {
	ActiveDependents(ctx context.Context, unit string) ([]string, error)
	Control(ctx context.Context, unit, action string) (proto.ServiceControlResp, error)
	SetEnabled(ctx context.Context, unit string, enabled bool) (proto.ServiceEnableResp, error)
}

// ProcIdentity is who a PID is right now, read from /proc by the helper
// itself: the agent's word on it is never taken.
type ProcIdentity struct {
	PID, PPID, UID int
	StartTicks     uint64
	Kernel         bool
	Name           string
	// Simulated marks a process of the simulated board's table: its pid
	// says nothing about the real processes, so Self, not a comparison
	// with the helper's and the agent's real pids, tells raspi-mcp itself.
	Simulated, Self bool
}

// Processes identifies and signals processes.
type Processes interface {
	Identify(pid int) (ProcIdentity, error)
	// Signal sends sig only if pid still has startTicks (no PID reuse in between).
	Signal(pid int, startTicks uint64, sig string) error
}

// Ops groups the operations backends; nil members are not served.
type Ops struct {
	Units     Units
	Processes Processes
	Apt       AptRunner // apt-get update and plans, as transient units
}

func (s *Server) registerOps() {
	if s.ops.Units != nil {
		handle(s.mux, proto.ServiceControl, s.serviceControl)
		handle(s.mux, proto.ServiceEnable, s.serviceEnable)
	}
	if s.ops.Processes != nil {
		handle(s.mux, proto.ProcessSignal, s.processSignal)
	}
	s.registerApt()
}

func (s *Server) unitChangeAllowed(unit string) error {
	if err := s.require(config.SwitchServiceEnabled, "the service namespace is disabled"); err != nil {
		return err
	}
	if err := s.require(config.SwitchServiceControl, "service control is disabled"); err != nil {
		return err
	}
	if !config.UnitMatches(s.rules().policy.Config.Service.Allow, unit) {
		return denied("unit %s is not in [service] allow", unit).With("unit", unit)
	}
	return nil
}

func (s *Server) serviceControl(ctx context.Context, r proto.ServiceControlReq) (proto.ServiceControlResp, error) {
	if err := s.unitChangeAllowed(r.Unit); err != nil {
		return proto.ServiceControlResp{}, err
	}
	if r.Action == proto.ServiceStop && !r.Force {
		deps, err := s.ops.Units.ActiveDependents(ctx, r.Unit)
		if err != nil {
			return proto.ServiceControlResp{}, err
		}
		if len(deps) > 0 {
			return proto.ServiceControlResp{}, proto.Errorf(proto.CodeFailedPrecondition,
				"privhelper: %d active units depend on %s", len(deps), r.Unit).With("dependent_services", deps)
		}
	}
	resp, err := s.ops.Units.Control(ctx, r.Unit, r.Action)
	if err == nil {
		s.logOp(ctx, "unit "+r.Action, "unit", r.Unit, "job", resp.Job, "force", r.Force,
			"before", resp.Before.ActiveState, "after", resp.After.ActiveState)
	}
	return resp, err
}

func (s *Server) serviceEnable(ctx context.Context, r proto.ServiceEnableReq) (proto.ServiceEnableResp, error) {
	if err := s.unitChangeAllowed(r.Unit); err != nil {
		return proto.ServiceEnableResp{}, err
	}
	resp, err := s.ops.Units.SetEnabled(ctx, r.Unit, r.Enabled)
	if err == nil {
		s.logOp(ctx, "unit file enablement", "unit", r.Unit, "enabled", r.Enabled, "before", resp.Before, "after", resp.After)
	}
	return resp, err
}

// processSignal refuses, whatever the agent says: PID 1, kernel threads,
// the helper, the agent (the peer), and the protected
// users' processes. The signal must be in the owner's list.
func (s *Server) processSignal(ctx context.Context, r proto.ProcessSignalReq) (proto.ProcessSignalResp, error) {
	pol := &s.rules().policy
	if err := s.require(config.SwitchProcessEnabled, "the process namespace is disabled"); err != nil {
		return proto.ProcessSignalResp{}, err
	}
	if err := s.require(config.SwitchProcessSignals, "sending signals is disabled"); err != nil {
		return proto.ProcessSignalResp{}, err
	}
	if p := pol.Config.Process; !slices.Contains(p.AllowedSignals, r.Signal) {
		return proto.ProcessSignalResp{}, denied("SIG%s is not in [process] allowed_signals", r.Signal).
			With("signal", r.Signal).With("allowed_signals", p.AllowedSignals)
	}
	id, err := s.ops.Processes.Identify(r.PID)
	if err != nil {
		return proto.ProcessSignalResp{}, err
	}
	self := id.Self
	if !id.Simulated {
		self = id.PID == os.Getpid() || id.PID == peerFrom(ctx).PID
	}
	switch {
	case id.PID == 1 || id.Kernel:
		return proto.ProcessSignalResp{}, denied("pid %d (%s) is init or a kernel thread and is never signalled", id.PID, id.Name).With("pid", id.PID)
	case self:
		return proto.ProcessSignalResp{}, denied("pid %d (%s) is raspi-mcp itself and is never signalled", id.PID, id.Name).With("pid", id.PID)
	case slices.Contains(pol.ProtectedUIDs, id.UID):
		return proto.ProcessSignalResp{}, denied("pid %d (%s) belongs to a protected user (uid %d)", id.PID, id.Name, id.UID).
			With("pid", id.PID).With("uid", id.UID).With("protected_users", pol.Config.Process.ProtectedUsers)
	case id.StartTicks != r.StartTicks:
		return proto.ProcessSignalResp{}, proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: pid %d is now a different process (%s, started at tick %d, not %d)", id.PID, id.Name, id.StartTicks, r.StartTicks).
			With("pid", id.PID)
	}
	if err := s.ops.Processes.Signal(r.PID, r.StartTicks, r.Signal); err != nil {
		return proto.ProcessSignalResp{}, err
	}
	s.logOp(ctx, "signal sent", "signal", r.Signal, "target_pid", id.PID, "target", id.Name, "target_uid", id.UID)
	return proto.ProcessSignalResp{PID: id.PID, Name: id.Name, UID: id.UID, Signal: r.Signal}, nil
}

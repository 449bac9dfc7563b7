package privhelper

import (
	"context"
	"errors"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// AptRunner runs the package manager; *apt.Runner is the one
// implementation, over systemd or the simulated board's.
type AptRunner interface {
	Refresh(ctx context.Context) (apt.RunInfo, error)
	Apply(ctx context.Context, p apt.Plan) (apt.RunInfo, error)
	Cancel(ctx context.Context, id string) (apt.RunInfo, error)
	Status(id string) (apt.RunInfo, error)
	List() []apt.RunInfo
}

var _ AptRunner = (*apt.Runner)(nil)

// AptDir is where the helper keeps apt's status files: its runtime
// directory, which its sandbox leaves writable.
const AptDir = "/run/raspi-mcp-helper/apt"

// NewAptRunner runs apt as transient units of systemd t.
func NewAptRunner(t units.Transient) *apt.Runner {
	return &apt.Runner{Units: t, Dir: AptDir, DpkgLog: "/var/log/dpkg.log",
		Lock: func() (*apt.Holder, error) { return apt.LockHolder("/proc", apt.LockFiles()) }}
}

// OpenSimApt is the simulated package manager in dir (its apt.json is
// shared with the agent), run by a simulated systemd in this process.
func OpenSimApt(dir string) (*apt.Runner, error) {
	s, err := apt.NewSim(dir)
	if err != nil {
		return nil, err
	}
	return s.Runner(&units.SimTransient{Programs: s.Programs()}), nil
}

func (s *Server) registerApt() {
	if s.ops.Apt == nil {
		return
	}
	handle(s.mux, proto.AptRefresh, s.aptRefresh)
	handle(s.mux, proto.AptApply, s.aptApply)
	handle(s.mux, proto.AptCancel, s.aptCancel)
	handle(s.mux, proto.AptStatus, s.aptStatus)
}

// updatesAllowed: refreshing and installing need [manage] updates, as the
// agent's tools do; the helper checks on its own copy of the config.
func (s *Server) updatesAllowed() error {
	return s.require(config.SwitchManageUpdates, "OS updates are disabled")
}

func (s *Server) aptRefresh(ctx context.Context, _ proto.AptRefreshReq) (proto.AptRun, error) {
	if err := s.updatesAllowed(); err != nil {
		return proto.AptRun{}, err
	}
	info, err := s.ops.Apt.Refresh(ctx)
	if err != nil {
		return proto.AptRun{}, aptError(err)
	}
	s.logOp(ctx, "apt refresh started", "run", info.ID, "unit", info.Unit)
	return aptRun(info), nil
}

// aptApply installs exactly the plan, after checking that the agent's
// hash is the hash of what it sent.
func (s *Server) aptApply(ctx context.Context, r proto.AptApplyReq) (proto.AptRun, error) {
	if err := s.updatesAllowed(); err != nil {
		return proto.AptRun{}, err
	}
	p := apt.Plan{Upgrades: changes(r.Upgrades), Installs: changes(r.Installs), Removals: changes(r.Removals), Held: append([]string{}, r.Held...)}
	if err := p.Validate(); err != nil {
		return proto.AptRun{}, proto.Errorf(proto.CodeInvalidArgument, "privhelper: %v", err)
	}
	if h := p.Hash(); h != r.PlanHash {
		return proto.AptRun{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: plan_hash %s is not the hash of the plan sent (%s)", r.PlanHash, h)
	}
	info, err := s.ops.Apt.Apply(ctx, p)
	if err != nil {
		return proto.AptRun{}, aptError(err)
	}
	s.logOp(ctx, "apt apply started", "run", info.ID, "plan_hash", info.PlanHash, "targets", info.Targets)
	return aptRun(info), nil
}

// aptCancel is allowed with updates off: stopping is the safe direction.
func (s *Server) aptCancel(ctx context.Context, r proto.AptCancelReq) (proto.AptRun, error) {
	info, err := s.ops.Apt.Cancel(ctx, r.ID)
	if err != nil {
		e := aptError(err)
		if pe, ok := e.(*proto.Error); ok && info.ID != "" {
			pe.With("phase", info.Phase).With("state", info.State)
		}
		return aptRun(info), e
	}
	s.logOp(ctx, "apt run cancelled", "run", info.ID, "phase", info.Phase)
	return aptRun(info), nil
}

func (s *Server) aptStatus(_ context.Context, r proto.AptStatusReq) (proto.AptStatusResp, error) {
	if r.ID != "" {
		info, err := s.ops.Apt.Status(r.ID)
		if err != nil {
			return proto.AptStatusResp{}, aptError(err)
		}
		return proto.AptStatusResp{Runs: []proto.AptRun{aptRun(info)}}, nil
	}
	out := proto.AptStatusResp{Runs: []proto.AptRun{}}
	for _, info := range s.ops.Apt.List() {
		out.Runs = append(out.Runs, aptRun(info))
	}
	return out, nil
}

func changes(ps []proto.AptPackage) []apt.Change {
	out := make([]apt.Change, 0, len(ps))
	for _, p := range ps {
		out = append(out, apt.Change{Name: p.Name, From: p.From, To: p.To})
	}
	return out
}

// aptError gives the runner's errors their codes: a held lock or a run in
// progress is resource_exhausted naming the holder, a cancel after dpkg
// started failed_precondition with the reason.
func aptError(err error) error {
	var le *apt.LockedError
	switch {
	case errors.As(err, &le):
		return proto.Errorf(proto.CodeResourceExhausted, "privhelper: %v", err).
			With("holder_pid", le.Holder.PID).With("holder_command", le.Holder.Command).With("lock", le.Holder.Lock)
	case errors.Is(err, apt.ErrBusy):
		return proto.Errorf(proto.CodeResourceExhausted, "privhelper: %v", err)
	case errors.Is(err, apt.ErrTooLate):
		return proto.Errorf(proto.CodeFailedPrecondition, "privhelper: %v", err)
	case errors.Is(err, apt.ErrNoRun):
		return proto.Errorf(proto.CodeNotFound, "privhelper: %v", err)
	}
	return err
}

// aptRun is the runner's record on the wire. The two types have the same
// fields (the wire type keeps proto free of hw/apt), so a field added to one
// and not the other stops this conversion compiling.
func aptRun(i apt.RunInfo) proto.AptRun { return proto.AptRun(i) }

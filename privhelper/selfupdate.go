package privhelper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// Updates is what the helper needs to update raspi-mcp itself: where runs
// are recorded (its own state directory, which the agent cannot write),
// what the package manager offers, and how the updater is started outside
// the helper (a transient unit on a device, a goroutine on the simulated
// board). Without a Catalog the update.* methods are not served.
type Updates struct {
	Dir      selfupdate.Dir
	Catalog  selfupdate.Catalog
	Launcher selfupdate.Launcher
	// Restarts are the units installing the package restarts, for the plan.
	Restarts []string
}

// SimUpdates is laptop mode's self-update: the updater runs in the
// helper's process on the simulated package manager, recording in the
// helper's state directory, with the deadline of [manage]
// update_health_timeout.
func SimUpdates(cfg *config.Config, pk *selfupdate.Sim, log *slog.Logger) Updates {
	dir := selfupdate.Dir(cfg.Helper.StateDir)
	u := &selfupdate.Updater{Dir: dir, Packages: pk, Health: selfupdate.FileHealth{Dir: dir, Poll: 20 * time.Millisecond},
		Deadline: cfg.Manage.UpdateHealthTimeout.D(), Log: log.Info}
	return Updates{Dir: dir, Catalog: pk, Launcher: selfupdate.InProcess{Updater: u}, Restarts: DeviceRestarts()}
}

// DeviceRestarts are the units installing the package restarts (its
// prerm stops both, its postinst starts them on the new binaries).
func DeviceRestarts() []string { return []string{"raspi-mcp.service", "raspi-mcp-helper.service"} }

func (s *Server) registerUpdates() {
	if s.updates.Catalog == nil || s.updates.Launcher == nil || s.updates.Dir == "" {
		return
	}
	handle(s.mux, proto.UpdatePlan, s.updatePlan)
	handle(s.mux, proto.UpdateStart, s.updateStart)
	handle(s.mux, proto.UpdateState, s.updateState)
	handle(s.mux, proto.UpdateReport, s.updateReport)
}

// updatePlan only reads, so it is served whatever the switch: the agent's
// dry run shows what an update would do before the owner turns it on.
func (s *Server) updatePlan(ctx context.Context, _ proto.UpdatePlanReq) (proto.UpdatePlanResp, error) {
	inst, err := s.updates.Catalog.Installed(ctx)
	if err != nil {
		return proto.UpdatePlanResp{}, proto.Errorf(proto.CodeUnavailable, "privhelper: reading the installed raspi-mcp version: %v", err)
	}
	cands, err := s.updates.Catalog.Available(ctx)
	if err != nil {
		return proto.UpdatePlanResp{}, proto.Errorf(proto.CodeUnavailable, "privhelper: reading the versions on offer: %v", err)
	}
	out := proto.UpdatePlanResp{Installed: inst, Candidates: []proto.PackageCandidate{}, HealthTimeout: s.rules().policy.Config.Manage.UpdateHealthTimeout.D(),
		Restarts: append([]string{}, s.updates.Restarts...)}
	for _, c := range cands {
		out.Candidates = append(out.Candidates, proto.PackageCandidate(c))
	}
	return out, nil
}

// updateStart re-checks the whole request against the helper's own view:
// the agent may be compromised, and a downgrade to a release with a known
// hole is as much a widening of powers as any.
func (s *Server) updateStart(ctx context.Context, r proto.UpdateStartReq) (proto.UpdateStartResp, error) {
	p := peerFrom(ctx)
	if err := s.require(config.SwitchManageUpdates, "updating raspi-mcp is disabled"); err != nil {
		return proto.UpdateStartResp{}, err
	}
	for _, f := range [...]struct{ name, v string }{{"from", r.From}, {"to", r.To}} {
		if err := selfupdate.ValidVersion(f.v); err != nil {
			return proto.UpdateStartResp{}, proto.Errorf(proto.CodeInvalidArgument, "privhelper: %s: %v", f.name, err).With("field", f.name)
		}
	}
	plan, err := s.updatePlan(ctx, proto.UpdatePlanReq{})
	if err != nil {
		return proto.UpdateStartResp{}, err
	}
	if plan.Installed != r.From {
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: raspi-mcp %s is installed, not %s", plan.Installed, r.From).With("installed", plan.Installed)
	}
	if !slices.ContainsFunc(plan.Candidates, func(c proto.PackageCandidate) bool { return c.Version == r.To && c.Channel == r.Channel }) {
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeNotFound,
			"privhelper: channel %s does not offer raspi-mcp %s", r.Channel, r.To).With("channel", r.Channel).With("version", r.To)
	}
	switch c := apt.CompareVersions(r.To, r.From); {
	case c == 0:
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: raspi-mcp %s is already installed", r.To)
	case c < 0 && !r.AllowDowngrade:
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: %s is older than the installed %s: a downgrade needs allow_downgrade", r.To, r.From)
	}
	run, err := selfupdate.Begin(s.updates.Dir, selfupdate.Run{ID: r.ID, From: r.From, To: r.To, Channel: r.Channel}, time.Now())
	if errors.Is(err, selfupdate.ErrBusy) {
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: %v", err)
	}
	if err != nil {
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeInternal, "privhelper: recording the update: %v", err)
	}
	unit, err := s.updates.Launcher.Launch(ctx, r.ID)
	if err != nil {
		// Nothing was installed: the record says so, and the next
		// update may start.
		run.Phase, run.Reason, run.Finished, run.Installed = selfupdate.PhaseFailed, fmt.Sprintf("nothing changed: the updater did not start: %v", err), time.Now().UTC(), r.From
		if werr := s.updates.Dir.WriteRun(run); werr != nil {
			s.log.Error("privhelper: recording a failed update start", "err", werr)
		}
		return proto.UpdateStartResp{}, proto.Errorf(proto.CodeUnavailable, "privhelper: starting the updater: %v", err)
	}
	s.log.Info("privhelper: self-update started", "id", r.ID, "from", r.From, "to", r.To, "channel", r.Channel, "unit", unit, "uid", p.UID, "pid", p.PID)
	out := runOf(run)
	out.Unit = unit
	return proto.UpdateStartResp{Run: out}, nil
}

func runOf(r selfupdate.Run) proto.UpdateRun {
	return proto.UpdateRun{ID: r.ID, From: r.From, To: r.To, Channel: r.Channel, Phase: r.Phase, Started: r.Started,
		Finished: r.Finished, Reason: r.Reason, Installed: r.Installed}
}

func (s *Server) updateState(context.Context, proto.UpdateStateReq) (proto.UpdateStateResp, error) {
	run, ok, err := s.updates.Dir.ReadRun()
	if err != nil {
		return proto.UpdateStateResp{}, proto.Errorf(proto.CodeInternal, "privhelper: %v", err)
	}
	if !ok {
		return proto.UpdateStateResp{}, nil
	}
	rep, rok, err := s.updates.Dir.ReadReport()
	if err != nil {
		return proto.UpdateStateResp{}, proto.Errorf(proto.CodeInternal, "privhelper: %v", err)
	}
	return proto.UpdateStateResp{Found: true, Run: runOf(run), Reported: rok && rep.ID == run.ID && rep.Version == run.To}, nil
}

// updateReport takes the new agent's word on its start-up check, for the
// run under way and from its target version only: an old agent that is
// still running cannot vouch for the new one.
func (s *Server) updateReport(ctx context.Context, r proto.UpdateReportReq) (proto.UpdateReportResp, error) {
	run, ok, err := s.updates.Dir.ReadRun()
	if err != nil {
		return proto.UpdateReportResp{}, proto.Errorf(proto.CodeInternal, "privhelper: %v", err)
	}
	switch {
	case !ok || run.ID != r.ID:
		return proto.UpdateReportResp{Why: fmt.Sprintf("no update %s is recorded", r.ID)}, nil
	case selfupdate.Final(run.Phase) || run.Phase == selfupdate.PhaseRollingBack:
		return proto.UpdateReportResp{Why: fmt.Sprintf("update %s is %s", r.ID, run.Phase)}, nil
	case r.Version != run.To:
		return proto.UpdateReportResp{Why: fmt.Sprintf("update %s installs %s; a report from %s does not count", r.ID, run.To, r.Version)}, nil
	}
	rep := selfupdate.Report{ID: r.ID, Version: r.Version, Healthy: r.Healthy, Reason: r.Reason, Reported: time.Now().UTC()}
	if err := s.updates.Dir.WriteReport(rep); err != nil {
		return proto.UpdateReportResp{}, proto.Errorf(proto.CodeInternal, "privhelper: %v", err)
	}
	p := peerFrom(ctx)
	s.log.Info("privhelper: self-update health reported", "id", r.ID, "version", r.Version, "healthy", r.Healthy, "reason", r.Reason, "uid", p.UID, "pid", p.PID)
	return proto.UpdateReportResp{Accepted: true}, nil
}

package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// manage.update_server updates raspi-mcp itself from the project's apt
// repository. The agent only plans and asks: the root helper re-checks the
// request and starts an updater as a transient unit of its own, which
// survives the restart of both daemons that installing the package causes.
// The new agent checks itself at start and reports to the helper; when no
// healthy report comes in time, the updater reinstalls the previous
// version by itself. The job in the agent's database is completed by
// whichever agent is running when the updater ends.

// serverUpdateIn is manage.update_server: the tool catalog's channel and
// target_version (spec 002 §8.2), and a flag without which no downgrade
// happens.
type serverUpdateIn struct {
	Channel        string `json:"channel,omitempty"`
	TargetVersion  string `json:"target_version,omitempty" jsonschema:"default: the newest"`
	AllowDowngrade bool   `json:"allow_downgrade,omitempty" jsonschema:"allow an older target_version"`
	tool.GuardArgs
}

// commonStatus is the tool catalog's status of a long-running operation
// (spec 002 §8.4): pending, running, succeeded or failed.
type commonStatus struct {
	Status     string `json:"status" jsonschema:"pending, running, succeeded or failed"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	Message    string `json:"message,omitempty"`
}

// serverUpdateOut is the catalog's UpdateStatus with what the plan shows.
type serverUpdateOut struct {
	OldVersion           string       `json:"old_version,omitempty" jsonschema:"the installed version"`
	NewVersion           string       `json:"new_version,omitempty" jsonschema:"the version to install"`
	Status               commonStatus `json:"status"`
	Channel              string       `json:"channel"`
	Downgrade            bool         `json:"downgrade,omitempty"`
	DownloadBytes        int64        `json:"download_bytes,omitempty" jsonschema:"the package's size as the repository states it"`
	HealthTimeoutSeconds int          `json:"health_timeout_seconds" jsonschema:"how long the new version has to prove healthy before it is rolled back"`
	Restarts             []string     `json:"restarts" jsonschema:"the services installing the package restarts"`
	JobID                string       `json:"job_id,omitempty" jsonschema:"follow it with manage_list_jobs; the outcome is last_update in manage_get_server_status"`
	DryRun               bool         `json:"dry_run,omitempty"`
	Plan                 []string     `json:"plan,omitempty"`
}

// lastUpdateStatus is manage.get_server_status's last_update: the catalog's
// common status with the versions, and the outcome (succeeded, failed:
// nothing changed or even the rollback failed, rolled_back: the previous
// version is running again) with its reason.
type lastUpdateStatus struct {
	commonStatus
	JobID   string `json:"job_id"`
	From    string `json:"from"`
	To      string `json:"to"`
	Outcome string `json:"outcome,omitempty" jsonschema:"succeeded, failed or rolled_back; empty while running"`
	Reason  string `json:"reason,omitempty"`
}

// updateCore are the start-up checks a new version must pass: without the
// helper nothing can change, and a database or audit trail the new
// version cannot read or continue is data the update would lose. Other
// checks (a camera, a pin held by another program) say nothing about the
// release and do not block it.
var updateCore = []string{"helper", "database", "audit_chain", "audit_witness"}

// selfUpdateTools are manage.update_server's: the helper that plans and
// starts the updater, the database a pending update is queued in, and the
// watch that follows it.
type selfUpdateTools struct {
	helper *client.Client
	store  *store.DB
	watch  *selfUpdateWatch
	wire   func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerSelfUpdate() {
	(&selfUpdateTools{helper: a.helper, store: a.store, watch: a.selfUpdate, wire: a.wire}).register(a.tools)
}

func (su *selfUpdateTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[serverUpdateIn, serverUpdateOut]{
		ID: "manage.update_server", Title: "Update raspi-mcp",
		Description: "Update raspi-mcp from its apt repository; both services restart (reconnect). A failing new version rolls back by itself.",
		Rule:        tool.Rule{MinRole: identity.RoleAdmin, Risk: tool.RiskCritical, Gate: config.SwitchManageUpdates},
		Destructive: true,
		Props: []tool.Prop{tool.P("channel", tool.Enum("stable", "beta"), tool.Default("stable")), tool.P("target_version", tool.MinLen(1), tool.MaxLen(selfupdate.MaxVersion)),
			tool.P("allow_downgrade", tool.Default(false))},
		Slow: true, // the helper's update.plan reads apt's cache (proto.Systemd)
		Run:  su.updateServer,
		Summary: func(in serverUpdateIn, o serverUpdateOut) string {
			if o.DryRun {
				return fmt.Sprintf("would update raspi-mcp %s to %s from %s", o.OldVersion, o.NewVersion, o.Channel)
			}
			return fmt.Sprintf("updating raspi-mcp %s to %s from %s (job %s): reconnect after the restart; last_update in manage_get_server_status has the outcome",
				o.OldVersion, o.NewVersion, o.Channel, o.JobID)
		},
	})
}

func (su *selfUpdateTools) updateServer(ctx context.Context, c *tool.Call, in serverUpdateIn) (serverUpdateOut, error) {
	if in.Channel == "" {
		in.Channel = "stable"
	}
	if !slices.Contains(proto.UpdateChannels, in.Channel) {
		return serverUpdateOut{}, tool.Errf(CodeInvalidArgument, "unknown channel %q: want stable or beta", in.Channel).With("parameter", "channel")
	}
	if in.TargetVersion != "" {
		if err := selfupdate.ValidVersion(in.TargetVersion); err != nil {
			return serverUpdateOut{}, tool.Errf(CodeInvalidArgument, "target_version: %v", strings.TrimPrefix(err.Error(), "selfupdate: ")).With("parameter", "target_version")
		}
	} else if in.AllowDowngrade {
		return serverUpdateOut{}, tool.Errf(CodeInvalidArgument, "allow_downgrade needs target_version: a downgrade is never chosen for you").
			With("parameter", "allow_downgrade")
	}
	plan, err := client.Call(ctx, su.helper, proto.UpdatePlan, proto.UpdatePlanReq{})
	if err != nil {
		return serverUpdateOut{}, err
	}
	var offered []proto.PackageCandidate
	for _, cand := range plan.Candidates {
		if cand.Channel == in.Channel {
			offered = append(offered, cand)
		}
	}
	sort.Slice(offered, func(i, j int) bool { return apt.CompareVersions(offered[i].Version, offered[j].Version) < 0 })
	versions := make([]string, len(offered))
	for i, o := range offered {
		versions[i] = o.Version
	}
	out := serverUpdateOut{OldVersion: plan.Installed, Channel: in.Channel, Restarts: plan.Restarts,
		HealthTimeoutSeconds: int(plan.HealthTimeout.Seconds()), Status: commonStatus{Status: "pending"}}
	var target proto.PackageCandidate
	switch {
	case len(offered) == 0:
		return out, tool.Errf(CodeFailedPrecondition, "channel %s offers no raspi-mcp package", in.Channel).With("channel", in.Channel).
			Hint("check the raspi-mcp apt source (/etc/apt/sources.list.d/raspi-mcp.sources) and run apt-get update on the device")
	case in.TargetVersion == "":
		target = offered[len(offered)-1]
	default:
		i := slices.IndexFunc(offered, func(o proto.PackageCandidate) bool { return o.Version == in.TargetVersion })
		if i < 0 {
			return out, tool.Errf(CodeNotFound, "channel %s does not offer raspi-mcp %s", in.Channel, in.TargetVersion).
				With("parameter", "target_version").With("offered", versions)
		}
		target = offered[i]
	}
	out.NewVersion, out.DownloadBytes = target.Version, target.Size
	switch cmp := apt.CompareVersions(target.Version, plan.Installed); {
	case cmp == 0:
		return out, tool.Errf(CodeFailedPrecondition, "raspi-mcp %s is installed already (channel %s offers %s)", plan.Installed, in.Channel, strings.Join(versions, ", ")).
			With("installed", plan.Installed).With("offered", versions)
	case cmp < 0 && in.TargetVersion == "":
		return out, tool.Errf(CodeFailedPrecondition, "raspi-mcp %s is installed, newer than anything channel %s offers", plan.Installed, in.Channel).
			With("installed", plan.Installed).With("offered", versions)
	case cmp < 0 && !in.AllowDowngrade:
		return out, tool.Errf(CodeFailedPrecondition, "%s is older than the installed %s: a downgrade needs allow_downgrade: true", target.Version, plan.Installed).
			With("parameter", "allow_downgrade").With("installed", plan.Installed)
	case cmp < 0:
		out.Downgrade = true
	}
	if j, ok, err := su.store.PendingUpdate(); err != nil {
		return out, err
	} else if ok {
		return out, tool.Errf(CodeFailedPrecondition, "update %s (%s to %s) is still under way", j.ID, j.From, j.To).With("job_id", j.ID).
			Suggest(tool.SuggestedCall{Tool: su.wire("manage.get_server_status"), Why: "see last_update once it ends"})
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{
			fmt.Sprintf("keep raspi-mcp %s's package for a rollback (apt's cache or /var/cache/raspi-mcp)", plan.Installed),
			fmt.Sprintf("install raspi-mcp %s from %s with apt-get (%s to download), keeping local config files", target.Version, in.Channel, bytesHuman(target.Size)),
			fmt.Sprintf("restart %s; every MCP session drops: reconnect", strings.Join(plan.Restarts, " and ")),
			fmt.Sprintf("wait up to %s for the new agent to pass its start-up check (%s)", human(plan.HealthTimeout), strings.Join(updateCore, ", ")),
			fmt.Sprintf("otherwise reinstall %s and record why", plan.Installed),
		}
		return out, nil
	}
	return su.watch.start(ctx, c, in, out)
}

// selfUpdateWatch follows the self-update in the agent's database until the
// helper's updater ends it, and gives the updater the health report it
// waits for when this agent is the new version.
type selfUpdateWatch struct {
	store    *store.DB // the pending update and the last one's outcome
	helper   *client.Client
	log      *slog.Logger
	mode     string // "sim": this agent stands for whatever version is installed
	version  string
	auditJob func(rec tool.Record, in, out any) error
	selftest func(context.Context) SelftestOut // the start-up check's checks

	mu    sync.Mutex // a start and a check never interleave
	wakeC chan struct{}
	poll  time.Duration
	fault string // test builds only: the start-up check fails with it
}

func (a *Agent) newSelfUpdateWatch(fault string) *selfUpdateWatch {
	return &selfUpdateWatch{store: a.store, helper: a.helper, log: a.log, mode: a.mode, version: a.version,
		auditJob: a.auditJob, selftest: a.selftester().run, wakeC: make(chan struct{}, 1), poll: time.Second, fault: fault}
}

func (w *selfUpdateWatch) start(ctx context.Context, c *tool.Call, in serverUpdateIn, out serverUpdateOut) (serverUpdateOut, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, err := store.NewJobID()
	if err != nil {
		return out, err
	}
	now := time.Now().UTC()
	job := store.UpdateJob{ID: id, From: out.OldVersion, To: out.NewVersion, Channel: in.Channel, Started: now,
		Principal: c.Principal.Name, CorrelationID: c.CorrelationID, Reason: c.Reason}
	// Queued first: the updater restarts this agent, and the new one
	// must find the job to complete it.
	if err := w.store.PutUpdateJob(job); err != nil {
		return out, err
	}
	resp, err := client.Call(ctx, w.helper, proto.UpdateStart, proto.UpdateStartReq{ID: id, From: job.From, To: job.To,
		Channel: in.Channel, AllowDowngrade: in.AllowDowngrade})
	if err != nil {
		if derr := w.store.DropUpdateJob(id); derr != nil {
			w.log.Error("dropping a self-update job the helper refused", "job", id, "err", derr)
		}
		return out, err
	}
	w.wake()
	out.JobID = id
	what := "the services restart, then the new agent checks itself"
	if w.mode == "sim" {
		what = "the simulated package manager swaps the version, then this agent checks itself as the new one"
	}
	out.Status = commonStatus{Status: "running", StartedAt: resp.Run.Started.UTC().Format(time.RFC3339),
		Message: fmt.Sprintf("the updater runs as %s; %s", resp.Run.Unit, what)}
	return out, nil
}

func (w *selfUpdateWatch) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

func (w *selfUpdateWatch) run(ctx context.Context) {
	poll(ctx, w.log, "self-update", 5*time.Second, w.wakeC, w.check)
}

// check looks once at the queued update and says when to look again.
func (w *selfUpdateWatch) check(ctx context.Context) (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j, ok, err := w.store.PendingUpdate()
	if err != nil || !ok {
		return time.Hour, err
	}
	st, err := client.Call(ctx, w.helper, proto.UpdateState, proto.UpdateStateReq{})
	if err != nil {
		return 0, err
	}
	if !st.Found || st.Run.ID != j.ID {
		// The helper's record is gone (its state directory was wiped):
		// nobody can finish this update any more.
		return time.Hour, w.finish(j, proto.UpdateRun{ID: j.ID, From: j.From, To: j.To, Phase: selfupdate.PhaseFailed,
			Finished: time.Now(), Reason: "the root helper has no record of this update"})
	}
	if selfupdate.Final(st.Run.Phase) {
		return time.Hour, w.finish(j, st.Run)
	}
	if !st.Reported && st.Run.Phase != selfupdate.PhaseRollingBack && w.isTarget(st.Run.To) {
		healthy, reason, wait := w.startupCheck(ctx, w.fault)
		if wait {
			// The package restarts both daemons: the new helper may not be
			// up yet. Look again; the updater's deadline ends the wait.
			w.log.Info("self-update: start-up check waits for the new helper", "job", j.ID, "reason", reason)
			return w.poll, nil
		}
		r, err := client.Call(ctx, w.helper, proto.UpdateReport, proto.UpdateReportReq{ID: j.ID, Version: st.Run.To, Healthy: healthy, Reason: reason})
		if err != nil {
			return 0, err
		}
		w.log.Info("self-update: start-up check reported", "job", j.ID, "version", st.Run.To, "healthy", healthy, "reason", reason,
			"accepted", r.Accepted, "why", r.Why)
	}
	return w.poll, nil
}

// isTarget says whether this agent is the version being installed. On the
// simulated board there is no second binary: the running agent stands for
// whatever the simulated package manager has installed.
func (w *selfUpdateWatch) isTarget(version string) bool {
	return w.mode == "sim" || w.version == version
}

// finish records the outcome, completes the job and audits it as the
// principal who asked.
func (w *selfUpdateWatch) finish(j store.UpdateJob, run proto.UpdateRun) error {
	last := store.LastUpdate{ID: j.ID, From: j.From, To: j.To, Started: j.Started, Finished: run.Finished, Outcome: run.Phase, Reason: run.Reason}
	if last.Finished.IsZero() {
		last.Finished = time.Now()
	}
	if err := w.store.FinishUpdate(last); err != nil {
		return err
	}
	rec := tool.Record{Time: time.Now().UTC(), CorrelationID: j.CorrelationID, Principal: j.Principal, Tool: "manage.update_server",
		Reason: fmt.Sprintf("self-update %s to %s %s", j.From, j.To, run.Phase), Message: run.Reason}
	if run.Phase != selfupdate.PhaseSucceeded {
		rec.ErrorCode = CodeFailedPrecondition
	}
	if err := w.auditJob(rec, j, map[string]any{"job_id": j.ID, "outcome": run.Phase, "installed": run.Installed, "reason": run.Reason}); err != nil {
		w.log.Error("audit append failed", "job", j.ID, "err", err)
	}
	w.log.Info("self-update ended", "job", j.ID, "from", j.From, "to", j.To, "outcome", run.Phase, "reason", run.Reason)
	return nil
}

// startupCheck is what a new version reports to the updater: the core
// checks of the self-test must hold. fault, set only in test builds, makes
// it fail as a broken release would. wait is set when only the helper is
// not (yet) the new one: that is worth another look, not a verdict.
func (w *selfUpdateWatch) startupCheck(ctx context.Context, fault string) (healthy bool, reason string, wait bool) {
	if fault != "" {
		return false, "start-up check fault: " + fault, false
	}
	st := w.selftest(ctx)
	var bad []string
	helperOnly := true
	for _, c := range st.Checks {
		if !slices.Contains(updateCore, c.Name) {
			continue
		}
		// A helper that answers with another version was not restarted
		// with this one: half an update.
		if c.Status == CheckFail || c.Name == "helper" && c.Status != CheckPass {
			bad = append(bad, c.Name+": "+c.Detail)
			helperOnly = helperOnly && c.Name == "helper"
		}
	}
	if len(bad) > 0 {
		reason := strings.Join(bad, "; ")
		if len(reason) > proto.MaxUpdateReason {
			reason = strings.ToValidUTF8(reason[:proto.MaxUpdateReason-len("…")], "") + "…"
		}
		return false, reason, helperOnly
	}
	return true, "", false
}

// lastUpdate is manage.get_server_status's last_update: the update under
// way, else how the latest one ended; nil if there never was one.
func lastUpdate(db *store.DB) (*lastUpdateStatus, error) {
	if j, ok, err := db.PendingUpdate(); err != nil {
		return nil, err
	} else if ok {
		return &lastUpdateStatus{commonStatus: commonStatus{Status: "running", StartedAt: j.Started.Format(time.RFC3339)},
			JobID: j.ID, From: j.From, To: j.To}, nil
	}
	l, ok, err := db.LastSelfUpdate()
	if err != nil || !ok {
		return nil, err
	}
	s := &lastUpdateStatus{commonStatus: commonStatus{Status: "failed", StartedAt: l.Started.Format(time.RFC3339),
		FinishedAt: l.Finished.Format(time.RFC3339), Message: l.Reason}, JobID: l.ID, From: l.From, To: l.To, Outcome: l.Outcome, Reason: l.Reason}
	if l.Outcome == selfupdate.PhaseSucceeded {
		s.Status, s.Message = "succeeded", fmt.Sprintf("raspi-mcp %s is running", l.To)
	}
	return s, nil
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// OS updates. The agent works out what an upgrade would do itself (apt-get
// -s needs no privilege); the root helper refreshes the package lists and
// installs, running apt as a transient systemd unit. A plan is named by
// its hash over exactly the versions it installs and removes: apply takes
// that hash (and, being critical, goes through a change token, whose
// arguments carry it), recomputes the plan and refuses when it is no
// longer the same, so what runs is what the person saw.

// serverPackage is the package raspi-mcp itself is installed from.
const serverPackage = "raspi-mcp"

// osJobKind is manage_list_jobs' kind for a run of apt.
const osJobKind = "os_update"

// previewsKept is how many previewed plans the agent remembers, to show
// what changed when an apply finds its plan stale.
const previewsKept = 8

// previews remembers recent plans by hash. Memory only: after a restart a
// stale apply still fails, just without the difference.
type previews struct {
	mu    sync.Mutex
	plans []apt.Plan
}

func (p *previews) put(plan apt.Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := plan.Hash()
	p.plans = slices.DeleteFunc(p.plans, func(x apt.Plan) bool { return x.Hash() == h })
	p.plans = append(p.plans, plan)
	if len(p.plans) > previewsKept {
		p.plans = p.plans[len(p.plans)-previewsKept:]
	}
}

func (p *previews) get(hash string) (apt.Plan, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.plans {
		if x.Hash() == hash {
			return x, true
		}
	}
	return apt.Plan{}, false
}

// aptRunStatus is the tool catalog's common status object (spec 002 §8.4:
// status pending, running, succeeded or failed; start and end times;
// progress in percent; a message), used by the update tools' results.
type aptRunStatus struct {
	Status          string  `json:"status"`
	StartedAt       string  `json:"started_at,omitempty"`
	FinishedAt      string  `json:"finished_at,omitempty"`
	ProgressPercent float64 `json:"progress_percent"`
	Message         string  `json:"message,omitempty"`
}

// serverUpdate is raspi-mcp's own package: installed against candidate on
// the channel apt offers it from. manage_update_server reads it too.
type serverUpdate struct {
	Installed       string
	Candidate       string
	UpdateAvailable bool
	Channel         string
	LastChecked     time.Time
	ReleaseDate     time.Time // the candidate's, where the repository gives it
	ReleaseNotesURL string
}

// serverUpdate reads apt-cache policy raspi-mcp. Not installed from a
// package (a build from source), the running version stands in.
func (up *updatesTools) serverUpdate(ctx context.Context) (serverUpdate, error) {
	if up.apt == nil {
		return serverUpdate{}, tool.Errf(CodeUnavailable, "this agent has no package manager to ask")
	}
	pol, err := up.apt.Policy(ctx, serverPackage)
	if err != nil {
		return serverUpdate{}, err
	}
	st, err := up.apt.State(ctx)
	if err != nil {
		return serverUpdate{}, err
	}
	u := serverUpdate{Installed: pol.Installed, Candidate: pol.Candidate, UpdateAvailable: pol.UpdateAvailable(), LastChecked: st.ListsUpdated}
	if len(pol.CandidateSuites) > 0 {
		u.Channel = pol.CandidateSuites[0]
	}
	if u.Candidate != "" {
		if u.ReleaseDate, u.ReleaseNotesURL, err = up.apt.Release(ctx, serverPackage, u.Candidate); err != nil {
			return u, err
		}
	}
	return u, nil
}

// updatesCheckOut is manage.check_for_updates: the spec's self-update
// answer (§2.6.6: update_available, current_version, latest_version,
// last_checked) and the OS's pending updates beside it.
type updatesCheckOut struct {
	UpdateAvailable bool      `json:"update_available"`
	CurrentVersion  string    `json:"current_version" jsonschema:"raspi-mcp as installed by the package manager; the running version when it was not installed from a package"`
	LatestVersion   string    `json:"latest_version" jsonschema:"the candidate apt would install; equal to current_version when there is none"`
	RunningVersion  string    `json:"running_version"`
	Channel         string    `json:"channel,omitempty" jsonschema:"the suite the candidate comes from: stable or beta"`
	ReleaseDate     string    `json:"release_date,omitempty" jsonschema:"when the candidate was published, where the repository says"`
	ReleaseNotesURL string    `json:"release_notes_url,omitempty"`
	LastChecked     string    `json:"last_checked,omitempty" jsonschema:"when the package lists were last refreshed (apt-get update)"`
	OS              osPending `json:"os"`
}

// osPending is what the OS has waiting.
type osPending struct {
	Upgradable     int          `json:"upgradable" jsonschema:"packages a full upgrade would upgrade"`
	Security       int          `json:"security" jsonschema:"of which fixes from a security archive"`
	NewPackages    int          `json:"new_packages"`
	Removals       int          `json:"removals"`
	Held           int          `json:"held" jsonschema:"packages kept back"`
	RebootRequired bool         `json:"reboot_required" jsonschema:"/run/reboot-required: an installed update waits for a reboot"`
	RebootPackages []string     `json:"reboot_packages,omitempty"`
	ListsUpdatedAt string       `json:"lists_updated_at,omitempty"`
	DpkgLock       *apt.Holder  `json:"dpkg_lock,omitempty" jsonschema:"who holds the dpkg lock right now"`
	PlanHash       string       `json:"plan_hash"`
	Jobs           []osJobBrief `json:"jobs,omitempty" jsonschema:"runs of apt the helper remembers"`
}

// osJobBrief is one run of apt.
type osJobBrief struct {
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
	State string `json:"state"`
}

// updatesPreviewIn is manage.preview_os_updates.
type updatesPreviewIn struct {
	Refresh *bool `json:"refresh,omitempty"`
	tool.GuardArgs
}

// updatesPreviewOut is the plan a full upgrade would carry out now.
type updatesPreviewOut struct {
	PlanHash                string       `json:"plan_hash" jsonschema:"pass it to manage_apply_os_updates; it names exactly these versions"`
	Upgrades                []apt.Change `json:"upgrades"`
	Installs                []apt.Change `json:"installs" jsonschema:"new packages the upgrade brings in"`
	Removals                []apt.Change `json:"removals" jsonschema:"packages the upgrade would remove: look at these"`
	Held                    []string     `json:"held" jsonschema:"packages kept back; the plan leaves them"`
	SecurityCount           int          `json:"security_count"`
	DownloadBytes           int64        `json:"download_bytes"`
	InstalledSizeDeltaBytes int64        `json:"installed_size_delta_bytes" jsonschema:"disk space the upgrade takes (negative: frees)"`
	RebootNeeded            bool         `json:"reboot_needed" jsonschema:"a kernel, firmware or the C library is upgraded, or a reboot is already pending"`
	RebootPackages          []string     `json:"reboot_packages,omitempty"`
	ListsUpdatedAt          string       `json:"lists_updated_at,omitempty"`
	Refreshed               bool         `json:"refreshed"`
	Status                  aptRunStatus `json:"status" jsonschema:"the refresh of the package lists"`
	DryRun                  bool         `json:"dry_run,omitempty"`
	Plan                    []string     `json:"plan,omitempty"`
}

// updatesApplyIn is manage.apply_os_updates.
type updatesApplyIn struct {
	PlanHash string `json:"plan_hash" jsonschema:"from manage_preview_os_updates"`
	tool.GuardArgs
}

// updatesUpdateOSIn is manage.update_os: preview and apply in one call; a
// plan_hash binds it to a preview as apply does.
type updatesUpdateOSIn struct {
	PlanHash string `json:"plan_hash,omitempty" jsonschema:"install only if the plan is still this"`
	tool.GuardArgs
}

// packageVersions is one package around an apply.
type packageVersions struct {
	Name   string `json:"name"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	Target string `json:"target,omitempty" jsonschema:"the version the plan installs; empty for a removal"`
}

// updatesApplyOut is the outcome of installing a plan.
type updatesApplyOut struct {
	Status            aptRunStatus       `json:"status"`
	JobID             string             `json:"job_id,omitempty" jsonschema:"in manage_list_jobs; manage_cancel_job stops it before dpkg starts"`
	PlanHash          string             `json:"plan_hash"`
	Packages          []packageVersions  `json:"packages"`
	ConffilesKept     []string           `json:"conffiles_kept" jsonschema:"configuration files you changed that were kept; the package's new version is beside each as .dpkg-dist"`
	ConffilesReplaced []string           `json:"conffiles_replaced"`
	RebootRequired    bool               `json:"reboot_required"`
	DryRun            bool               `json:"dry_run,omitempty"`
	Plan              []string           `json:"plan,omitempty"`
	Preview           *updatesPreviewOut `json:"preview,omitempty" jsonschema:"manage_update_os: the plan it installed"`
}

// updatesTools are the OS update tools: the package manager's read side,
// the helper that refreshes the lists and installs, the plans previewed
// lately, and the audit trail each run's steps go to as a job's.
type updatesTools struct {
	apt      apt.Source // nil: the update tools answer unavailable
	helper   *client.Client
	version  string // the running raspi-mcp, when it was not installed from a package
	prevs    previews
	auditJob func(rec tool.Record, in, out any) error
	log      *slog.Logger
	wire     func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerUpdates() {
	(&updatesTools{apt: a.apt, helper: a.helper, version: a.version, auditJob: a.auditJob, log: a.log, wire: a.wire}).register(a.tools)
}

func (up *updatesTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, updatesCheckOut]{
		ID: "manage.check_for_updates", Title: "Check for updates",
		Description: "Pending raspi-mcp and OS updates, and whether a reboot is due; the lists are not refreshed.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		OutProps: []tool.Prop{tool.P("last_checked", tool.Format("date-time")), tool.P("release_date", tool.Format("date-time")), tool.P("release_notes_url", tool.Format("uri")),
			tool.P("os.lists_updated_at", tool.Format("date-time"))},
		Slow: true,
		Run:  up.checkForUpdates,
		Summary: func(_ noArgs, o updatesCheckOut) string {
			s := "raspi-mcp " + o.CurrentVersion + " is current"
			if o.UpdateAvailable {
				s = fmt.Sprintf("raspi-mcp %s available (installed %s, channel %s)", o.LatestVersion, o.CurrentVersion, o.Channel)
			}
			s += fmt.Sprintf("; OS: %d upgradable, %d security, %d held", o.OS.Upgradable, o.OS.Security, o.OS.Held)
			if o.OS.RebootRequired {
				s += "; REBOOT REQUIRED"
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[updatesPreviewIn, updatesPreviewOut]{
		ID: "manage.preview_os_updates", Title: "Preview OS updates",
		Description: "Refresh the package lists and show what a full upgrade would do, with a plan_hash for manage_apply_os_updates. Installs nothing.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: config.SwitchManageUpdates},
		Props:       []tool.Prop{tool.P("refresh", tool.Default(true))},
		OutProps:    []tool.Prop{tool.P("lists_updated_at", tool.Format("date-time"))},
		Run:         up.previewOSUpdates,
		Summary: func(_ updatesPreviewIn, o updatesPreviewOut) string {
			return fmt.Sprintf("%d upgrades (%d security), %d new, %d removed, %d held; %s to download; plan %s", len(o.Upgrades), o.SecurityCount,
				len(o.Installs), len(o.Removals), len(o.Held), bytesText(o.DownloadBytes), o.PlanHash)
		},
	})
	tool.Add(r, tool.Spec[updatesApplyIn, updatesApplyOut]{
		ID: "manage.apply_os_updates", Title: "Apply OS updates",
		Description: "Install exactly the plan (plan_hash) manage_preview_os_updates showed; refused if it changed. manage_cancel_job stops it until dpkg starts.",
		Rule:        tool.Rule{MinRole: identity.RoleAdmin, Risk: tool.RiskCritical, Gate: config.SwitchManageUpdates},
		Destructive: true,
		Props:       []tool.Prop{tool.P("plan_hash", tool.MinLen(71), tool.MaxLen(71))},
		Example:     &updatesApplyIn{PlanHash: "sha256:" + strings.Repeat("0", 64)}, // a plan no preview gives: installs nothing
		Run: func(ctx context.Context, c *tool.Call, in updatesApplyIn) (updatesApplyOut, error) {
			return up.applyOSUpdates(ctx, c, in.PlanHash, true, newProgress(c, 0, 100))
		},
		Summary: applySummary,
	})
	tool.Add(r, tool.Spec[updatesUpdateOSIn, updatesApplyOut]{
		ID: "manage.update_os", Title: "Update the OS",
		Description: "Refresh the package lists and install the full upgrade in one step.",
		Rule:        tool.Rule{MinRole: identity.RoleAdmin, Risk: tool.RiskCritical, Gate: config.SwitchManageUpdates},
		Destructive: true,
		Props:       []tool.Prop{tool.P("plan_hash", tool.MinLen(71), tool.MaxLen(71))},
		Run:         up.updateOS,
		Summary:     func(_ updatesUpdateOSIn, o updatesApplyOut) string { return applySummary(updatesApplyIn{}, o) },
	})
}

func applySummary(_ updatesApplyIn, o updatesApplyOut) string {
	if o.DryRun {
		return fmt.Sprintf("would install plan %s: %d packages", o.PlanHash, len(o.Packages))
	}
	s := fmt.Sprintf("OS update %s: %s", o.JobID, o.Status.Status)
	if o.Status.Message != "" {
		s += " (" + o.Status.Message + ")"
	}
	if len(o.ConffilesKept) > 0 {
		s += fmt.Sprintf("; kept %d changed configuration files", len(o.ConffilesKept))
	}
	if o.RebootRequired {
		s += "; REBOOT REQUIRED"
	}
	return s
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (up *updatesTools) needApt() error {
	if up.apt == nil {
		return tool.Errf(CodeUnavailable, "this agent has no package manager (not a Debian system)")
	}
	return nil
}

func (up *updatesTools) checkForUpdates(ctx context.Context, _ *tool.Call, _ noArgs) (updatesCheckOut, error) {
	if err := up.needApt(); err != nil {
		return updatesCheckOut{}, err
	}
	u, err := up.serverUpdate(ctx)
	if err != nil {
		return updatesCheckOut{}, err
	}
	out := updatesCheckOut{UpdateAvailable: u.UpdateAvailable, CurrentVersion: u.Installed, LatestVersion: u.Candidate, RunningVersion: up.version,
		Channel: u.Channel, LastChecked: timeText(u.LastChecked), ReleaseDate: timeText(u.ReleaseDate), ReleaseNotesURL: u.ReleaseNotesURL}
	if out.CurrentVersion == "" {
		out.CurrentVersion = up.version
	}
	if out.LatestVersion == "" {
		out.LatestVersion = out.CurrentVersion
	}
	plan, err := up.apt.Simulate(ctx)
	if err != nil {
		return out, err
	}
	st, err := up.apt.State(ctx)
	if err != nil {
		return out, err
	}
	out.OS = osPending{Upgradable: len(plan.Upgrades), Security: plan.SecurityCount(), NewPackages: len(plan.Installs), Removals: len(plan.Removals),
		Held: len(plan.Held), RebootRequired: st.RebootRequired, RebootPackages: st.RebootPackages, ListsUpdatedAt: timeText(st.ListsUpdated),
		DpkgLock: st.Lock, PlanHash: plan.Hash()}
	if runs, err := aptRuns(ctx, up.helper); err == nil {
		for _, r := range runs {
			out.OS.Jobs = append(out.OS.Jobs, osJobBrief{JobID: r.ID, Kind: r.Kind, State: r.State})
		}
	}
	return out, nil
}

// aptRuns are the helper's runs of apt; none when it does not serve them.
func aptRuns(ctx context.Context, helper *client.Client) ([]proto.AptRun, error) {
	resp, err := client.Call(ctx, helper, proto.AptStatus, proto.AptStatusReq{})
	if err != nil {
		return nil, err
	}
	return resp.Runs, nil
}

// pollEvery is how often a running apt job is looked at. apt takes
// minutes; a second is plenty for progress and costs nothing.
const pollEvery = time.Second

// progressOut sends a run's percent to a client that sent a progress
// token, mapped into [lo, lo+span] of the call's whole progress so that
// a call with two runs (update_os: refresh, then apply) only ever counts
// up, as the protocol wants. The update tools are not marked Slow: this
// is their progress, and a second-counting heartbeat beside it would not
// grow in step with it.
type progressOut struct {
	c        *tool.Call
	lo, span float64
	sent     float64
}

func newProgress(c *tool.Call, lo, span float64) *progressOut {
	return &progressOut{c: c, lo: lo, span: span, sent: -1}
}

func (p *progressOut) report(ctx context.Context, pct float64, msg string) {
	if p == nil || p.c == nil || p.c.ProgressToken == nil || p.c.Session == nil {
		return
	}
	v := p.lo + p.span*pct/100
	if v <= p.sent {
		return
	}
	p.sent = v
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = p.c.Session.NotifyProgress(pctx, &mcp.ProgressNotificationParams{ProgressToken: p.c.ProgressToken, Progress: v, Total: 100, Message: msg})
}

// waitRun polls the helper until the run ends or ctx does, reporting
// progress to pr.
func (up *updatesTools) waitRun(ctx context.Context, pr *progressOut, id string) (proto.AptRun, error) {
	var last proto.AptRun
	for {
		resp, err := client.Call(ctx, up.helper, proto.AptStatus, proto.AptStatusReq{ID: id})
		if err != nil {
			return last, err
		}
		if len(resp.Runs) == 1 {
			last = resp.Runs[0]
		}
		pr.report(ctx, last.Percent, strings.TrimSpace(last.Kind+" "+last.Phase+": "+last.Message))
		if last.State != "" && last.State != apt.StateRunning {
			return last, nil
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-t.C:
		}
	}
}

func runStatus(r proto.AptRun) aptRunStatus {
	s := aptRunStatus{Status: r.State, StartedAt: timeText(r.StartedAt), FinishedAt: timeText(r.FinishedAt), ProgressPercent: r.Percent, Message: r.Message}
	if r.State == apt.StateCancelled {
		// The common status has no "cancelled": a cancelled run failed
		// to do what it was asked, and the message says why.
		s.Status = apt.StateFailed
		s.Message = "cancelled: " + r.Message
	}
	if r.Error != "" {
		s.Message = r.Error
	}
	return s
}

// refresh runs apt-get update through the helper and waits for it.
func (up *updatesTools) refresh(ctx context.Context, pr *progressOut) (proto.AptRun, error) {
	run, err := client.Call(ctx, up.helper, proto.AptRefresh, proto.AptRefreshReq{})
	if err != nil {
		return run, err
	}
	return up.waitRun(ctx, pr, run.ID)
}

func (up *updatesTools) previewOSUpdates(ctx context.Context, c *tool.Call, in updatesPreviewIn) (updatesPreviewOut, error) {
	return up.preview(ctx, c, in, newProgress(c, 0, 100))
}

func (up *updatesTools) preview(ctx context.Context, c *tool.Call, in updatesPreviewIn, pr *progressOut) (updatesPreviewOut, error) {
	if err := up.needApt(); err != nil {
		return updatesPreviewOut{}, err
	}
	refresh := in.Refresh == nil || *in.Refresh
	out := updatesPreviewOut{Status: aptRunStatus{Status: "succeeded", ProgressPercent: 100, Message: "package lists not refreshed"}}
	if refresh && c.DryRun {
		out.Plan = append(out.Plan, "refresh the package lists (apt-get update) through the root helper")
	}
	if refresh && !c.DryRun {
		run, err := up.refresh(ctx, pr)
		if err != nil {
			return out, err
		}
		out.Status = runStatus(run)
		if run.State != apt.StateSucceeded {
			return out, tool.Errf(CodeUnavailable, "refreshing the package lists failed: %s", out.Status.Message).With("job_id", run.ID).
				Hint("check the network and the apt sources, or preview with refresh: false to use the lists as they are").Retry()
		}
		out.Refreshed = true
		out.Status.Message = "package lists refreshed"
	}
	if err := up.fillPreview(ctx, &out); err != nil {
		return out, err
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = append(out.Plan, fmt.Sprintf("show the full upgrade as of now (plan %s; it may change after the refresh)", out.PlanHash))
	}
	return out, nil
}

// fillPreview simulates the upgrade and fills the plan's fields.
func (up *updatesTools) fillPreview(ctx context.Context, out *updatesPreviewOut) error {
	plan, err := up.apt.Simulate(ctx)
	if err != nil {
		return err
	}
	sz, err := up.apt.Sizes(ctx, plan)
	if err != nil {
		return err
	}
	st, err := up.apt.State(ctx)
	if err != nil {
		return err
	}
	up.prevs.put(plan)
	out.PlanHash, out.Upgrades, out.Installs, out.Removals, out.Held = plan.Hash(), plan.Upgrades, plan.Installs, plan.Removals, plan.Held
	out.SecurityCount, out.DownloadBytes, out.InstalledSizeDeltaBytes = plan.SecurityCount(), sz.DownloadBytes, sz.InstalledSizeDelta
	out.RebootPackages = apt.NeedsReboot(plan)
	out.RebootNeeded = len(out.RebootPackages) > 0 || st.RebootRequired
	out.ListsUpdatedAt = timeText(st.ListsUpdated)
	return nil
}

// currentPlan recomputes the plan and checks it against want (when set):
// a different plan is failed_precondition with the difference.
func (up *updatesTools) currentPlan(ctx context.Context, want string) (apt.Plan, error) {
	plan, err := up.apt.Simulate(ctx)
	if err != nil {
		return plan, err
	}
	if want == "" || plan.Hash() == want {
		return plan, nil
	}
	e := tool.Errf(CodeFailedPrecondition, "the packages on offer changed since the preview: plan %s is now %s", want, plan.Hash()).
		With("plan_hash", want).With("current_plan_hash", plan.Hash()).
		Hint("preview again, show the person the new plan, and apply its plan_hash").
		Suggest(tool.SuggestedCall{Tool: up.wire("manage.preview_os_updates"), Arguments: map[string]any{"refresh": false}, Why: "see the plan as it is now"})
	if old, ok := up.prevs.get(want); ok {
		e.With("difference", plan.Diff(old))
	} else {
		e.With("difference", "unknown: this agent does not remember plan "+want)
	}
	return plan, e
}

func planLines(p apt.Plan) []string {
	var out []string
	for _, c := range p.Upgrades {
		out = append(out, fmt.Sprintf("upgrade %s %s -> %s", c.Name, c.From, c.To))
	}
	for _, c := range p.Installs {
		out = append(out, fmt.Sprintf("install %s %s (new)", c.Name, c.To))
	}
	for _, c := range p.Removals {
		out = append(out, fmt.Sprintf("REMOVE %s %s", c.Name, c.From))
	}
	for _, h := range p.Held {
		out = append(out, "keep back "+h)
	}
	return out
}

func packagesOf(p apt.Plan) []packageVersions {
	var out []packageVersions
	for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
		out = append(out, packageVersions{Name: c.Name, Before: c.From, Target: c.To})
	}
	for _, c := range p.Removals {
		out = append(out, packageVersions{Name: c.Name, Before: c.From})
	}
	return out
}

// applyOSUpdates installs the plan named by hash (any current plan when
// hash is "" and bound is false: manage_update_os without a hash).
func (up *updatesTools) applyOSUpdates(ctx context.Context, c *tool.Call, hash string, bound bool, pr *progressOut) (updatesApplyOut, error) {
	if err := up.needApt(); err != nil {
		return updatesApplyOut{}, err
	}
	if bound && !strings.HasPrefix(hash, "sha256:") {
		return updatesApplyOut{}, tool.Errf(CodeInvalidArgument, "plan_hash %q is not a plan hash (sha256:...)", hash).With("parameter", "plan_hash")
	}
	plan, err := up.currentPlan(ctx, hash)
	if err != nil {
		return updatesApplyOut{}, err
	}
	out := updatesApplyOut{PlanHash: plan.Hash(), Packages: packagesOf(plan), ConffilesKept: []string{}, ConffilesReplaced: []string{}}
	if plan.Empty() {
		return out, tool.Errf(CodeFailedPrecondition, "there is nothing to install: the plan is empty").With("plan_hash", out.PlanHash).
			Suggest(tool.SuggestedCall{Tool: up.wire("manage.preview_os_updates"), Why: "refresh the package lists and look again"})
	}
	if c.DryRun {
		st, err := up.apt.State(ctx)
		if err != nil {
			return out, err
		}
		if st.Lock != nil {
			return out, tool.Errf(CodeResourceExhausted, "the dpkg lock is held by pid %d (%s)", st.Lock.PID, st.Lock.Command).
				With("holder_pid", st.Lock.PID).With("holder_command", st.Lock.Command).Retry()
		}
		out.DryRun, out.Status = true, aptRunStatus{Status: "pending"}
		out.Plan = append(planLines(plan), "download every package first (cancellable), then install with dpkg keeping changed configuration files")
		return out, nil
	}
	req := proto.AptApplyReq{PlanHash: out.PlanHash, Upgrades: protoPackages(plan.Upgrades), Installs: protoPackages(plan.Installs),
		Removals: protoPackages(plan.Removals), Held: plan.Held}
	run, err := client.Call(ctx, up.helper, proto.AptApply, req)
	if err != nil {
		return out, err
	}
	out.JobID = run.ID
	up.auditRun(c, run, "started", "plan "+out.PlanHash+": "+strings.Join(run.Targets, " "))
	// The run goes on without the caller; follow reports its end to the
	// audit trail whatever becomes of this call.
	done := make(chan proto.AptRun, 1)
	go func() { done <- up.follow(context.WithoutCancel(ctx), c, pr, run.ID, plan) }()
	select {
	case run = <-done:
	case <-ctx.Done():
		out.Status = aptRunStatus{Status: "running", StartedAt: timeText(run.StartedAt), Message: "still running: follow it in manage_list_jobs"}
		return out, nil
	}
	return up.applyResult(ctx, out, run, plan)
}

// follow waits for a run to end and audits how it ended, with the
// versions before and after.
func (up *updatesTools) follow(ctx context.Context, c *tool.Call, pr *progressOut, id string, plan apt.Plan) proto.AptRun {
	run, err := up.waitRun(ctx, pr, id)
	if err != nil {
		up.log.Warn("lost track of an OS update run", "job", id, "err", err)
		return run
	}
	var after map[string]string
	if up.apt != nil {
		after, _ = up.apt.Installed(ctx, planNames(plan))
	}
	var changes []string
	for _, p := range packagesOf(plan) {
		changes = append(changes, fmt.Sprintf("%s %s->%s", p.Name, orNone(p.Before), orNone(after[p.Name])))
	}
	up.auditRun(c, run, run.State, "plan "+run.PlanHash+": "+strings.Join(changes, ", "))
	return run
}

func planNames(p apt.Plan) []string {
	var out []string
	for _, c := range append(append(slices.Clip(p.Upgrades), p.Installs...), p.Removals...) {
		out = append(out, c.Name)
	}
	return out
}

// auditRun records one step of a run under the caller's correlation id,
// as the job it is.
func (up *updatesTools) auditRun(c *tool.Call, run proto.AptRun, what, msg string) {
	rec := tool.Record{Time: time.Now().UTC(), CorrelationID: c.CorrelationID, Principal: c.Principal.Name,
		Tool: "manage.apply_os_updates", Reason: "OS update " + run.ID + " " + what, Message: tool.Truncate(msg, 4000)}
	if err := up.auditJob(rec, map[string]any{"job_id": run.ID, "plan_hash": run.PlanHash}, map[string]any{"state": run.State, "error": run.Error}); err != nil {
		up.log.Error("audit append failed", "job", run.ID, "err", err)
	}
}

func (up *updatesTools) applyResult(ctx context.Context, out updatesApplyOut, run proto.AptRun, plan apt.Plan) (updatesApplyOut, error) {
	out.Status = runStatus(run)
	out.ConffilesKept = append(out.ConffilesKept, run.ConffilesKept...)
	out.ConffilesReplaced = append(out.ConffilesReplaced, run.ConffilesReplaced...)
	after, err := up.apt.Installed(ctx, planNames(plan))
	if err != nil {
		return out, err
	}
	for i := range out.Packages {
		out.Packages[i].After = after[out.Packages[i].Name]
	}
	if st, err := up.apt.State(ctx); err == nil {
		out.RebootRequired = st.RebootRequired
	}
	switch run.State {
	case apt.StateSucceeded:
		return out, nil
	case apt.StateCancelled:
		return out, tool.Errf(CodeFailedPrecondition, "OS update %s was cancelled before dpkg started; nothing was installed", run.ID).With("job_id", run.ID)
	}
	return out, tool.Errf(CodeInternal, "OS update %s failed: %s", run.ID, run.Error).With("job_id", run.ID).With("phase", run.Phase).
		Hint("if it failed while downloading nothing was installed; read the unit's journal (" + run.Unit + ") for the details")
}

func protoPackages(cs []apt.Change) []proto.AptPackage {
	out := make([]proto.AptPackage, 0, len(cs))
	for _, c := range cs {
		out = append(out, proto.AptPackage{Name: c.Name, From: c.From, To: c.To})
	}
	return out
}

// updateOS is preview and apply in one: the dry run (change_prepare's
// plan) is the preview without a refresh; the real call refreshes,
// previews and, if plan_hash is given, applies only that plan.
func (up *updatesTools) updateOS(ctx context.Context, c *tool.Call, in updatesUpdateOSIn) (updatesApplyOut, error) {
	if err := up.needApt(); err != nil {
		return updatesApplyOut{}, err
	}
	// The refresh counts for the first tenth of the progress.
	pr := newProgress(c, 0, 10)
	pre, err := up.preview(ctx, c, updatesPreviewIn{Refresh: ptrTo(!c.DryRun)}, pr)
	if err != nil {
		return updatesApplyOut{}, err
	}
	pr.lo, pr.span = 10, 90
	out, err := up.applyOSUpdates(ctx, c, in.PlanHash, in.PlanHash != "", pr)
	pre.DryRun, pre.Plan = false, nil
	out.Preview = &pre
	return out, err
}

func ptrTo[T any](v T) *T { return &v }

// osJobs are the helper's apt runs as manage_list_jobs shows them.
// The helper client bounds the call with its own timeout.
func osJobs(helper *client.Client) []queuedJob {
	runs, err := aptRuns(context.Background(), helper)
	if err != nil {
		return nil
	}
	var out []queuedJob
	for _, r := range runs {
		j := queuedJob{JobID: r.ID, Kind: osJobKind, Status: r.State,
			Summary: fmt.Sprintf("%s: %s %.0f%% %s", r.Kind, r.Phase, r.Percent, r.Message), Cancel: "nothing: it has ended"}
		if r.PlanHash != "" {
			j.Summary += " (plan " + r.PlanHash + ")"
		}
		if r.Error != "" {
			j.Summary += ": " + r.Error
		}
		switch {
		case r.State == apt.StateRunning && r.Cancellable:
			j.Cancel = "the run stops before dpkg starts; nothing is installed"
		case r.State == apt.StateRunning:
			j.Cancel = "refused: dpkg has started, and stopping it would leave packages half installed"
		}
		out = append(out, j)
	}
	return out
}

// cancelOSJob asks the helper to stop a run.
func cancelOSJob(ctx context.Context, helper *client.Client, id string) error {
	_, err := client.Call(ctx, helper, proto.AptCancel, proto.AptCancelReq{ID: id})
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.CodeFailedPrecondition {
		return tool.Errf(CodeFailedPrecondition, "%s cannot be cancelled: %s", id, pe.Message).WithDetails(pe.Details).With("job_id", id).
			Hint("wait for it to finish; manage_list_jobs shows its progress")
	}
	return err
}

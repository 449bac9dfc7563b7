package proto

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The self-update part of the table. The agent plans an update of
// raspi-mcp itself (update.plan), has the helper start it (update.start),
// follows it (update.state), and, as the new agent after the restart,
// reports on its own start-up check (update.report). The helper starts the
// updater as a transient unit outside its sandbox; the updater rolls back
// by itself when no healthy report comes in time.
var (
	// update.plan asks apt's cache (apt-cache policy), which on a Pi Zero
	// reads the package lists as slowly as systemd reloads; update.start
	// waits for the updater's transient unit to start: both Systemd.
	UpdatePlan   = Method[UpdatePlanReq, UpdatePlanResp]{"update.plan", Systemd}
	UpdateStart  = Method[UpdateStartReq, UpdateStartResp]{"update.start", Systemd}
	UpdateState  = Method[UpdateStateReq, UpdateStateResp]{"update.state", Quick}
	UpdateReport = Method[UpdateReportReq, UpdateReportResp]{"update.report", Quick}
)

func updateMethods() []Info {
	return []Info{UpdatePlan.Info(), UpdateStart.Info(), UpdateState.Info(), UpdateReport.Info()}
}

// Update channels: the repository's suites.
var UpdateChannels = []string{"stable", "beta"}

// MaxPackageVersion bounds a version on the wire.
const MaxPackageVersion = 64

// UpdatePlanReq asks what raspi-mcp versions the package manager offers.
type UpdatePlanReq struct{}

// Validate implements Validator.
func (UpdatePlanReq) Validate() error { return nil }

// PackageCandidate is one raspi-mcp version a channel offers.
type PackageCandidate struct {
	Version string `json:"version"`
	Channel string `json:"channel"`
	Size    int64  `json:"size"` // bytes to download; 0 when unknown
}

// UpdatePlanResp is the installed version and every version on offer, with
// how long the new agent will have to report healthy (the helper's own
// [manage] update_health_timeout: the agent cannot shorten or stretch it).
type UpdatePlanResp struct {
	Installed     string             `json:"installed"`
	Candidates    []PackageCandidate `json:"candidates"`
	HealthTimeout time.Duration      `json:"health_timeout"`
	Restarts      []string           `json:"restarts"` // the units installing the package restarts
}

// UpdateStartReq starts updating from From to To. The helper re-checks all
// of it: the switch, that From is installed, that To is on offer in
// Channel, and that it is not older than From unless AllowDowngrade.
type UpdateStartReq struct {
	ID             string `json:"id"`
	From           string `json:"from"`
	To             string `json:"to"`
	Channel        string `json:"channel"`
	AllowDowngrade bool   `json:"allow_downgrade"`
}

// UpdateRun is a self-update as the helper records it. Phase is one of
// installing, awaiting_health, rolling_back, succeeded, rolled_back, failed.
type UpdateRun struct {
	ID        string    `json:"id"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Channel   string    `json:"channel"`
	Phase     string    `json:"phase"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Reason    string    `json:"reason"`
	Installed string    `json:"installed"`
	Unit      string    `json:"unit"` // the transient unit running the updater
}

// UpdateStartResp is the run as recorded when the updater was started.
type UpdateStartResp struct {
	Run UpdateRun `json:"run"`
}

// UpdateStateReq asks for the last run.
type UpdateStateReq struct{}

// Validate implements Validator.
func (UpdateStateReq) Validate() error { return nil }

// UpdateStateResp is the last run, if any, and whether the new agent has
// reported on it.
type UpdateStateResp struct {
	Found    bool      `json:"found"`
	Run      UpdateRun `json:"run"`
	Reported bool      `json:"reported"`
}

// UpdateReportReq is the agent's report on its start-up check for run ID.
type UpdateReportReq struct {
	ID      string `json:"id"`
	Version string `json:"version"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason"`
}

// UpdateReportResp says whether the report was taken: only a report for the
// run under way and from its target version is.
type UpdateReportResp struct {
	Accepted bool   `json:"accepted"`
	Why      string `json:"why,omitempty"`
}

// MaxUpdateReason bounds a reported reason.
const MaxUpdateReason = 2048

func validUpdateID(id string) error {
	ok := id != "" && len(id) <= 64
	for _, c := range id {
		ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
	}
	if !ok {
		return invalid("id", clip(id), fmt.Sprintf("proto: update id %q: want 1 to 64 of a-z, 0-9 and -", clip(id)))
	}
	return nil
}

// validSelfVersion is the wire's check; the helper's selfupdate package
// checks the Debian form in full.
func validSelfVersion(field, v string) error {
	if v == "" || len(v) > MaxPackageVersion || v[0] < '0' || v[0] > '9' ||
		strings.IndexFunc(v, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".+-~:", r))
		}) >= 0 {
		return invalid(field, clip(v), fmt.Sprintf("proto: %s %q is not a package version such as 1.2.0", field, clip(v)))
	}
	return nil
}

// Validate implements Validator.
func (r UpdateStartReq) Validate() error {
	if err := validUpdateID(r.ID); err != nil {
		return err
	}
	if err := validSelfVersion("from", r.From); err != nil {
		return err
	}
	if err := validSelfVersion("to", r.To); err != nil {
		return err
	}
	if !slices.Contains(UpdateChannels, r.Channel) {
		return invalid("channel", clip(r.Channel), fmt.Sprintf("proto: update channel %q: want one of %v", clip(r.Channel), UpdateChannels))
	}
	return nil
}

// Validate implements Validator.
func (r UpdateReportReq) Validate() error {
	if err := validUpdateID(r.ID); err != nil {
		return err
	}
	if err := validSelfVersion("version", r.Version); err != nil {
		return err
	}
	if len(r.Reason) > MaxUpdateReason {
		return invalid("reason", len(r.Reason), fmt.Sprintf("proto: update report reason longer than %d bytes", MaxUpdateReason))
	}
	return nil
}

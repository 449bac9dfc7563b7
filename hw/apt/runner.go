package apt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/units"
)

// Kinds of run.
const (
	KindRefresh = "refresh" // apt-get update
	KindApply   = "apply"   // download, then install exactly a plan
)

// States of a run, as the common status object of the tool catalog names
// them, plus cancelled.
const (
	StateRunning   = "running"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateCancelled = "cancelled"
)

// Errors of Runner; the helper maps them onto its error codes.
var (
	ErrLocked  = errors.New("apt: the dpkg lock is held")
	ErrBusy    = errors.New("apt: another package run is in progress")
	ErrTooLate = errors.New("apt: dpkg has started; cancelling now would leave packages half installed")
	ErrNoRun   = errors.New("apt: no such run")
)

// LockedError is ErrLocked with its holder.
type LockedError struct{ Holder Holder }

func (e *LockedError) Error() string {
	return fmt.Sprintf("apt: the dpkg lock %s is held by pid %d (%s)", e.Holder.Lock, e.Holder.PID, e.Holder.Command)
}
func (e *LockedError) Unwrap() error { return ErrLocked }

// RunInfo is one run as the helper reports it.
type RunInfo struct {
	ID                string    `json:"id"`
	Kind              string    `json:"kind"`
	State             string    `json:"state"`
	Phase             string    `json:"phase"` // "download" or "install" for an apply, "update" for a refresh
	Percent           float64   `json:"percent"`
	Message           string    `json:"message"`
	StartedAt         time.Time `json:"started_at"`
	FinishedAt        time.Time `json:"finished_at,omitzero"`
	Error             string    `json:"error,omitempty"`
	PlanHash          string    `json:"plan_hash,omitempty"`
	Targets           []string  `json:"targets,omitempty"`
	Cancellable       bool      `json:"cancellable"`
	ConffilesKept     []string  `json:"conffiles_kept,omitempty"`
	ConffilesReplaced []string  `json:"conffiles_replaced,omitempty"`
	Unit              string    `json:"unit"` // the transient unit running now, or the last one
}

// Runner runs apt for the root helper: apt-get update, and a plan in two
// transient units, first downloading every package (stoppable at any
// time: nothing is installed yet) and then installing from the cache only
// (--no-download), which is never stopped. Cancel is therefore allowed
// exactly while the first unit runs, and the decision to start the second
// is taken under the same lock as a cancel, so the two cannot cross.
//
// apt runs with DEBIAN_FRONTEND=noninteractive and dpkg keeps the owner's
// changed configuration files (--force-confdef --force-confold: the
// Debian-safe answer to a conffile prompt); its status descriptor goes to
// a file in Dir, which Status reads for progress.
type Runner struct {
	Units   units.Transient
	Dir     string                  // status files; the helper's runtime directory
	Lock    func() (*Holder, error) // who holds the dpkg lock
	DpkgLog string                  // dpkg's log, for the conffile decisions; "" skips them
	AptGet  string                  // "" means /usr/bin/apt-get
	Shell   string                  // "" means /bin/sh; only opens the status file for apt
	// Keep is how many finished runs Status still knows; 0 means 8.
	Keep int

	mu   sync.Mutex
	runs []*runState // oldest first
}

type runState struct {
	info      RunInfo
	plan      Plan
	cancelled bool
}

// Env is the environment apt runs with.
var Env = []string{
	"DEBIAN_FRONTEND=noninteractive", "LANG=C", "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
	"APT_LISTCHANGES_FRONTEND=none", "NEEDRESTART_MODE=l",
}

// statusScript opens the status file named by its first argument as fd 3
// and runs the rest: a transient unit cannot be handed a descriptor, and
// the arguments are passed as such, never read as shell text.
const statusScript = `exec 3>>"$1" || exit 1; shift; exec "$@"`

func (r *Runner) aptGet() string { return orDefault(r.AptGet, "/usr/bin/apt-get") }

// aptArgs is the common part of an apt-get command line.
func (r *Runner) command(statusFile string, args ...string) []string {
	argv := []string{orDefault(r.Shell, "/bin/sh"), "-c", statusScript, "raspi-mcp-apt", statusFile, r.aptGet(),
		"-q", "-y", "-o", "APT::Status-Fd=3",
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	return append(argv, args...)
}

// Refresh starts apt-get update.
func (r *Runner) Refresh(ctx context.Context) (RunInfo, error) {
	return r.start(ctx, KindRefresh, Plan{})
}

// Apply starts installing exactly plan: every upgrade and install at its
// To version, every removal removed, nothing else (--no-remove unless the
// plan removes something; apt refuses then rather than widen the plan).
func (r *Runner) Apply(ctx context.Context, plan Plan) (RunInfo, error) {
	if err := plan.Validate(); err != nil {
		return RunInfo{}, err
	}
	if plan.Empty() {
		return RunInfo{}, errors.New("apt: the plan changes nothing")
	}
	return r.start(ctx, KindApply, plan)
}

func newRunID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "os-update-" + hex.EncodeToString(b)
}

func (r *Runner) start(ctx context.Context, kind string, plan Plan) (RunInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.runs {
		if x.info.State == StateRunning {
			return RunInfo{}, fmt.Errorf("%w: %s (%s)", ErrBusy, x.info.ID, x.info.Kind)
		}
	}
	if r.Lock != nil {
		h, err := r.Lock()
		if err != nil {
			return RunInfo{}, err
		}
		if h != nil {
			return RunInfo{}, &LockedError{Holder: *h}
		}
	}
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return RunInfo{}, fmt.Errorf("apt: status directory: %w", err)
	}
	id := newRunID()
	st := &runState{plan: plan, info: RunInfo{ID: id, Kind: kind, State: StateRunning, StartedAt: time.Now().UTC(), Cancellable: true}}
	var spec units.TransientSpec
	if kind == KindRefresh {
		st.info.Phase = "update"
		spec = r.spec(id, "update", "raspi-mcp: refresh the package lists", "update")
	} else {
		st.info.Phase, st.info.PlanHash, st.info.Targets = "download", plan.Hash(), plan.Targets()
		spec = r.spec(id, "download", "raspi-mcp: download the OS updates", r.installArgs(plan, "--download-only")...)
	}
	_ = os.Remove(r.statusFile(id))
	if err := r.Units.Start(ctx, spec); err != nil {
		return RunInfo{}, err
	}
	st.info.Unit = spec.Name
	r.runs = append(r.runs, st)
	r.trim()
	go r.follow(st, spec.Name)
	return st.info, nil
}

func (r *Runner) installArgs(p Plan, mode string) []string {
	args := []string{mode}
	if len(p.Removals) == 0 {
		args = append(args, "--no-remove")
	}
	return append(append(args, "install", "--"), p.Targets()...)
}

func (r *Runner) statusFile(id string) string { return filepath.Join(r.Dir, id+".status") }

func (r *Runner) spec(id, phase, desc string, args ...string) units.TransientSpec {
	return units.TransientSpec{Name: "raspi-mcp-" + id + "-" + phase + ".service", Description: desc,
		Argv: r.command(r.statusFile(id), args...), Env: Env}
}

// follow waits for a run's units and records how it ended. It runs
// without a caller: the run goes on when the agent that asked has gone.
func (r *Runner) follow(st *runState, unit string) {
	ctx := context.Background()
	res, err := r.Units.Wait(ctx, unit)
	r.mu.Lock()
	if err == nil && res.OK() && st.info.Kind == KindApply && !st.cancelled {
		// Downloaded: install from the cache. From here on there is no
		// cancelling.
		st.info.Phase, st.info.Cancellable = "install", false
		spec := r.spec(st.info.ID, "install", "raspi-mcp: install the OS updates", r.installArgs(st.plan, "--no-download")...)
		if err = r.Units.Start(ctx, spec); err == nil {
			st.info.Unit = spec.Name
			r.mu.Unlock()
			res, err = r.Units.Wait(ctx, spec.Name)
			r.mu.Lock()
		}
	}
	defer r.mu.Unlock()
	st.info.FinishedAt = time.Now().UTC()
	st.info.Cancellable = false
	switch {
	case st.cancelled:
		st.info.State, st.info.Message = StateCancelled, "cancelled before dpkg started: nothing was installed or removed"
	case err != nil:
		st.info.State, st.info.Error = StateFailed, err.Error()
	case !res.OK():
		st.info.State, st.info.Error = StateFailed, "apt-get: "+res.String()
		if p := ParseStatus(r.readStatus(st.info.ID)); len(p.Errors) > 0 {
			st.info.Error += ": " + strings.Join(p.Errors, "; ")
		}
	default:
		st.info.State, st.info.Percent = StateSucceeded, 100
	}
	if st.info.Kind == KindApply && r.DpkgLog != "" {
		if b, err := os.ReadFile(r.DpkgLog); err == nil {
			st.info.ConffilesKept, st.info.ConffilesReplaced = ParseConffiles(tail(string(b), 1<<20), st.info.StartedAt.Local())
		}
	}
}

// tail is the last n bytes of s, from a line start.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func (r *Runner) readStatus(id string) string {
	b, err := os.ReadFile(r.statusFile(id))
	if err != nil {
		return ""
	}
	return tail(string(b), 256<<10)
}

// trim forgets the oldest finished runs beyond Keep.
func (r *Runner) trim() {
	keep := r.Keep
	if keep <= 0 {
		keep = 8
	}
	for len(r.runs) > keep && r.runs[0].info.State != StateRunning {
		_ = os.Remove(r.statusFile(r.runs[0].info.ID))
		r.runs = r.runs[1:]
	}
}

// Status is one run, with its progress read from the status file.
func (r *Runner) Status(id string) (RunInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.runs {
		if x.info.ID == id {
			return r.progress(x), nil
		}
	}
	return RunInfo{}, fmt.Errorf("%w %q", ErrNoRun, clip(id))
}

// List is every run the runner remembers, oldest first.
func (r *Runner) List() []RunInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RunInfo, 0, len(r.runs))
	for _, x := range r.runs {
		out = append(out, r.progress(x))
	}
	return out
}

// progress fills a running run's percent and message from its status
// file. An apply's two phases count half each.
func (r *Runner) progress(x *runState) RunInfo {
	info := x.info
	info.Targets = append([]string(nil), info.Targets...)
	if info.State != StateRunning {
		return info
	}
	p := ParseStatus(r.readStatus(info.ID))
	info.Message = p.Message
	switch {
	case info.Kind == KindRefresh:
		info.Percent = p.Percent
	case p.Phase == "install":
		info.Percent = 50 + p.Percent/2
	default:
		info.Percent = p.Percent / 2
	}
	return info
}

// Cancel stops a run while that is safe: a refresh at any time, an apply
// only while it downloads. Afterwards ErrTooLate says why not.
func (r *Runner) Cancel(ctx context.Context, id string) (RunInfo, error) {
	r.mu.Lock()
	var st *runState
	for _, x := range r.runs {
		if x.info.ID == id {
			st = x
		}
	}
	switch {
	case st == nil:
		r.mu.Unlock()
		return RunInfo{}, fmt.Errorf("%w %q", ErrNoRun, clip(id))
	case st.info.State != StateRunning:
		info := st.info
		r.mu.Unlock()
		return info, fmt.Errorf("apt: run %s has already ended (%s)", id, info.State)
	case !st.info.Cancellable:
		info := r.progress(st)
		r.mu.Unlock()
		return info, fmt.Errorf("%w (run %s is in its %s phase: %s)", ErrTooLate, id, info.Phase, info.Message)
	}
	st.cancelled = true
	unit := st.info.Unit
	r.mu.Unlock()
	if err := r.Units.Stop(ctx, unit); err != nil && !errors.Is(err, units.ErrNotFound) {
		return RunInfo{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress(st), nil
}

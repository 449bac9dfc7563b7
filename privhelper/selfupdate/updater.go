package selfupdate

import (
	"context"
	"fmt"
	"time"
)

// Updater carries out one run recorded in Dir.
type Updater struct {
	Dir      Dir
	Packages Packages
	Health   Health
	Deadline time.Duration    // how long the new agent has to report healthy
	Now      func() time.Time // nil: time.Now
	Log      func(msg string, args ...any)
}

// Begin records a new run in dir, to be carried out by an Updater. It
// refuses while another run has not ended: two updates at once would each
// take the other's version for the one to go back to.
func Begin(dir Dir, r Run, now time.Time) (Run, error) {
	last, ok, err := dir.ReadRun()
	if err != nil {
		return Run{}, err
	}
	if ok && !Final(last.Phase) {
		return Run{}, fmt.Errorf("%w: update %s (%s to %s) is still %s", ErrBusy, last.ID, last.From, last.To, last.Phase)
	}
	r.Phase, r.Started, r.Finished, r.Reason, r.Kept, r.Installed = PhaseInstalling, now.UTC(), time.Time{}, "", "", ""
	return r, dir.WriteRun(r)
}

// ErrBusy is Begin's refusal while a run is under way.
var ErrBusy = fmt.Errorf("selfupdate: an update is under way")

// Run carries out the run id: keep the installed version's package, install
// the target, wait for the new agent's healthy report, and reinstall the
// kept package when any of that fails after something changed. It returns
// the final record, which is also written to Dir; err is only for a run
// that could not be found or recorded.
func (u *Updater) Run(ctx context.Context, id string) (Run, error) {
	r, ok, err := u.Dir.ReadRun()
	if err != nil {
		return r, err
	}
	if !ok || r.ID != id {
		return r, fmt.Errorf("selfupdate: no recorded run %q", id)
	}
	if r.Phase != PhaseInstalling {
		return r, fmt.Errorf("selfupdate: run %s is %s, not waiting to install", id, r.Phase)
	}
	r.Deadline = u.Deadline.String()
	return u.finish(ctx, u.run(ctx, r))
}

func (u *Updater) now() time.Time {
	if u.Now != nil {
		return u.Now()
	}
	return time.Now()
}

func (u *Updater) log(msg string, args ...any) {
	if u.Log != nil {
		u.Log(msg, args...)
	}
}

// step records a phase before acting on it, so a record read at any
// moment (or left behind by a power cut) says what was going on.
func (u *Updater) step(r *Run, phase string) {
	r.Phase = phase
	if err := u.Dir.WriteRun(*r); err != nil {
		u.log("selfupdate: recording the phase failed", "phase", phase, "err", err)
	}
}

func (u *Updater) run(ctx context.Context, r Run) Run {
	installed, err := u.Packages.Installed(ctx)
	if err != nil {
		return failed(r, "nothing changed: cannot read the installed version: %v", err)
	}
	if installed != r.From {
		return failed(r, "nothing changed: %s is installed, not %s the update was planned from", orNone(installed), r.From)
	}
	u.step(&r, PhaseInstalling)
	if r.Kept, err = u.Packages.Keep(ctx, r.From); err != nil {
		return failed(r, "nothing changed: cannot keep %s's package for a rollback: %v", r.From, err)
	}
	u.log("selfupdate: installing", "from", r.From, "to", r.To, "kept", r.Kept)
	if err := u.Packages.Install(ctx, r.To); err != nil {
		now, rerr := u.Packages.Installed(ctx)
		if rerr == nil && now == r.From {
			return failed(r, "nothing changed: installing %s failed: %v", r.To, err)
		}
		return u.rollback(ctx, r, fmt.Sprintf("installing %s failed: %v", r.To, err))
	}
	if now, err := u.Packages.Installed(ctx); err != nil || now != r.To {
		return u.rollback(ctx, r, fmt.Sprintf("after the install dpkg reports %s installed, not %s (%v)", orNone(now), r.To, err))
	}
	u.step(&r, PhaseAwaiting)
	rep, err := u.Health.Await(ctx, r.ID, r.To, u.now().Add(u.Deadline))
	switch {
	case err != nil:
		return u.rollback(ctx, r, fmt.Sprintf("the new agent %s did not report healthy within %s: %v", r.To, u.Deadline, err))
	case !rep.Healthy:
		return u.rollback(ctx, r, fmt.Sprintf("the new agent %s failed its start-up check: %s", r.To, rep.Reason))
	}
	r.Phase, r.Reason = PhaseSucceeded, ""
	return r
}

// rollback reinstalls the kept package. why is the reason the update is
// taken back; a failed rollback says both.
func (u *Updater) rollback(ctx context.Context, r Run, why string) Run {
	u.log("selfupdate: rolling back", "to", r.From, "why", why)
	r.Reason = why
	u.step(&r, PhaseRollingBack)
	if err := u.Packages.Reinstall(ctx, r.Kept); err != nil {
		return failed(r, "%s; rolling back to %s failed too: %v", why, r.From, err)
	}
	if now, err := u.Packages.Installed(ctx); err != nil || now != r.From {
		return failed(r, "%s; after the rollback %s is installed, not %s (%v)", why, orNone(now), r.From, err)
	}
	r.Phase = PhaseRolledBack
	return r
}

func (u *Updater) finish(ctx context.Context, r Run) (Run, error) {
	r.Finished = u.now().UTC()
	if v, err := u.Packages.Installed(ctx); err == nil {
		r.Installed = v
	}
	u.log("selfupdate: finished", "id", r.ID, "phase", r.Phase, "installed", r.Installed, "reason", r.Reason)
	return r, u.Dir.WriteRun(r)
}

func failed(r Run, f string, args ...any) Run {
	r.Phase, r.Reason = PhaseFailed, fmt.Sprintf(f, args...)
	return r
}

func orNone(v string) string {
	if v == "" {
		return "nothing"
	}
	return v
}

// FileHealth waits for the report the helper writes to Dir, looking every
// Poll (1 s if zero).
type FileHealth struct {
	Dir  Dir
	Poll time.Duration
}

// Await implements Health.
func (h FileHealth) Await(ctx context.Context, id, version string, deadline time.Time) (Report, error) {
	poll := h.Poll
	if poll <= 0 {
		poll = time.Second
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		rep, ok, err := h.Dir.ReadReport()
		if err == nil && ok && rep.ID == id && rep.Version == version {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return Report{}, fmt.Errorf("no report (last read: %v)", err)
			}
			return Report{}, fmt.Errorf("no report")
		case <-t.C:
		}
	}
}

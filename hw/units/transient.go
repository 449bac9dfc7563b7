package units

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Transient runs one command as a transient systemd service: the helper
// uses it to start programs that must run outside its own sandbox (apt and
// dpkg write all over /usr, /etc and /var while the helper's unit stays
// ProtectSystem=strict), so systemd, not the helper, is their parent.
//
// A run is named by its unit; the unit stays loaded after the command ends
// until Wait (or Forget) has read its exit status, so a status is never
// lost between the end of the command and the caller's look.
type Transient interface {
	// Start starts spec's command and returns once systemd has executed
	// it (or failed to). A unit of that name that still exists is an error.
	Start(ctx context.Context, spec TransientSpec) error
	// Status reads a run's state without changing it; ErrNotFound for a
	// name systemd does not know (never started, or already forgotten).
	Status(ctx context.Context, name string) (RunStatus, error)
	// Wait waits until the command has ended, then removes the unit and
	// returns how it ended. ctx bounds only the wait; the command keeps
	// running when ctx ends first.
	Wait(ctx context.Context, name string) (RunStatus, error)
	// Stop asks systemd to stop the run (SIGTERM to every process of the
	// unit, SIGKILL after the stop timeout) and waits for the stop job.
	// Stopping a run that has already ended changes nothing.
	Stop(ctx context.Context, name string) error
}

// TransientSpec is one command to run. Argv[0] must be an absolute path:
// systemd does not search PATH for a transient unit on every version.
type TransientSpec struct {
	Name        string   // the unit, "x" or "x.service"; must be a .service
	Description string   // shown by systemctl status
	Argv        []string // the command and its arguments
	Env         []string // KEY=VALUE, the command's whole environment beside systemd's defaults
}

// RunStatus is a run's state. While Running, PID is the command's main
// process; once Exited, Code is its exit status or Signal the signal that
// ended it.
type RunStatus struct {
	Name    string
	Running bool
	PID     int
	Exited  bool
	Code    int
	Signal  int
	Result  string // systemd's Result: success, exit-code, signal, timeout, ...; "gone" when the unit was unloaded before its status was read (Code is -1 then)
}

// OK reports a run that ended with exit status 0.
func (s RunStatus) OK() bool { return s.Exited && s.Signal == 0 && s.Code == 0 }

// String says how the run ended, for errors and audit records.
func (s RunStatus) String() string {
	switch {
	case s.Running:
		return fmt.Sprintf("%s running (pid %d)", s.Name, s.PID)
	case s.Signal != 0:
		return fmt.Sprintf("%s killed by signal %d", s.Name, s.Signal)
	case s.Exited:
		return fmt.Sprintf("%s exited with status %d", s.Name, s.Code)
	}
	return s.Name + " not started"
}

// checkSpec validates a spec and returns its normalised unit name.
func checkSpec(spec TransientSpec) (string, error) {
	name, err := Normalize(spec.Name)
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(name, ".service") {
		return "", fmt.Errorf("units: transient %q: must be a .service", name)
	}
	if len(spec.Argv) == 0 || !strings.HasPrefix(spec.Argv[0], "/") {
		return "", fmt.Errorf("units: transient %q: the command %q must start with an absolute path", name, spec.Argv)
	}
	for _, e := range spec.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsAny(e, "\x00\n") {
			return "", fmt.Errorf("units: transient %q: environment entry %q is not KEY=VALUE on one line", name, e)
		}
	}
	return name, nil
}

// pollEvery is how often Wait reads a run's state. Apt runs take minutes;
// a second of latency on its end costs nothing and keeps the bus quiet.
const pollEvery = time.Second

// Start starts a Type=exec service with RemainAfterExit, so that a command
// that ended well stays "active (exited)" with its status readable, as a
// failed one stays "failed", until Wait collects it.
func (d *DBus) Start(ctx context.Context, spec TransientSpec) error {
	name, err := checkSpec(spec)
	if err != nil {
		return err
	}
	props := []sd.Property{
		sd.PropDescription(spec.Description),
		sd.PropType("exec"),
		sd.PropRemainAfterExit(true),
		sd.PropExecStart(spec.Argv, false),
	}
	if len(spec.Env) > 0 {
		props = append(props, sd.Property{Name: "Environment", Value: godbus.MakeVariant(spec.Env)})
	}
	c, err := d.connection(ctx)
	if err != nil {
		return err
	}
	done := make(chan string, 1) // buffered: see Control
	if _, err := c.StartTransientUnitContext(ctx, name, "fail", props, done); err != nil {
		if dbusErrorName(err) == "org.freedesktop.systemd1.UnitExists" {
			return fmt.Errorf("units: start transient %q: %w", name, ErrTransientExists)
		}
		return fmt.Errorf("units: start transient %q: %w", name, err)
	}
	select {
	case <-done:
		// A job that did not end "done" means the exec failed (no such
		// file, bad user): the unit is failed and Wait reports it.
		return nil
	case <-ctx.Done():
		return fmt.Errorf("units: start transient %q: job queued, but stopped waiting for it: %w", name, ctx.Err())
	}
}

// Status reads ActiveState, SubState and the Service's ExecMain* and
// Result properties.
func (d *DBus) Status(ctx context.Context, name string) (RunStatus, error) {
	name, err := Normalize(name)
	if err != nil {
		return RunStatus{}, err
	}
	u, t, err := d.props(ctx, name, []string{"MainPID", "ExecMainCode", "ExecMainStatus", "ExecMainPID", "Result"})
	if err != nil {
		return RunStatus{}, err
	}
	if !found(u) || (propString(u, "LoadState") == "not-found") {
		return RunStatus{}, notFound(name)
	}
	return runStatus(name, propString(u, "ActiveState"), propString(u, "SubState"), t), nil
}

// runStatus turns a service's properties into a RunStatus. ExecMainCode
// is the waitid() si_code: 1 CLD_EXITED (status is the exit code), 2
// CLD_KILLED and 3 CLD_DUMPED (status is the signal), 0 not yet ended.
func runStatus(name, active, sub string, t map[string]any) RunStatus {
	s := RunStatus{Name: name, Result: propString(t, "Result")}
	code := (propInt(t, "ExecMainCode"))
	status := (propInt(t, "ExecMainStatus"))
	switch {
	case active == "failed" || (active == "active" && sub == "exited") || (active == "inactive" && code != 0):
		s.Exited = true
		switch code {
		case 2, 3:
			s.Signal = status
		case 1:
			s.Code = status
		default:
			// Never executed (203/EXEC and friends end in "failed"
			// with no main process): say it failed.
			s.Code = status
			if s.Code == 0 {
				s.Code = 1
			}
		}
	case active == "inactive" || active == "":
		// Stopped before it ran, or gone.
		s.Exited = true
		s.Signal = 15
	default:
		s.Running = true
		s.PID = (propInt(t, "ExecMainPID"))
		if p := (propInt(t, "MainPID")); p != 0 {
			s.PID = p
		}
	}
	return s
}

// Wait polls Status until the run has ended, then forgets the unit.
func (d *DBus) Wait(ctx context.Context, name string) (RunStatus, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		s, err := d.Status(ctx, name)
		if errors.Is(err, ErrNotFound) {
			// systemd unloads a run once it is stopped and inactive:
			// it ended, how is no longer known.
			n, _ := Normalize(name)
			return RunStatus{Name: n, Exited: true, Code: -1, Result: "gone"}, nil
		}
		if err != nil {
			return s, err
		}
		if s.Exited {
			return s, d.forget(ctx, s.Name)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return s, fmt.Errorf("units: wait for %q: %w", name, ctx.Err())
		}
	}
}

// forget unloads an ended run: stop for one that stays active (exited),
// reset-failed for a failed one. Either is harmless on the other state.
func (d *DBus) forget(ctx context.Context, name string) error {
	c, err := d.connection(ctx)
	if err != nil {
		return err
	}
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, name, "replace", done); err == nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("units: forget %q: %w", name, ctx.Err())
		}
	}
	if err := c.ResetFailedUnitContext(ctx, name); err != nil && dbusErrorName(err) != "org.freedesktop.systemd1.NoSuchUnit" {
		return fmt.Errorf("units: forget %q: %w", name, err)
	}
	return nil
}

// Stop queues a stop job and waits for it. The unit stays loaded (with
// RemainAfterExit a stopped run is inactive, its status readable) until
// Wait collects it.
func (d *DBus) Stop(ctx context.Context, name string) error {
	name, err := Normalize(name)
	if err != nil {
		return err
	}
	c, err := d.connection(ctx)
	if err != nil {
		return err
	}
	done := make(chan string, 1)
	if _, err := c.StopUnitContext(ctx, name, "replace", done); err != nil {
		return d.wrap("stop", name, err)
	}
	select {
	case job := <-done:
		if job != "done" {
			return fmt.Errorf("units: stop %q: job %s", name, job)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("units: stop %q: %w", name, ctx.Err())
	}
}

// ErrTransientExists is returned (wrapped) by Start for a name in use.
var ErrTransientExists = errors.New("units: a unit of that name exists")

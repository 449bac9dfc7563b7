// Package power schedules and cancels reboots and power-offs.
//
// Power is the tiny interface the root helper drives; Logind is the real
// implementation (systemd-logind over the system D-Bus) and Sim is a
// side-effect-free stand-in for demos and tests. Both mirror logind's model:
// at most one pending action, and scheduling a new one replaces it.
package power

import (
	"context"
	"fmt"
	"time"
)

// Action is what happens when a schedule fires.
type Action string

// The actions this package performs.
const (
	Reboot   Action = "reboot"
	Poweroff Action = "poweroff"
)

// Valid reports whether a is an action this package will schedule.
func (a Action) Valid() bool { return a == Reboot || a == Poweroff }

// Schedule is a pending (or, in Sim's history, performed) power action.
type Schedule struct {
	Action Action
	At     time.Time
}

// Power schedules power actions. Implementations must be safe for
// concurrent use: the helper serves several connections at once.
type Power interface {
	// Schedule arranges for a to happen at at, replacing any pending action.
	Schedule(ctx context.Context, a Action, at time.Time) error
	// Cancel cancels the pending action, returning it and ok=true if there was one.
	Cancel(ctx context.Context) (cancelled Schedule, ok bool, err error)
	// Scheduled returns the pending action, if any.
	Scheduled(ctx context.Context) (Schedule, bool, error)
}

// checkAction is shared by the implementations so they refuse the same values.
func checkAction(a Action) error {
	if !a.Valid() {
		return fmt.Errorf("power: action %q is not %q or %q", a, Reboot, Poweroff)
	}
	return nil
}

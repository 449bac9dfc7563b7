package units

import (
	"context"
	"fmt"
)

// Unavailable stands in when the system bus cannot be reached (a container,
// a machine without systemd): every call fails with Err, so the service
// tools answer with the reason instead of the agent refusing to start.
type Unavailable struct{ Err error }

var _ Units = Unavailable{}

func (u Unavailable) err() error { return fmt.Errorf("units: systemd is not reachable: %w", u.Err) }

func (u Unavailable) List(context.Context) ([]Unit, error)        { return nil, u.err() }
func (u Unavailable) Get(context.Context, string) (Detail, error) { return Detail{}, u.err() }
func (u Unavailable) Validate(context.Context, string) (Validation, error) {
	return Validation{}, u.err()
}
func (u Unavailable) ActiveDependents(context.Context, string) ([]string, error) {
	return nil, u.err()
}
func (u Unavailable) Control(context.Context, string, string) (ControlResult, error) {
	return ControlResult{}, u.err()
}
func (u Unavailable) SetEnabled(context.Context, string, bool) (EnableResult, error) {
	return EnableResult{}, u.err()
}

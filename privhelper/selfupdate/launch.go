package selfupdate

import (
	"context"
	"slices"

	"github.com/raspi-mcp/raspi-mcp/hw/units"
)

// Launcher starts the updater for a recorded run, somewhere it survives
// the restart of the agent and the helper, and names where.
type Launcher interface {
	Launch(ctx context.Context, id string) (unit string, err error)
}

// InProcess runs the updater in a goroutine of the helper: laptop mode's
// launcher, where there are no services to restart.
type InProcess struct{ Updater *Updater }

// Launch implements Launcher.
func (p InProcess) Launch(_ context.Context, id string) (string, error) {
	go func() {
		if _, err := p.Updater.Run(context.Background(), id); err != nil {
			p.Updater.log("selfupdate: run failed", "id", id, "err", err)
		}
	}()
	return "sim:raspi-mcp-selfupdate-" + id, nil
}

// Unit launches the updater as a transient systemd service: systemd, not
// the helper, is its parent, so it outlives the helper's and the agent's
// restart, and it runs without the helper's sandbox, as apt must.
type Unit struct {
	Runner units.Transient
	// Argv is the updater's command without the run id, e.g.
	// /usr/bin/raspi-mcp-helper self-update --config /etc/raspi-mcp/config.toml.
	Argv []string
}

// Launch implements Launcher.
func (u Unit) Launch(ctx context.Context, id string) (string, error) {
	name := "raspi-mcp-selfupdate-" + id + ".service"
	argv := append(slices.Clone(u.Argv), "--id", id)
	if err := u.Runner.Start(ctx, units.TransientSpec{Name: name, Description: "raspi-mcp self-update " + id, Argv: argv}); err != nil {
		return "", err
	}
	return name, nil
}

package privhelper

import (
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"strconv"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// Backends is everything a Server acts on that the config does not say:
// the devices (real or simulated), the witness file and how accounts are
// named. The helper binary, `raspi-mcp selftest` and the test rig each
// bring their own; the policy over them comes from OptionsFromConfig alone.
type Backends struct {
	Power    power.Power
	Hardware Hardware // its Camera is set from Camera below
	// Camera is wrapped so that photos belong to the agent's user, who
	// must read them back for an inline image; nil: not served.
	Camera  camera.Camera
	Ops     Ops
	Witness *witness.Log
	// Updates updates raspi-mcp itself; its zero value serves no update.*.
	Updates Updates
	Backend string // "linux" or "sim", reported by Status
	Version string
	Logger  *slog.Logger
	// Accounts resolves a [process] protected_users name to the uid its
	// processes run as: nil means this system's accounts, while on the
	// simulated board they are the board's own (its processes are).
	Accounts func(name string) (uid int, ok bool)
}

// OptionsFromConfig is the one mapping from the owner's config to the
// helper's policy, so that the shipped helper, the selftest and the tests
// enforce the same rules: the agent's user from [helper] agent_user (looked
// up on this system: the agent is a process here even on a simulated
// board), the config's switches and allowlists as they are (Policy reads
// the switches through config's switches table), and the protected users
// resolved once at start.
func OptionsFromConfig(cfg *config.Config, b Backends) (Options, error) {
	agentUID, err := LookupUID(cfg.Helper.AgentUser)
	if err != nil {
		return Options{}, fmt.Errorf("privhelper: helper.agent_user %q: %w", cfg.Helper.AgentUser, err)
	}
	accounts := b.Accounts
	if accounts == nil {
		accounts = func(name string) (int, bool) {
			uid, err := LookupUID(name)
			return uid, err == nil
		}
	}
	// A name with no account protects nobody and is skipped: no process
	// can run as it either.
	var protected []int
	for _, name := range cfg.Process.ProtectedUsers {
		if uid, ok := accounts(name); ok {
			protected = append(protected, uid)
		}
	}
	hw := b.Hardware
	hw.Camera = nil
	if b.Camera != nil {
		hw.Camera = CameraFrom(b.Camera, agentUID)
	}
	return Options{
		// The helper's own copy of the config: its switches and
		// allowlists, and [manage] update_health_timeout, so the agent
		// cannot give a broken release more (or less) time to prove
		// itself.
		Policy:   Policy{AgentUID: agentUID, Config: *cfg, ProtectedUIDs: protected},
		Power:    b.Power,
		Hardware: hw,
		Ops:      b.Ops,
		// The bounds on the methods that wait on systemd ([helper]
		// systemd_timeout, job_timeout); the agent reads the same keys
		// and waits longer (privhelper/client). Fixed for the helper's
		// life: a reload changes policy, not how long a call may take.
		SystemdTimeout: cfg.Helper.SystemdTimeout.D(),
		JobTimeout:     cfg.Helper.JobTimeout.D(),
		Witness:        b.Witness,
		Updates:        b.Updates,
		Backend:        b.Backend,
		Version:        b.Version,
		Logger:         b.Logger,
	}, nil
}

// LookupUID resolves a user name, or a numeric uid, on this system.
func LookupUID(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("invalid uid %d", n)
		}
		return n, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return 0, fmt.Errorf("no user %q on this system", name)
		}
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

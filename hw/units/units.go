// Package units is systemd as raspi-mcp sees it: listing, inspecting,
// starting, stopping, enabling and validating units.
//
// [DBus] talks to systemd over the system bus. Reads work as the
// unprivileged agent user (systemd's bus policy lets anyone read unit
// properties); changes need root, so only the helper calls Control and
// SetEnabled. [Sim] is a simulated systemd whose state lives in a JSON file
// shared by the agent and helper processes, for laptops, demos and tests.
//
// Every name a caller passes goes through [Normalize] first, so "nginx"
// means "nginx.service" everywhere and a malformed name is refused here
// instead of reaching systemd.
package units

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"
)

// ErrNotFound is returned (wrapped with the name) for a unit systemd does
// not know: not loaded and without a unit file.
var ErrNotFound = errors.New("units: no such unit")

// ErrStatic is returned (wrapped with the name) by SetEnabled(true) for a
// unit file without an [Install] section: systemd accepts the request but
// there is nothing to enable, and a caller asking to enable should hear so.
var ErrStatic = errors.New("units: the unit file has no [Install] section, so it cannot be enabled")

// MaxName is systemd's limit on a unit name (UNIT_NAME_MAX).
const MaxName = 256

// Actions accepted by Control.
const (
	Start   = "start"
	Stop    = "stop"
	Restart = "restart"
	Reload  = "reload"
)

// Unit is one unit's state.
type Unit struct {
	Name, Description string
	LoadState         string    // loaded, not-found, masked, bad-setting, error, ...
	ActiveState       string    // active, inactive, activating, deactivating, failed, reloading, refreshing
	SubState          string    // running, exited, dead, failed, waiting, auto-restart, ...
	UnitFileState     string    // enabled, enabled-runtime, linked, linked-runtime, masked, masked-runtime, static, disabled, indirect, generated, invalid, "" (transient)
	Preset            string    // UnitFilePreset: enabled/disabled, "" unknown
	MainPID           int       // 0 when none
	MemoryBytes       uint64    // MemoryCurrent; 0 when unknown (systemd's 2^64-1 "not set" becomes 0)
	CPUNanos          uint64    // CPUUsageNSec; 0 when unknown (same rule)
	ActiveSince       time.Time // ActiveEnterTimestamp; zero unless active, reloading or deactivating
	Restarts          int       // NRestarts: automatic restarts by Restart=, not manual ones
	CanStart          bool
	CanStop           bool
	CanReload         bool
}

// Detail is a unit with its configuration and dependencies.
type Detail struct {
	Unit
	FragmentPath                           string
	ExecStart, ExecStop                    []string // each command as one string "path arg1 arg2"
	WorkingDirectory, User, Group, Restart string
	Environment                            map[string]string // raw KEY=VALUE from Environment=; callers redact
	Requires, Wants, RequiredBy, WantedBy  []string
	After, Before                          []string
	DropInPaths                            []string // drop-in files applied on top of FragmentPath
	Type                                   string   // Type=: simple, exec, forking, oneshot, notify, ...; "" for other unit types
}

// ControlResult is the outcome of Control: systemd's job result (done,
// canceled, timeout, failed, dependency, skipped) and the unit around it.
// A job that ran but did not succeed is not an error: Job says how it
// ended, and After shows the state it left.
type ControlResult struct {
	Job           string
	Before, After Unit
}

// EnableResult is the outcome of SetEnabled: the unit file state around
// the change and the symlinks systemd created or removed.
type EnableResult struct {
	Before, After string
	Changes       []Change
}

// Change is one symlink change reported by EnableUnitFiles or
// DisableUnitFiles: Type is "symlink" or "unlink".
type Change struct {
	Type, File, Destination string
}

// Validation is the verdict on a unit file. Valid means no errors;
// warnings do not stop a unit from working but deserve a look.
type Validation struct {
	Valid            bool
	Errors, Warnings []string
	CanEnable        bool // the file has an [Install] section with something to enable
	FragmentPath     string
}

// Units is systemd as raspi-mcp sees it. Names are normalised with
// Normalize ("nginx" -> "nginx.service"); a bad name is an error, never
// passed on.
type Units interface {
	// List returns every loaded *.service unit plus the service unit files
	// that are not loaded, sorted by name.
	List(ctx context.Context) ([]Unit, error)
	// Get returns one unit in detail; ErrNotFound when systemd has neither
	// the unit nor a unit file for it.
	Get(ctx context.Context, name string) (Detail, error)
	// ActiveDependents returns the active units that need name: those in
	// its RequiredBy, BoundBy, RequisiteOf and WantedBy, targets excepted
	// (a target is only a synchronisation point, and multi-user.target
	// wants every enabled service), sorted.
	ActiveDependents(ctx context.Context, name string) ([]string, error)
	// Control runs start, stop, restart or reload and waits for the job's
	// result (ctx bounds the wait).
	Control(ctx context.Context, name, action string) (ControlResult, error)
	// SetEnabled enables or disables the unit file (persistently, without
	// forcing over other symlinks) and then reloads systemd.
	SetEnabled(ctx context.Context, name string, enabled bool) (EnableResult, error)
	// Validate checks the unit's file; see CheckUnitFile.
	Validate(ctx context.Context, name string) (Validation, error)
}

// Normalize checks a unit name and completes it: a name without a unit
// type suffix gets ".service" ("nginx" -> "nginx.service", "getty@tty1" ->
// "getty@tty1.service"). Allowed are systemd's unit name characters
// (letters, digits, ":", "_", ".", "@", "-" and the "\" of escapes such as
// "\x2d"), at most one "@", at most MaxName bytes, and no leading "-" or
// "." so that no name can ever be mistaken for an option or a hidden file.
func Normalize(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("units: empty unit name")
	}
	if len(name) > MaxName {
		return "", fmt.Errorf("units: unit name %.40q... is %d bytes, at most %d", name, len(name), MaxName)
	}
	if name[0] == '-' || name[0] == '.' {
		return "", fmt.Errorf("units: unit name %q starts with %q", name, name[0])
	}
	ats := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == ':' || c == '_' || c == '.' || c == '-' || c == '\\':
		case c == '@':
			ats++
		default:
			return "", fmt.Errorf("units: unit name %q has character %q; allowed are letters, digits, : _ . @ - and \\", name, c)
		}
	}
	if ats > 1 {
		return "", fmt.Errorf("units: unit name %q has more than one @", name)
	}
	if unitType(name) == "" {
		name += ".service"
		if len(name) > MaxName {
			return "", fmt.Errorf("units: unit name %.40q... is too long with .service", name)
		}
	}
	if name[0] == '@' {
		return "", fmt.Errorf("units: unit name %q has no prefix before @", name)
	}
	return name, nil
}

// unitType returns the D-Bus interface suffix of name's unit type
// ("Service" for "x.service"), or "" when name has no valid type suffix.
func unitType(name string) string {
	ext := path.Ext(name)
	if len(ext) == len(name) || len(ext) < 2 {
		return ""
	}
	switch ext {
	case ".service":
		return "Service"
	case ".socket":
		return "Socket"
	case ".target":
		return "Target"
	case ".device":
		return "Device"
	case ".mount":
		return "Mount"
	case ".automount":
		return "Automount"
	case ".swap":
		return "Swap"
	case ".timer":
		return "Timer"
	case ".path":
		return "Path"
	case ".slice":
		return "Slice"
	case ".scope":
		return "Scope"
	}
	return ""
}

// checkAction refuses anything but the four actions.
func checkAction(action string) error {
	switch action {
	case Start, Stop, Restart, Reload:
		return nil
	}
	return fmt.Errorf("units: unknown action %q (want start, stop, restart or reload)", action)
}

// notFound wraps ErrNotFound with the name.
func notFound(name string) error { return fmt.Errorf("units: %q: %w", name, ErrNotFound) }

// isActive reports whether an ActiveState counts as running for
// ActiveDependents and ActiveSince.
func isActive(state string) bool {
	switch state {
	case "active", "reloading", "refreshing", "deactivating":
		return true
	}
	return false
}

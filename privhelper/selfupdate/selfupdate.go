// Package selfupdate updates raspi-mcp itself and takes the update back
// when the new version does not prove healthy.
//
// The rule of the package: whatever happens, the device ends with a
// raspi-mcp that answers, and the record says which one and why. The
// updater runs as its own transient systemd unit (outside the helper's
// sandbox, which keeps /usr read-only), because installing the package
// restarts both the agent and the helper: nothing that runs inside them
// would live to see the outcome.
//
// Two small JSON files in the helper's state directory carry the run, each
// with a single writer so no lock is needed:
//   - the run record (run.go), written by the updater: what is being
//     installed, the phase, and the outcome with its reason;
//   - the health report, written by the helper when the new agent reports
//     on its own start-up check (the agent cannot write the helper's
//     directory; the helper accepts a report only for the running update
//     and its target version).
//
// This package is the helper's side: it must not import the MCP SDK or
// bbolt (privhelper/deps_test.go).
package selfupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Phases of a run. Succeeded, RolledBack and Failed are final.
const (
	PhaseInstalling  = "installing"      // the target is being installed
	PhaseAwaiting    = "awaiting_health" // installed; waiting for the new agent's report
	PhaseRollingBack = "rolling_back"    // the previous version is being reinstalled
	PhaseSucceeded   = "succeeded"       // the new version is running and healthy
	PhaseRolledBack  = "rolled_back"     // the previous version is back; Reason says why
	PhaseFailed      = "failed"          // nothing changed, or rollback failed too: Reason says which
)

// Final reports whether a phase ends the run.
func Final(phase string) bool {
	return phase == PhaseSucceeded || phase == PhaseRolledBack || phase == PhaseFailed
}

// Run is the record of one self-update.
type Run struct {
	ID       string    `json:"id"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Channel  string    `json:"channel"`
	Deadline string    `json:"deadline"` // how long the new agent had to report healthy, e.g. "2m0s"
	Phase    string    `json:"phase"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	// Kept is the previous version's package file, kept for the rollback.
	Kept string `json:"kept,omitempty"`
	// Installed is what dpkg says is installed when the run ended.
	Installed string `json:"installed,omitempty"`
}

// Report is the new agent's account of its start-up check.
type Report struct {
	ID       string    `json:"id"`      // the run it answers
	Version  string    `json:"version"` // the agent's own version
	Healthy  bool      `json:"healthy"`
	Reason   string    `json:"reason,omitempty"` // the failed checks, when not healthy
	Reported time.Time `json:"reported"`
}

// File names in the helper's state directory.
const (
	RunFile    = "selfupdate.json"
	ReportFile = "selfupdate-health.json"
)

// Dir is the helper's state directory as this package uses it.
type Dir string

// ReadRun returns the last run; ok is false when there never was one.
func (d Dir) ReadRun() (r Run, ok bool, err error) {
	ok, err = readJSON(filepath.Join(string(d), RunFile), &r)
	return r, ok, err
}

// WriteRun replaces the run record atomically.
func (d Dir) WriteRun(r Run) error { return writeJSON(filepath.Join(string(d), RunFile), r) }

// ReadReport returns the last health report.
func (d Dir) ReadReport() (r Report, ok bool, err error) {
	ok, err = readJSON(filepath.Join(string(d), ReportFile), &r)
	return r, ok, err
}

// WriteReport replaces the health report atomically.
func (d Dir) WriteReport(r Report) error { return writeJSON(filepath.Join(string(d), ReportFile), r) }

func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("selfupdate: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("selfupdate: %s: %w", path, err)
	}
	return true, nil
}

// writeJSON writes to a temporary file, syncs it and renames it over path,
// so a reader sees the old record or the new one, never half of one, and a
// power cut in the middle of an update leaves a record that says where.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("selfupdate: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("selfupdate: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Readable by the agent's user, as the witness is: the agent and
		// `raspi-mcp status` read the outcome, only root writes it.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("selfupdate: write %s: %w", path, err)
	}
	return nil
}

// Packages is the package manager as the updater needs it: apt and dpkg on
// a device, a version string in a file on the simulated board.
type Packages interface {
	// Installed is the installed raspi-mcp version ("" if none).
	Installed(ctx context.Context) (string, error)
	// Keep makes sure version's package file is on disk and returns its
	// path, for the rollback. It changes nothing installed.
	Keep(ctx context.Context, version string) (string, error)
	// Install installs version from the repository, keeping the local
	// config files; the package's scripts restart the services.
	Install(ctx context.Context, version string) error
	// Reinstall installs the package file Keep returned, even when it is
	// older than what is installed.
	Reinstall(ctx context.Context, path string) error
}

// Health waits for the new agent's report on run id from version, until
// deadline. It returns the report (healthy or not), or an error when none
// came in time or ctx ended.
type Health interface {
	Await(ctx context.Context, id, version string, deadline time.Time) (Report, error)
}

// Candidate is one raspi-mcp version a channel offers.
type Candidate struct {
	Version string `json:"version"`
	Channel string `json:"channel"`
	Size    int64  `json:"size"` // bytes to download; 0 when unknown
}

// Catalog is what the package manager offers and has installed, for
// planning an update. Reading it changes nothing.
type Catalog interface {
	Installed(ctx context.Context) (string, error)
	Available(ctx context.Context) ([]Candidate, error)
}

package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// loadedConfig is one generation of the configuration: the agent swaps the
// whole value on a reload, so a reader sees either the old or the new file,
// never half of each. Generation 1 is the one the agent started with.
type loadedConfig struct {
	cfg *config.Config
	gen uint64
	at  time.Time
}

// conf is the configuration in force. A call reads it as it goes: the
// policy decision and the handler may see two generations when a reload
// lands between them, which is safe because the helper re-checks every
// privileged request against its own reading of the file.
func (a *Agent) conf() *config.Config { return a.cfg.Load().cfg }

// configGeneration is the configuration's generation and when it was loaded.
func (a *Agent) configGeneration() (uint64, time.Time) {
	l := a.cfg.Load()
	return l.gen, l.at
}

// Reload reads the configuration file and its drop-ins again and, if they
// are valid, puts them in force for every session, live ones included. A
// bad file keeps the configuration in force and returns why. What the agent
// set up at start from the file (see keepOnReload) keeps its old value until
// the next restart; the keys concerned are logged.
func (a *Agent) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	return a.reloadLocked()
}

func (a *Agent) reloadLocked() error {
	if a.cfgPath == "" {
		return fmt.Errorf("agent: reload: no configuration file (laptop mode without one, or a test)")
	}
	next, err := config.Load(a.cfgPath)
	if err != nil {
		a.log.Error("config reload failed; the configuration in force is kept", "path", a.cfgPath, "err", err)
		return err
	}
	a.swap(next)
	return nil
}

// swap puts next in force after carrying over what only a restart changes,
// and tells the sessions when what they are listed changed (lists.go).
func (a *Agent) swap(next config.Config) {
	old := a.cfg.Load()
	if kept := keepOnReload(old.cfg, &next); len(kept) > 0 {
		a.log.Warn("config reload: these keys changed but take effect at the next restart", "keys", strings.Join(kept, ", "))
	}
	before := a.lists.snapshot()
	a.cfg.Store(&loadedConfig{cfg: &next, gen: old.gen + 1, at: time.Now()})
	a.lists.announce(before)
	a.log.Info("config reloaded", "path", a.cfgPath, "generation", old.gen+1, "writes_on", strings.Join(next.WritesOn(), ", "))
}

// keepOnReload copies into next what the running agent built from the file
// at start and cannot rebuild under live sessions, and names the keys whose
// new values are therefore not in force yet: [agent] (its socket, state
// file, naming and runtime tuning), [helper] (the connection to it),
// [http], [[upstream]] (mounted at start) and the metrics sampler's
// defaults.
func keepOnReload(old, next *config.Config) []string {
	before := *next
	next.Agent, next.Helper, next.HTTP, next.Upstreams = old.Agent, old.Helper, old.HTTP, old.Upstreams
	next.Metrics.DefaultJob, next.Metrics.DefaultInterval = old.Metrics.DefaultJob, old.Metrics.DefaultInterval
	next.Metrics.DefaultRetention, next.Metrics.FlushInterval = old.Metrics.DefaultRetention, old.Metrics.FlushInterval
	changes, _ := config.Diff(*next, before)
	kept := make([]string, 0, len(changes))
	for _, c := range changes {
		kept = append(kept, c.Key)
	}
	return kept
}

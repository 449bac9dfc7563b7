package privhelper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// rules is one generation of the helper's policy, built from the config
// file; Reload swaps the whole value so a request is checked against one
// reading of the file, never half of two.
type rules struct {
	policy Policy
	gen    uint64
}

func (s *Server) rules() *rules { return s.cur.Load() }

// Generation is the policy's generation: 1 at start, one more per reload.
func (s *Server) Generation() uint64 { return s.rules().gen }

// Reload reads the config again (Options.Reload) and puts its policy in
// force for every connection; pins new to the allowlist are put into their
// safe state first. A config that does not load, or a new pin that cannot
// be put into its safe state, keeps the policy in force and returns why.
// The agent's uid ([helper] agent_user) is who may connect at all: it is
// kept until the next restart.
func (s *Server) Reload(ctx context.Context) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.reloadLocked(ctx)
}

func (s *Server) reloadLocked(ctx context.Context) error {
	if s.reload == nil {
		return errors.New("privhelper: reload: the helper was started without a config file to reload")
	}
	o, err := s.reload()
	if err != nil {
		s.log.Error("privhelper: config reload failed; the policy in force is kept", "err", err)
		return err
	}
	old := s.rules()
	if o.Policy.AgentUID != old.policy.AgentUID {
		s.log.Warn("privhelper: config reload: helper.agent_user changed; it takes effect at the next restart",
			"agent_uid", old.policy.AgentUID, "new_agent_uid", o.Policy.AgentUID)
		o.Policy.AgentUID = old.policy.AgentUID
	}
	if err := s.safeStatesOfNewPins(ctx, &old.policy, &o.Policy); err != nil {
		s.log.Error("privhelper: config reload refused: a new pin cannot be put into its safe state; the policy in force is kept", "err", err)
		return err
	}
	next := &rules{policy: o.Policy, gen: old.gen + 1}
	s.cur.Store(next)
	if s.button != nil {
		s.button.reopen(o.Policy.Config.Guard.Button)
	}
	s.log.Info("privhelper: config reloaded", "generation", next.gen)
	return nil
}

// safeStatesOfNewPins configures the pins that next allows and old did not,
// as ApplySafeStates does at start, so a pin is never handed to the agent
// in a state nobody chose. A pin allowed before keeps its present state
// (a relay that is on stays on); a new safe state for it applies at the
// next helper start.
func (s *Server) safeStatesOfNewPins(ctx context.Context, old, next *Policy) error {
	if s.hw.GPIO == nil || !next.Allows(config.SwitchGPIOEnabled) {
		return nil
	}
	var errs []error
	for _, p := range next.Config.GPIO.Pins {
		if _, ok := old.Config.GPIO.Pin(p.Pin); ok && old.Allows(config.SwitchGPIOEnabled) {
			continue
		}
		if slices.Contains(next.Config.Guard.ReservedPins(), p.Pin) {
			continue // the button holds it
		}
		pull := p.Pull
		if pull == "" {
			pull = "none"
		}
		if _, err := s.hw.GPIO.Configure(ctx, p.Pin, p.Mode, pull, p.Value); err != nil {
			errs = append(errs, fmt.Errorf("GPIO%d: %w", p.Pin, err))
		}
	}
	return errors.Join(errs...)
}

// registerConfig serves config.apply and config.restore to a helper that
// knows its config file.
func (s *Server) registerConfig() {
	if s.cfgPath != "" {
		handle(s.mux, proto.ConfigApply, s.configApply)
		handle(s.mux, proto.ConfigRestore, s.configRestore)
	}
}

// configApply writes the MCP drop-in and reloads. The helper checks the
// candidate itself, with the same allow-list of keys the agent uses: a
// compromised agent cannot set [roles] or [guard] through it. If the reload
// fails the previous file is put back before the answer.
func (s *Server) configApply(ctx context.Context, r proto.ConfigApplyReq) (proto.ConfigApplyResp, error) {
	if _, err := config.CheckCandidate(s.cfgPath, []byte(r.TOML)); err != nil {
		var ke *config.KeyError
		code := proto.CodeInvalidArgument
		if errors.As(err, &ke) && ke.Forbidden {
			code = proto.CodePermissionDenied
		}
		e := proto.Errorf(code, "privhelper: config.apply: %v", err)
		if ke != nil && ke.Key != "" {
			e = e.With("key", ke.Key)
		}
		return proto.ConfigApplyResp{}, e
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	path := config.MCPDropInPath(s.cfgPath)
	if err := writeDropIn(path, []byte(r.TOML)); err != nil {
		return proto.ConfigApplyResp{}, proto.Errorf(proto.CodeInternal, "privhelper: config.apply: %v", err)
	}
	p := peerFrom(ctx)
	s.log.Info("privhelper: config drop-in written", "path", path, "diff_hash", r.DiffHash, "uid", p.UID, "pid", p.PID)
	if err := s.reloadLocked(ctx); err != nil {
		if rerr := restoreDropIn(path); rerr != nil {
			s.log.Error("privhelper: config.apply: putting the previous drop-in back failed", "path", path, "err", rerr)
			return proto.ConfigApplyResp{}, proto.Errorf(proto.CodeInternal, "privhelper: config.apply: reload failed (%v) and the previous drop-in could not be put back: %v", err, rerr)
		}
		s.log.Warn("privhelper: config.apply rolled back", "path", path, "diff_hash", r.DiffHash, "err", err)
		return proto.ConfigApplyResp{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: config.apply: the helper could not load the new config, the previous drop-in is back: %v", err).
			With("path", path)
	}
	return proto.ConfigApplyResp{Path: path, Generation: s.rules().gen}, nil
}

// configRestore undoes the last configApply and reloads.
func (s *Server) configRestore(ctx context.Context, _ proto.ConfigRestoreReq) (proto.ConfigRestoreResp, error) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	path := config.MCPDropInPath(s.cfgPath)
	if _, err := os.Stat(path + config.PrevSuffix); errors.Is(err, fs.ErrNotExist) {
		return proto.ConfigRestoreResp{Path: path, Generation: s.rules().gen}, nil
	}
	if err := restoreDropIn(path); err != nil {
		return proto.ConfigRestoreResp{}, proto.Errorf(proto.CodeInternal, "privhelper: config.restore: %v", err)
	}
	p := peerFrom(ctx)
	s.log.Warn("privhelper: config drop-in restored", "path", path, "uid", p.UID, "pid", p.PID)
	if err := s.reloadLocked(ctx); err != nil {
		return proto.ConfigRestoreResp{}, proto.Errorf(proto.CodeFailedPrecondition, "privhelper: config.restore: the previous drop-in is back but does not load: %v", err)
	}
	return proto.ConfigRestoreResp{Path: path, Restored: true, Generation: s.rules().gen}, nil
}

// writeDropIn replaces path atomically (mode 0644: the agent's user reads
// it), first keeping what was there as path+PrevSuffix: the old content, or
// an empty file when there was none, which restoreDropIn turns back into
// no file.
func writeDropIn(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	prev, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := atomicWrite(path+config.PrevSuffix, prev); err != nil {
		return err
	}
	return atomicWrite(path, data)
}

// restoreDropIn puts path+PrevSuffix back in place of path.
func restoreDropIn(path string) error {
	prev, err := os.ReadFile(path + config.PrevSuffix)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(prev)) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return os.Remove(path + config.PrevSuffix)
	}
	if err := os.Rename(path+config.PrevSuffix, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// atomicWrite writes data to a temporary file beside path, syncs it and
// renames it over path, so a reader (or a power cut) sees the old file or
// the new one, never a part.
func atomicWrite(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

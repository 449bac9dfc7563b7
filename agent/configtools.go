package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Configuration as a reversible change. The agent reads the config files
// and computes what a candidate drop-in would change; only the root helper
// writes one (config.MCPDropIn under config.d/), checking the candidate with
// the same allow-list of keys, and both daemons reload it. If either cannot
// load it, or the health check after the reload fails, the previous drop-in
// comes back by itself. Keys that decide who may do what ([roles], [http],
// [guard], [manage], [audit], ...) are not changeable this way at all
// (config.Changeable).

// configGetOut is manage.config_get: every key in force, where it comes from.
type configGetOut struct {
	Path       string      `json:"path" jsonschema:"the main configuration file"`
	DropIns    []string    `json:"drop_ins" jsonschema:"config.d files read after it, in order"`
	MCPDropIn  string      `json:"mcp_drop_in" jsonschema:"the drop-in manage_config_apply writes"`
	Mode       string      `json:"mode"`
	Generation uint64      `json:"generation" jsonschema:"1 at start, one more per reload"`
	LoadedAt   string      `json:"loaded_at"`
	Keys       []configKey `json:"keys"`
	// Pending lists keys whose file value differs from the value in force:
	// they take effect at the next restart (sockets, state, upstreams).
	Pending []string `json:"pending_restart,omitempty" jsonschema:"keys changed in the files that take effect only at the next restart"`
}

// configKey is one key in force.
type configKey struct {
	Key        string `json:"key" jsonschema:"table.key as in the file, e.g. gpio.writes"`
	Value      string `json:"value" jsonschema:"its value as JSON text, e.g. true, \"previous\" or [17, 27]; secrets are shown as references (env:NAME, file:/path), never their content"`
	Source     string `json:"source" jsonschema:"the file that sets it, or default"`
	Changeable bool   `json:"changeable" jsonschema:"manage_config_apply may set it; the others only the device's owner can"`
}

// configCandidateIn is a candidate drop-in.
type configCandidateIn struct {
	TOML string `json:"toml" jsonschema:"the whole drop-in (TOML)"`
}

// configValidateOut is manage.config_validate.
type configValidateOut struct {
	Valid    bool               `json:"valid"`
	Errors   []*config.KeyError `json:"errors" jsonschema:"what is wrong, naming the key and the value"`
	WritesOn []string           `json:"writes_on" jsonschema:"the write switches on with the candidate"`
}

// configDiffOut is manage.config_diff and the plan of manage.config_apply.
type configDiffOut struct {
	Changes  []config.KeyChange    `json:"changes" jsonschema:"keys set differently, with the values before and after"`
	Switches []config.SwitchChange `json:"switches" jsonschema:"switches turned on or off in effect"`
	ToolsOn  []string              `json:"tools_on" jsonschema:"tools the change lets run (roles and guards still apply)"`
	ToolsOff []string              `json:"tools_off" jsonschema:"tools the change turns off"`
	// RestartOnly are changed keys a reload does not put in force.
	RestartOnly []string `json:"restart_only,omitempty"`
	DiffHash    string   `json:"diff_hash" jsonschema:"sha256 of the changes; manage_config_apply's expect_diff_hash"`
	Path        string   `json:"path" jsonschema:"the drop-in that would be written"`
}

// configApplyIn is manage.config_apply.
type configApplyIn struct {
	configCandidateIn
	ExpectDiffHash string `json:"expect_diff_hash,omitempty" jsonschema:"manage_config_diff's diff_hash"`
	tool.GuardArgs
}

// configApplyOut is what an apply did.
type configApplyOut struct {
	configDiffOut
	Applied    bool     `json:"applied"`
	DryRun     bool     `json:"dry_run,omitempty"`
	Generation uint64   `json:"generation,omitempty" jsonschema:"the agent's configuration generation after the reload"`
	Health     []string `json:"health,omitempty" jsonschema:"the checks that passed after the reload"`
}

// AuditMessage puts the diff's hash in the apply's audit record.
func (o configApplyOut) AuditMessage() string {
	return "config diff " + o.DiffHash
}

// configTools are manage.config_get, _validate, _diff and _apply: the file
// the configuration is read from, the configuration in force, the helper
// that writes the drop-in, and the agent's reload (the one SIGHUP runs),
// under the agent's lock.
type configTools struct {
	path     string               // the main file; "" = no reloads
	loaded   func() *loadedConfig // the configuration in force and its generation
	mode     string
	helper   *client.Client
	log      *slog.Logger
	tools    *tool.Registry // which tools a change turns on or off
	reloadMu *sync.Mutex    // one reload or config change at a time
	reload   func() error   // reads the files again; the caller holds reloadMu
	// staged points at the agent's healthHook, which tests set after New.
	staged *func(context.Context, *config.Config) error
}

func (a *Agent) registerConfigTools() {
	(&configTools{path: a.cfgPath, loaded: a.cfg.Load, mode: a.mode, helper: a.helper, log: a.log, tools: a.tools,
		reloadMu: &a.reloadMu, reload: a.reloadLocked, staged: &a.healthHook}).register(a.tools)
}

func (ct *configTools) conf() *config.Config { return ct.loaded().cfg }

func (ct *configTools) register(r *tool.Registry) {
	candidate := tool.P("toml", tool.MaxLen(config.MaxDropIn))
	tool.Add(r, tool.Spec[noArgs, configGetOut]{
		ID: "manage.config_get", Title: "Configuration in force",
		Description: "Every configuration key in force: value, source, whether manage_config_apply may change it; secrets as references.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		OutProps:    []tool.Prop{tool.P("loaded_at", tool.Format("date-time"))},
		Run:         func(ctx context.Context, c *tool.Call, _ noArgs) (configGetOut, error) { return ct.configGet() },
		Summary: func(_ noArgs, o configGetOut) string {
			return fmt.Sprintf("%d keys from %s and %d drop-ins (generation %d)", len(o.Keys), o.Path, len(o.DropIns), o.Generation)
		},
	})
	tool.Add(r, tool.Spec[configCandidateIn, configValidateOut]{
		ID: "manage.config_validate", Title: "Check a configuration drop-in",
		Description: "Check a candidate MCP drop-in as `raspi-mcp config check` does; keys that decide who may do what ([roles], [guard]...) are refused.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{candidate},
		Example:     &configCandidateIn{TOML: "[gpio]\nwrites = true\n"},
		Run: func(ctx context.Context, c *tool.Call, in configCandidateIn) (configValidateOut, error) {
			next, err := ct.candidate(in.TOML)
			var ke *config.KeyError
			switch {
			case errors.As(err, &ke) && !ke.Forbidden:
				return configValidateOut{Errors: []*config.KeyError{ke}, WritesOn: []string{}}, nil
			case err != nil:
				return configValidateOut{}, err
			}
			return configValidateOut{Valid: true, Errors: []*config.KeyError{}, WritesOn: orEmpty(next.WritesOn())}, nil
		},
		Summary: func(_ configCandidateIn, o configValidateOut) string {
			if o.Valid {
				return "valid; writes on: " + orNone(strings.Join(o.WritesOn, ", "))
			}
			return "invalid: " + o.Errors[0].Error()
		},
	})
	tool.Add(r, tool.Spec[configCandidateIn, configDiffOut]{
		ID: "manage.config_diff", Title: "What a configuration drop-in would change",
		Description: "What a candidate MCP drop-in would change, key by key, which tools it turns on or off, and a diff_hash for manage_config_apply.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{candidate},
		Example:     &configCandidateIn{TOML: "[gpio]\nwrites = true\n"},
		Run: func(ctx context.Context, c *tool.Call, in configCandidateIn) (configDiffOut, error) {
			d, _, err := ct.configDiff(in.TOML)
			return d, err
		},
		Summary: func(_ configCandidateIn, o configDiffOut) string { return diffLine(o) },
	})
	tool.Add(r, tool.Spec[configApplyIn, configApplyOut]{
		ID: "manage.config_apply", Title: "Apply a configuration drop-in",
		Description: "Write the MCP drop-in, reload and check health; a failure restores the previous one. Widening a power waits for approval on the Pi; keys that decide who may do what are refused.",
		Rule:        tool.Rule{MinRole: identity.RoleAdmin, Risk: tool.RiskCritical},
		Destructive: true,
		Props:       []tool.Prop{candidate, tool.P("expect_diff_hash", tool.MaxLen(71))},
		Example:     &configApplyIn{configCandidateIn: configCandidateIn{TOML: "[gpio]\nwrites = true\n"}},
		Run:         ct.configApply,
		// Whatever [guard] critical says, a change that widens a power
		// is approved on the device: a model must not be able to grant
		// itself powers through its own client.
		NeedsDevice: func(_ context.Context, _ *tool.Call, in configApplyIn) (string, error) {
			next, err := ct.candidate(in.TOML)
			if err != nil {
				return "", err
			}
			if w := config.Widenings(*ct.conf(), next); len(w) > 0 {
				return "it widens what tools may do: " + strings.Join(w, "; "), nil
			}
			return "", nil
		},
		Summary: func(_ configApplyIn, o configApplyOut) string {
			if !o.Applied {
				return "would apply: " + diffLine(o.configDiffOut)
			}
			return fmt.Sprintf("applied (generation %d): %s", o.Generation, diffLine(o.configDiffOut))
		},
	})
}

func diffLine(o configDiffOut) string {
	if len(o.Changes) == 0 {
		return "no change"
	}
	keys := make([]string, len(o.Changes))
	for i, c := range o.Changes {
		keys[i] = c.Key
	}
	return fmt.Sprintf("%d keys (%s); tools on %d, off %d", len(keys), strings.Join(keys, ", "), len(o.ToolsOn), len(o.ToolsOff))
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// noConfigFile is the error of the config tools on an agent started without
// a config file to reload (a test, or an embedding).
func noConfigFile() *tool.Error {
	return tool.Errf(CodeFailedPrecondition, "this agent was started without a configuration file it can reload").
		Hint("on a device the agent runs with --config " + config.DefaultPath)
}

func (ct *configTools) configGet() (configGetOut, error) {
	if ct.path == "" {
		return configGetOut{}, noConfigFile()
	}
	origins, err := config.Origins(ct.path)
	if err != nil {
		return configGetOut{}, tool.Errf(CodeFailedPrecondition, "%v", err).With("path", ct.path)
	}
	drop, err := config.DropIns(ct.path)
	if err != nil {
		return configGetOut{}, err
	}
	l := ct.loaded()
	flat := l.cfg.Flat()
	out := configGetOut{Path: ct.path, DropIns: orEmpty(drop), MCPDropIn: config.MCPDropInPath(ct.path), Mode: ct.mode,
		Generation: l.gen, LoadedAt: l.at.UTC().Format(time.RFC3339), Keys: make([]configKey, 0, len(flat))}
	for k, v := range flat {
		src, ok := origins[k]
		if !ok {
			src = "default"
		}
		out.Keys = append(out.Keys, configKey{Key: k, Value: config.JSONText(v), Source: src, Changeable: config.Changeable(k)})
	}
	sort.Slice(out.Keys, func(i, j int) bool { return out.Keys[i].Key < out.Keys[j].Key })
	if onDisk, err := config.Load(ct.path); err == nil {
		out.Pending = keepOnReload(l.cfg, &onDisk)
	}
	return out, nil
}

// candidate checks a candidate drop-in as Load would read it: a forbidden
// key is permission_denied naming it, anything else wrong a *config.KeyError.
func (ct *configTools) candidate(toml string) (config.Config, error) {
	if ct.path == "" {
		return config.Config{}, noConfigFile()
	}
	next, err := config.CheckCandidate(ct.path, []byte(toml))
	var ke *config.KeyError
	if errors.As(err, &ke) && ke.Forbidden {
		return config.Config{}, tool.Errf(CodePermissionDenied, "%s cannot be changed over MCP: it decides who may do what, and only the device's owner changes it", ke.Key).
			With("key", ke.Key).With("mcp_drop_in", config.MCPDropInPath(ct.path)).
			Hint("leave " + ke.Key + " out of the candidate; ask the owner to change it on the device (raspi-mcp config check FILE checks their edit)")
	}
	return next, err
}

// invalidCandidate is a bad candidate as the diff and apply tools report it.
func invalidCandidate(err error) error {
	var ke *config.KeyError
	if !errors.As(err, &ke) {
		return err
	}
	te := tool.Errf(CodeInvalidArgument, "%s", strings.TrimPrefix(ke.Error(), "config: ")).With("parameter", "toml")
	if ke.Key != "" {
		te.With("key", ke.Key)
	}
	if ke.Value != "" {
		te.With("value", ke.Value)
	}
	return te.Hint("manage_config_validate shows every problem; manage_config_get lists the keys and their current values")
}

// configDiff is the candidate's diff against the configuration in force,
// with the merged configuration it would put in force.
func (ct *configTools) configDiff(toml string) (configDiffOut, config.Config, error) {
	next, err := ct.candidate(toml)
	if err != nil {
		return configDiffOut{}, config.Config{}, invalidCandidate(err)
	}
	cur := ct.conf()
	inForce := next
	restart := keepOnReload(cur, &inForce)
	changes, switches := config.Diff(*cur, inForce)
	on, off := ct.toolsTurned(cur, &inForce)
	return configDiffOut{Changes: orEmptyChanges(changes), Switches: orEmptySwitches(switches), ToolsOn: on, ToolsOff: off,
		RestartOnly: restart, DiffHash: config.DiffHash(changes), Path: config.MCPDropInPath(ct.path)}, next, nil
}

func orEmptyChanges(c []config.KeyChange) []config.KeyChange {
	if c == nil {
		return []config.KeyChange{}
	}
	return c
}

func orEmptySwitches(s []config.SwitchChange) []config.SwitchChange {
	if s == nil {
		return []config.SwitchChange{}
	}
	return s
}

// toolsTurned names the local tools whose switches let them run under one
// config and not the other (wire names, sorted).
func (ct *configTools) toolsTurned(old, next *config.Config) (on, off []string) {
	on, off = []string{}, []string{}
	for _, t := range ct.tools.All() {
		if t.LAN() {
			continue
		}
		was, is := switchedOn(old, t.Rule()), switchedOn(next, t.Rule())
		switch {
		case !was && is:
			on = append(on, t.Name())
		case was && !is:
			off = append(off, t.Name())
		}
	}
	slices.Sort(on)
	slices.Sort(off)
	return on, off
}

// switchedOn reports whether the config's switches let a tool with rule r
// run: its namespace and its write switch.
func switchedOn(c *config.Config, r tool.Rule) bool {
	on, _ := tool.DomainEnabled(c, r.Domain)
	return on && r.Gate.Effective(c)
}

func (ct *configTools) configApply(ctx context.Context, c *tool.Call, in configApplyIn) (configApplyOut, error) {
	ct.reloadMu.Lock()
	defer ct.reloadMu.Unlock()
	d, _, err := ct.configDiff(in.TOML)
	if err != nil {
		return configApplyOut{}, err
	}
	if in.ExpectDiffHash != "" && in.ExpectDiffHash != d.DiffHash {
		return configApplyOut{}, tool.Errf(CodeFailedPrecondition, "the configuration changed since the diff: this candidate would now make a different change").
			With("expect_diff_hash", in.ExpectDiffHash).With("diff_hash", d.DiffHash).With("changes", d.Changes).
			Hint("call manage_config_diff again, show the person the new changes, and apply with its diff_hash")
	}
	out := configApplyOut{configDiffOut: d}
	if c.DryRun {
		out.DryRun = true
		return out, nil
	}
	res, err := client.Call(ctx, ct.helper, proto.ConfigApply, proto.ConfigApplyReq{TOML: in.TOML, DiffHash: d.DiffHash})
	if err != nil {
		return configApplyOut{}, err // the helper has put the previous drop-in back if it wrote one
	}
	ct.log.Info("config drop-in written by the helper", "path", res.Path, "diff_hash", d.DiffHash, "helper_generation", res.Generation)
	health, herr := ct.configHealth(ctx)
	if herr != nil {
		return configApplyOut{}, ct.rollBack(ctx, d, herr)
	}
	gen := ct.loaded().gen
	out.Applied, out.Generation, out.Health = true, gen, health
	return out, nil
}

// configHealth reloads the agent from the files the helper wrote and checks
// that what is now in force is sound: the file loads, the helper answers
// under its new rules, and (in tests) the staged check passes.
func (ct *configTools) configHealth(ctx context.Context) ([]string, error) {
	if err := ct.reload(); err != nil {
		return nil, fmt.Errorf("the agent could not load the new configuration: %w", err)
	}
	passed := []string{"agent reloaded"}
	if _, err := client.Call(ctx, ct.helper, proto.Status, proto.StatusReq{}); err != nil {
		return nil, fmt.Errorf("the root helper does not answer after the reload: %w", err)
	}
	passed = append(passed, "helper answers")
	if hook := *ct.staged; hook != nil {
		if err := hook(ctx, ct.conf()); err != nil {
			return nil, err
		}
		passed = append(passed, "staged check")
	}
	return passed, nil
}

// rollBack has the helper put the previous drop-in back, reloads, and
// returns the error that says why and that it happened.
func (ct *configTools) rollBack(ctx context.Context, d configDiffOut, why error) error {
	ct.log.Warn("config apply failed its health check; rolling back", "diff_hash", d.DiffHash, "err", why)
	te := tool.Errf(CodeFailedPrecondition, "the new configuration failed its health check and was rolled back: %v", why).
		With("diff_hash", d.DiffHash).With("rolled_back", true)
	if _, err := client.Call(ctx, ct.helper, proto.ConfigRestore, proto.ConfigRestoreReq{}); err != nil {
		ct.log.Error("config roll back: the helper could not put the previous drop-in back", "err", err)
		return tool.Errf(CodeInternal, "the new configuration failed its health check (%v) and the root helper could not put the previous drop-in back: %v", why, err).
			With("diff_hash", d.DiffHash).With("rolled_back", false).
			Hint("on the device: check " + d.Path + " and its " + config.PrevSuffix + " copy, then `systemctl reload raspi-mcp`")
	}
	if err := ct.reload(); err != nil {
		ct.log.Error("config roll back: the previous configuration does not load", "err", err)
	}
	return te.Hint("manage_config_get shows the configuration in force; fix the candidate and try again")
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// writeConfig writes cfg as dir/config.toml, as `serve --sim` does, so the
// agent and the helper can reload it and the config tools have files.
func writeConfig(t testing.TB, dir string, cfg config.Config) string {
	t.Helper()
	data, err := cfg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// gpioWritesOff is laptop mode with [gpio] writes off, the switch the
// apply tests turn on and off again.
func gpioWritesOff(c *config.Config) { c.GPIO.Writes = false }

const gpioWritesOnTOML = "[gpio]\nwrites = true\n"

func mcpDropIn(r *rig) string { return config.MCPDropInPath(filepath.Join(r.dir, "config.toml")) }

func TestConfigGetShowsSources(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	if err := os.MkdirAll(filepath.Dir(mcpDropIn(r)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(mcpDropIn(r)), "10-local.toml"), []byte("[metrics]\nmax_jobs = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, e := callAs[configGetOut](t, r, reader, "manage_config_get", nil)
	if e != nil {
		t.Fatal(e)
	}
	keys := map[string]configKey{}
	for _, k := range out.Keys {
		keys[k.Key] = k
	}
	main := filepath.Join(r.dir, "config.toml")
	if k := keys["gpio.writes"]; k.Value != "false" || k.Source != main || !k.Changeable {
		t.Errorf("gpio.writes = %+v", k)
	}
	if k := keys["roles.users"]; k.Changeable {
		t.Errorf("roles.users = %+v, shown as changeable", k)
	}
	// The drop-in is on disk but not in force until a reload: the value
	// shown is the one in force, the key pending.
	if k := keys["metrics.max_jobs"]; k.Value != "8" || out.Generation != 1 || len(out.DropIns) != 1 {
		t.Errorf("before reload: max_jobs %+v, generation %d, drop-ins %v", k, out.Generation, out.DropIns)
	}
	if err := r.a.Reload(); err != nil {
		t.Fatal(err)
	}
	out, _ = callAs[configGetOut](t, r, reader, "manage_config_get", nil)
	for _, k := range out.Keys {
		if k.Key == "metrics.max_jobs" && (k.Value != "3" || !strings.HasSuffix(k.Source, "10-local.toml")) {
			t.Errorf("after reload: %+v", k)
		}
	}
	if out.Generation != 2 {
		t.Errorf("generation = %d, want 2", out.Generation)
	}
}

func TestConfigValidate(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	out, e := callAs[configValidateOut](t, r, reader, "manage_config_validate", map[string]any{"toml": gpioWritesOnTOML})
	if e != nil || !out.Valid || !strings.Contains(strings.Join(out.WritesOn, ","), "[gpio] writes") {
		t.Fatalf("valid candidate: %+v %+v", out, e)
	}
	for name, tc := range map[string]struct{ toml, key, reason string }{
		"bad value": {"[gpio]\nrevert = \"sideways\"\n", "gpio.revert", "previous or inverse"},
		"bad type":  {"[gpio]\nwrites = 1\n", "gpio.writes", "want true or false, got the number 1"},
		"bad toml":  {"[gpio\n", "", "not TOML"},
	} {
		out, e := callAs[configValidateOut](t, r, reader, "manage_config_validate", map[string]any{"toml": tc.toml})
		if e != nil || out.Valid || len(out.Errors) != 1 || out.Errors[0].Key != tc.key || !strings.Contains(out.Errors[0].Reason, tc.reason) {
			t.Errorf("%s: %+v %+v", name, out, e)
		}
	}
	for _, tc := range []struct{ toml, key string }{
		{"[roles]\nusers = { mallory = \"admin\" }\n", "roles.users"},
		{"[guard]\nelicitation = \"off\"\n", "guard.elicitation"},
		{"[http]\ntokens = \"/tmp/t\"\n", "http.tokens"},
		{"[gpio]\nwritez = true\n", "gpio.writez"}, // unknown: not on the allow-list either
	} {
		_, e := callAs[configValidateOut](t, r, reader, "manage_config_validate", map[string]any{"toml": tc.toml})
		wantErr(t, e, CodePermissionDenied, map[string]any{"key": tc.key, "mcp_drop_in": mcpDropIn(r)})
	}
}

func TestConfigDiff(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	out, e := callAs[configDiffOut](t, r, reader, "manage_config_diff", map[string]any{"toml": gpioWritesOnTOML})
	if e != nil {
		t.Fatal(e)
	}
	if len(out.Changes) != 1 || out.Changes[0].Key != "gpio.writes" || out.Changes[0].From != "false" || out.Changes[0].To != "true" {
		t.Errorf("changes = %+v", out.Changes)
	}
	if len(out.Switches) != 1 || out.Switches[0] != (config.SwitchChange{Key: "[gpio] writes", On: true}) {
		t.Errorf("switches = %+v", out.Switches)
	}
	if !strings.Contains(strings.Join(out.ToolsOn, ","), "gpio_write_pin") || len(out.ToolsOff) != 0 {
		t.Errorf("tools on %v off %v", out.ToolsOn, out.ToolsOff)
	}
	_, e = callAs[configDiffOut](t, r, reader, "manage_config_diff", map[string]any{"toml": "[manage]\nupdates = true\n"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"key": "manage.updates", "mcp_drop_in": mcpDropIn(r)})
	_, e = callAs[configDiffOut](t, r, reader, "manage_config_diff", map[string]any{"toml": "[gpio]\nmax = 1\n"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"key": "gpio.max", "mcp_drop_in": mcpDropIn(r)})
	_, e = callAs[configDiffOut](t, r, reader, "manage_config_diff", map[string]any{"toml": "[gpio]\nrevert = \"up\"\n"})
	wantErr(t, e, CodeInvalidArgument, map[string]any{"key": "gpio.revert", "value": `"up"`, "parameter": "toml"})
	if _, err := os.Stat(mcpDropIn(r)); err == nil {
		t.Error("a diff wrote the drop-in")
	}
}

// apply commits manage_config_apply of toml through a change token, and
// approves it on the device when it widens a power.
func apply(t *testing.T, r *rig, toml string) (configApplyOut, *tool.Error) {
	t.Helper()
	defer deviceAnswers(t, r, true)()
	tok := prepare(t, r, admin, "manage_config_apply", map[string]any{"toml": toml})
	out, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": tok.Token})
	if e != nil {
		return configApplyOut{}, e
	}
	var res configApplyOut
	strictDecode(t, "commit result", json.RawMessage(mustJSON(t, out.Result)), &res)
	return res, nil
}

func TestConfigApplyTurnsAWriteSwitchOnAndOff(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	write := map[string]any{"pin": 17, "value": "high"}
	if _, e := callAs[map[string]any](t, r, admin, "gpio_write_pin", write); e == nil || e.Code != CodePermissionDenied {
		t.Fatalf("write with [gpio] writes off: %+v", e)
	}
	// Denials: declined on the device (a widening goes there even without
	// a token), a reader, an operator, a forbidden key.
	stop := deviceAnswers(t, r, false)
	_, e := callAs[configApplyOut](t, r, admin, "manage_config_apply", map[string]any{"toml": gpioWritesOnTOML, "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "manage.config_apply", "channel": "console:root", "approval_id": "1"})
	if n := stop(); n != 1 {
		t.Fatalf("%d calls came to the device, want 1", n)
	}
	if _, err := os.Stat(mcpDropIn(r)); err == nil {
		t.Fatal("a declined apply wrote the drop-in")
	}
	for _, p := range []Principal{reader, operator} {
		_, e := callAs[changePrepareOut](t, r, p, "change_prepare", map[string]any{"tool": "manage_config_apply", "arguments": map[string]any{"toml": gpioWritesOnTOML}})
		wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "manage.config_apply", "required_role": "admin", "role": p.Role.String()})
	}
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_config_apply",
		"arguments": map[string]any{"toml": "[guard]\nelicitation = \"off\"\n"}})
	wantErr(t, e, CodePermissionDenied, map[string]any{"key": "guard.elicitation", "mcp_drop_in": mcpDropIn(r)})
	// A dry run plans and writes nothing.
	dry, e := callAs[configApplyOut](t, r, admin, "manage_config_apply", map[string]any{"toml": gpioWritesOnTOML, "dry_run": true})
	if e != nil || dry.Applied || !dry.DryRun || len(dry.Changes) != 1 {
		t.Fatalf("dry run: %+v %+v", dry, e)
	}
	if _, err := os.Stat(mcpDropIn(r)); err == nil {
		t.Fatal("a dry run wrote the drop-in")
	}
	// A stale diff hash is refused.
	_, e = callAs[changePrepareOut](t, r, admin, "change_prepare", map[string]any{"tool": "manage_config_apply",
		"arguments": map[string]any{"toml": gpioWritesOnTOML, "expect_diff_hash": config.DiffHash(nil)}})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"diff_hash": dry.DiffHash, "expect_diff_hash": config.DiffHash(nil),
		"changes": []any{map[string]any{"key": "gpio.writes", "from": "false", "to": "true"}}})

	// The live session's next call sees the switch: no reconnect.
	s := r.session(t, admin)
	on, e := apply(t, r, gpioWritesOnTOML)
	if e != nil || !on.Applied || on.Generation != 2 || on.DiffHash != dry.DiffHash {
		t.Fatalf("apply: %+v %+v", on, e)
	}
	if st, err := os.Stat(mcpDropIn(r)); err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("drop-in: %v %v", st, err)
	}
	if res, _ := r.asSession(s, "gpio_write_pin", write); res.IsError {
		t.Fatalf("write after apply: %+v", res.Content)
	}
	recs, _, _ := r.a.store.QueryAudit(storeQuery(4))
	audited := false
	for _, rec := range recs {
		audited = audited || rec.Tool == "manage.config_apply" && !rec.DryRun && rec.Message == "config diff "+on.DiffHash
	}
	if !audited {
		t.Errorf("no audit record of the apply with its diff hash: %+v", recs)
	}
	// And off again: an empty drop-in leaves the main file's value.
	off, e := apply(t, r, "")
	if e != nil || !off.Applied || len(off.Switches) != 1 || off.Switches[0].On {
		t.Fatalf("apply off: %+v %+v", off, e)
	}
	if res, sc := r.asSession(s, "gpio_write_pin", write); !res.IsError || !strings.Contains(sc["error"].(map[string]any)["message"].(string), "writes") {
		t.Fatalf("write after switching off: %v", sc)
	}
	// The helper refuses on its own too (its reload followed the file).
	if _, err := callHelperWrite(r, 17, 1); err == nil {
		t.Fatal("the helper still allows writes")
	}
}

func TestConfigApplyRollsBackAFailedHealthCheck(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	if _, e := apply(t, r, "[metrics]\nmax_jobs = 5\n"); e != nil {
		t.Fatal(e)
	}
	before, _ := os.ReadFile(mcpDropIn(r))
	// Pin 40 is a valid BCM number, but the simulated board has 28 lines:
	// the helper cannot put it into its safe state, and refuses the reload.
	_, e := apply(t, r, "[gpio]\nwrites = true\npins = [ { pin = 40, mode = \"output\", value = 0 } ]\n")
	if e == nil || e.Code != CodeFailedPrecondition || !strings.Contains(e.Message, "previous drop-in is back") {
		t.Fatalf("broken helper reload: %+v", e)
	}
	if after, _ := os.ReadFile(mcpDropIn(r)); string(after) != string(before) {
		t.Fatalf("drop-in after the roll back = %q, want %q", after, before)
	}
	if r.a.conf().GPIO.Writes || r.a.conf().Metrics.MaxJobs != 5 {
		t.Fatalf("agent config after the roll back: writes %v max_jobs %d", r.a.conf().GPIO.Writes, r.a.conf().Metrics.MaxJobs)
	}
	// A check after both reloads fails: the agent puts everything back.
	r.a.healthHook = func(_ context.Context, c *config.Config) error {
		if c.GPIO.Writes {
			return errors.New("staged: the relay's load draws too much")
		}
		return nil
	}
	_, e = apply(t, r, gpioWritesOnTOML)
	if e == nil || e.Code != CodeFailedPrecondition || e.Details["rolled_back"] != true || !strings.Contains(e.Message, "staged") {
		t.Fatalf("failed health check: %+v", e)
	}
	if after, _ := os.ReadFile(mcpDropIn(r)); string(after) != string(before) {
		t.Fatalf("drop-in after the roll back = %q, want %q", after, before)
	}
	if r.a.conf().GPIO.Writes {
		t.Fatal("agent kept [gpio] writes on after the roll back")
	}
	if _, err := callHelperWrite(r, 17, 1); err == nil {
		t.Fatal("the helper kept [gpio] writes on after the roll back")
	}
}

func TestReloadKeepsTheConfigOnABadFile(t *testing.T) {
	r := newRig(t, gpioWritesOff)
	main := filepath.Join(r.dir, "config.toml")
	good, _ := os.ReadFile(main)
	if err := os.WriteFile(main, append(good, []byte("\n[gpio]\nbogus = 1\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.a.Reload(); err == nil {
		t.Fatal("a bad file reloaded")
	}
	if g, _ := r.a.configGeneration(); g != 1 {
		t.Fatalf("generation %d after a failed reload", g)
	}
	// Sockets and the state file are the running agent's until a restart.
	cfg := *r.cfg
	cfg.Agent.State = filepath.Join(r.dir, "elsewhere.db")
	cfg.GPIO.Writes = true
	writeConfig(t, r.dir, cfg)
	if err := r.a.Reload(); err != nil {
		t.Fatal(err)
	}
	if c := r.a.conf(); c.Agent.State != r.cfg.Agent.State || !c.GPIO.Writes {
		t.Fatalf("after reload: state %s, writes %v", c.Agent.State, c.GPIO.Writes)
	}
	kept := false
	for _, e := range r.appLog.Entries(slog.LevelWarn, "agent", 100) {
		kept = kept || strings.Contains(e.Message, "take effect at the next restart") && strings.Contains(e.Attrs, "agent.state")
	}
	if !kept {
		t.Error("the kept keys were not logged")
	}
}

// callHelperWrite asks the helper directly, bypassing the agent's policy.
func callHelperWrite(r *rig, pin, value int) (any, error) {
	return client.Call(context.Background(), r.helper, proto.GPIOWrite, proto.GPIOWriteReq{Pin: pin, Value: value})
}

// BenchmarkConfigApply is one manage_config_apply through change_prepare
// and change_commit on the simulated board: check, diff, the helper's
// atomic write and reload, the agent's reload and the health check. Each
// iteration turns [gpio] writes the other way.
func BenchmarkConfigApply(b *testing.B) {
	r := newRig(b, gpioWritesOff)
	for i := range b.N {
		args := map[string]any{"toml": []string{gpioWritesOnTOML, ""}[i%2]}
		tok, e := callAs[changePrepareOut](b, r, admin, "change_prepare", map[string]any{"tool": "manage_config_apply", "arguments": args})
		if e != nil {
			b.Fatal(e)
		}
		if _, e := callAs[changeCommitOut](b, r, admin, "change_commit", map[string]any{"token": tok.Token}); e != nil {
			b.Fatal(e)
		}
	}
}

// BenchmarkConfigRollBack is the helper's side of a change it cannot put
// in force: write, a refused reload (a pin the board lacks), the previous
// file back.
func BenchmarkConfigRollBack(b *testing.B) {
	r := newRig(b, gpioWritesOff)
	req := proto.ConfigApplyReq{TOML: "[gpio]\npins = [ { pin = 40, mode = \"output\" } ]\n", DiffHash: config.DiffHash(nil)}
	for range b.N {
		if _, err := client.Call(context.Background(), r.helper, proto.ConfigApply, req); proto.CodeOf(err) != proto.CodeFailedPrecondition {
			b.Fatal(err)
		}
	}
}

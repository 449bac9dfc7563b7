package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// errCase is one error path: a call that must fail, and whether a next
// call exists for it.
type errCase struct {
	kind     string
	tool     string
	p        Principal
	args     map[string]any
	wantNext bool
}

// argsOf is one accepted call of t, only its required parameters plus what
// a call needs to get past the schema: its spec's Example, or no arguments
// for a tool without one (TestEveryToolHasAnExample: which then has no
// required parameters). The error walk starts from it and breaks one thing
// at a time. A fresh map each time.
func argsOf(t *tool.Tool) map[string]any {
	args := map[string]any{}
	if t.Example() != nil {
		if err := json.Unmarshal(t.Example(), &args); err != nil {
			panic(fmt.Sprintf("%s: example %s: %v", t.Name(), t.Example(), err))
		}
	}
	return args
}

// Every local tool with required parameters has an Example in its spec,
// and every example is an accepted call on the laptop config: its input
// schema takes it, policy lets an admin dry-run it, the call is not refused
// for its arguments, and it leaves the guard arguments to the caller (the
// walk breaks those itself). A tool added without one fails here, naming
// the file of its spec.
func TestEveryToolHasAnExample(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Process.AllowedSignals = []string{"TERM", "HUP"} })
	examples := 0
	for _, tl := range r.a.tools.All() {
		if tl.LAN() {
			continue
		}
		req := tl.Input().Tree.Required
		if tl.Example() == nil {
			if len(req) > 0 {
				t.Errorf("%s has required parameters %v but no example: add Example to its Spec (ID %q) in %s", tl.Name(), req, tl.ID(), specFile(t, tl.ID()))
			}
			continue
		}
		examples++
		if _, err := tl.Check(tl.Example()); err != nil {
			t.Errorf("%s: its Example %s is refused by its own schema: %s (Spec in %s)", tl.Name(), tl.Example(), err.Message, specFile(t, tl.ID()))
			continue
		}
		args := argsOf(tl)
		for _, g := range []string{"dry_run", "confirm", "reason", "intent"} {
			if _, ok := args[g]; ok {
				t.Errorf("%s: its Example sets the guard argument %s, which the error walk breaks itself (Spec in %s)", tl.Name(), g, specFile(t, tl.ID()))
			}
		}
		if derr := tool.Decide(r.cfg, admin, tl.Rule(), tool.Guard{DryRun: true}, false); derr != nil {
			t.Errorf("%s: the laptop config refuses its Example: %s", tl.Name(), derr.Message)
			continue
		}
		if _, ok := tl.Input().Tree.Properties["dry_run"]; ok {
			args["dry_run"] = true
		}
		res, sc := r.as(admin, tl.Name(), args)
		if code := errCode(res, sc); code == CodeInvalidArgument || code == CodePermissionDenied || code == CodeInternal {
			t.Errorf("%s: its Example %v fails with %s: %v (Spec in %s)", tl.Name(), args, code, sc["error"], specFile(t, tl.ID()))
		}
	}
	if examples < 20 {
		t.Errorf("only %d tools have an example", examples)
	}
}

// specFile is the file of the package that registers the tool id.
func specFile(t *testing.T, id string) string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(strconv.Quote(id))) {
			return "agent/" + f
		}
	}
	return "agent/<namespace>.go"
}

func with(args map[string]any, k string, v any) map[string]any {
	a := maps.Clone(args)
	a[k] = v
	return a
}

// wrongType is a value of another type than s wants, one whose intent is
// plain ("7" for 7), so a corrected call exists.
func wrongType(typ string, itemType string) (any, bool) {
	switch typ {
	case "integer", "number":
		return "7", true
	case "string":
		return 7, true
	case "boolean":
		return "true", true
	case "array":
		if itemType == "integer" || itemType == "number" {
			return 7, true
		}
		return "x", true
	case "object":
		return "x", false
	}
	return nil, false
}

// schemaCases are the schema errors every tool can produce, derived from
// its own inputSchema: unknown parameter, and per parameter a wrong type,
// a value below the minimum and above the maximum, one too long, one
// outside the enum, and each required one left out.
func schemaCases(t *testing.T, tools []*tool.Tool) []errCase {
	var cases []errCase
	for _, tl := range tools {
		base := argsOf(tl)
		cases = append(cases, errCase{kind: "unknown parameter", tool: tl.Name(), p: admin, args: with(base, "no_such_parameter", 1), wantNext: true})
		names := slices.Sorted(maps.Keys(tl.Input().Tree.Properties))
		for _, k := range names {
			ps := tl.Input().Tree.Properties[k]
			required := slices.Contains(tl.Input().Tree.Required, k)
			item := ""
			if ps.Items != nil {
				item = tool.SchemaType(ps.Items)
			}
			if v, plain := wrongType(tool.SchemaType(ps), item); v != nil {
				cases = append(cases, errCase{kind: "bad type", tool: tl.Name(), p: admin, args: with(base, k, v), wantNext: plain || !required})
			}
			if ps.Minimum != nil {
				cases = append(cases, errCase{kind: "below minimum", tool: tl.Name(), p: admin, args: with(base, k, *ps.Minimum-1), wantNext: true})
			}
			if ps.Maximum != nil {
				cases = append(cases, errCase{kind: "above maximum", tool: tl.Name(), p: admin, args: with(base, k, *ps.Maximum+1), wantNext: true})
			}
			if ps.MaxLength != nil {
				cases = append(cases, errCase{kind: "too long", tool: tl.Name(), p: admin, args: with(base, k, strings.Repeat("x", *ps.MaxLength+1)), wantNext: true})
			}
			if len(ps.Enum) > 0 {
				var bad any = "no-such-value"
				if tool.SchemaType(ps) == "integer" || tool.SchemaType(ps) == "number" {
					bad = 12345
				}
				cases = append(cases, errCase{kind: "bad enum", tool: tl.Name(), p: admin, args: with(base, k, bad), wantNext: true})
			}
			if required {
				a := maps.Clone(base)
				delete(a, k)
				_, hasDefault := tool.DefaultValue(ps)
				cases = append(cases, errCase{kind: "missing required", tool: tl.Name(), p: admin, args: a, wantNext: hasDefault})
			}
		}
	}
	return cases
}

// policyCases are the refusals of the policy, for every tool they apply to.
func policyCases(tools []*tool.Tool) []errCase {
	var cases []errCase
	for _, tl := range tools {
		base := argsOf(tl)
		cases = append(cases, errCase{kind: "no role", tool: tl.Name(), p: Principal{Name: "nobody", UID: 65534, Role: RoleNone}, args: base})
		if tl.Rule().MinRole > RoleRead {
			cases = append(cases, errCase{kind: "role too low", tool: tl.Name(), p: Principal{Name: "bob", UID: 1001, Role: RoleRead}, args: base, wantNext: true})
		}
		switch tl.Rule().Risk {
		case tool.RiskHigh:
			cases = append(cases, errCase{kind: "missing confirm", tool: tl.Name(), p: admin, args: with(base, "reason", "test"), wantNext: true})
			cases = append(cases, errCase{kind: "missing reason", tool: tl.Name(), p: admin, args: with(base, "confirm", true), wantNext: true})
		case tool.RiskCritical:
			cases = append(cases, errCase{kind: "missing change token", tool: tl.Name(), p: admin, args: with(with(base, "confirm", true), "reason", "test"), wantNext: true})
		}
	}
	return cases
}

// specificCases are the errors handlers find past the schema and the
// policy: names that do not exist, allowlists, device state.
func specificCases() []errCase {
	guard := func(a map[string]any) map[string]any { return with(with(a, "confirm", true), "reason", "error walk") }
	return []errCase{
		{kind: "not found", tool: "service_get_status", p: admin, args: map[string]any{"service_name": "no-such.service"}, wantNext: true},
		{kind: "not found", tool: "service_validate_unit_file", p: admin, args: map[string]any{"service_name": "no-such.service"}, wantNext: true},
		{kind: "not found", tool: "process_get_process_details", p: admin, args: map[string]any{"pid": 4194000}, wantNext: true},
		{kind: "not found", tool: "process_send_signal", p: admin, args: guard(map[string]any{"pid": 4194000, "signal": "TERM"}), wantNext: true},
		{kind: "not found", tool: "manage_cancel_job", p: admin, args: map[string]any{"job_id": "job-nope"}, wantNext: true},
		{kind: "not found", tool: "metrics_stop_sampling_job", p: admin, args: map[string]any{"job_id": "job-nope"}, wantNext: true},
		{kind: "not found", tool: "metrics_get_samples", p: admin, args: map[string]any{"job_id": "job-nope"}, wantNext: true},
		{kind: "not found", tool: "metrics_get_summary", p: admin, args: map[string]any{"job_id": "job-nope"}, wantNext: true},
		{kind: "not found", tool: "sensors_read", p: admin, args: map[string]any{"name": "no-such-sensor"}, wantNext: true},
		{kind: "not found", tool: "change_commit", p: admin, args: map[string]any{"token": "tok-does-not-exist"}, wantNext: true},
		{kind: "not found", tool: "change_prepare", p: admin, args: map[string]any{"tool": "no_such_tool"}, wantNext: true},
		{kind: "unknown metric", tool: "metrics_query_history", p: admin, args: map[string]any{"metric_names": []any{"no_such_metric"}}, wantNext: true},
		{kind: "bad argument of the prepared call", tool: "change_prepare", p: admin, args: map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"delay_seconds": 9999}}, wantNext: true},
		{kind: "read-only tool prepared", tool: "change_prepare", p: admin, args: map[string]any{"tool": "system_get_health_snapshot"}, wantNext: true},
		{kind: "denied by allowlist", tool: "gpio_write_pin", p: admin, args: map[string]any{"pin": 5, "value": "high"}, wantNext: true},
		{kind: "denied by allowlist", tool: "gpio_read_pin", p: admin, args: map[string]any{"pin": 5}, wantNext: true},
		{kind: "denied by allowlist", tool: "gpio_set_pwm", p: admin, args: map[string]any{"pin": 17, "frequency_hz": 1000, "duty_cycle_percent": 50}, wantNext: true},
		{kind: "denied by allowlist", tool: "i2c_write", p: admin, args: guard(map[string]any{"bus": 1, "address": 0x50, "data": []any{1}}), wantNext: true},
		{kind: "denied by allowlist", tool: "service_control_service", p: admin, args: guard(map[string]any{"service_name": "ssh.service", "action": "restart"}), wantNext: true},
		{kind: "denied by allowlist", tool: "process_send_signal", p: admin, args: guard(map[string]any{"pid": os.Getpid(), "signal": "TERM"}), wantNext: true},
		{kind: "denied by allowlist", tool: "logs_query_journal", p: admin, args: map[string]any{"unit": "ssh.service"}, wantNext: true},
		{kind: "not an output", tool: "gpio_write_pin", p: admin, args: map[string]any{"pin": 4, "value": "high"}, wantNext: true},
		{kind: "not an output (dry run)", tool: "gpio_write_pin", p: admin, args: map[string]any{"pin": 4, "value": "high", "dry_run": true}, wantNext: true},
		{kind: "bad time", tool: "logs_query_journal", p: admin, args: map[string]any{"since": "yesterday-ish"}, wantNext: false},
		{kind: "bad window", tool: "metrics_get_summary", p: admin, args: map[string]any{"window": "forever"}, wantNext: false},
	}
}

// checkActionable asserts the two fields a model acts on, and that every
// suggested call names a tool that exists and, when it is a corrected call
// of the same tool, passes that tool's schema.
func checkActionable(t *testing.T, r *rig, c errCase) (code string) {
	t.Helper()
	res, sc := r.as(c.p, c.tool, c.args)
	if !res.IsError {
		t.Errorf("%s %s %v: succeeded, want an error", c.tool, c.kind, c.args)
		return ""
	}
	var e tool.Error
	b, _ := json.Marshal(sc["error"])
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(e.FixHint) == "" {
		t.Errorf("%s %s %v: %s %q has no fix_hint", c.tool, c.kind, c.args, e.Code, e.Message)
	}
	if c.wantNext && len(e.Next) == 0 {
		t.Errorf("%s %s %v: %s %q has no suggested_next_tool_calls", c.tool, c.kind, c.args, e.Code, e.Message)
	}
	for _, n := range e.Next {
		nt, ok := r.a.tools.Lookup(n.Tool)
		if !ok {
			t.Errorf("%s %s: suggests %s, which does not exist", c.tool, c.kind, n.Tool)
			continue
		}
		if derr := tool.Decide(r.cfg, c.p, nt.Rule(), tool.Guard{DryRun: true}, false); derr != nil {
			t.Errorf("%s %s: suggests %s, which the caller would be refused: %s", c.tool, c.kind, n.Tool, derr.Message)
		}
		raw, _ := json.Marshal(n.Arguments)
		if _, verr := nt.Check(raw); verr != nil && nt.Name() == c.tool {
			t.Errorf("%s %s %v: the suggested %v is refused too: %s", c.tool, c.kind, c.args, n.Arguments, verr.Message)
		}
	}
	return e.Code
}

// Every error path a model can reach carries a fix_hint, and a suggested
// next call wherever one exists: the schema errors of every parameter of
// every tool, every policy refusal of every tool, the handlers' own
// errors, and every tool with the root helper gone.
func TestEveryErrorIsActionable(t *testing.T) {
	r := newRig(t, func(c *config.Config) {
		c.Logs.JournalUnits = []string{"nginx.service"}
		c.Process.AllowedSignals = []string{"TERM", "HUP"}
	})
	tools := r.a.tools.All()
	for _, tl := range tools {
		if len(tl.Input().Tree.Required) > 0 && tl.Example() == nil {
			t.Errorf("%s has required parameters %v but no Example in its Spec (%s): the walk cannot start from an accepted call", tl.Name(), tl.Input().Tree.Required, specFile(t, tl.ID()))
		}
	}
	kinds := map[string]int{}
	count := func(c errCase, code string) {
		if code != "" {
			kinds[c.kind]++
		}
	}
	for _, c := range schemaCases(t, tools) {
		if code := checkActionable(t, r, c); code != CodeInvalidArgument && code != "" {
			t.Errorf("%s %s: code %s, want invalid_argument", c.tool, c.kind, code)
		} else {
			count(c, code)
		}
	}
	for _, c := range append(policyCases(tools), specificCases()...) {
		count(c, checkActionable(t, r, c))
	}

	// Namespaces off and writes off: every tool under a switch.
	off := newRig(t, func(c *config.Config) {
		for _, s := range config.Switches() {
			if s.Within().Valid() { // a write switch under a namespace's
				s.Set(c, false)
			}
		}
	})
	for _, tl := range off.a.tools.All() {
		if tl.Rule().Gate != config.NoSwitch {
			c := errCase{kind: "writes off", tool: tl.Name(), p: admin, args: with(with(argsOf(tl), "confirm", true), "reason", "walk"), wantNext: true}
			count(c, checkActionable(t, off, c))
		}
	}
	domains := map[string]bool{}
	for _, tl := range tools {
		if on, key := tool.DomainEnabled(r.cfg, tl.Rule().Domain); on && key != "" {
			domains[tl.Rule().Domain] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(domains)) {
		dr := newRig(t, func(c *config.Config) { disableDomain(c, d) })
		for _, tl := range dr.a.tools.All() {
			if tl.Rule().Domain == d {
				// With system off, system_get_capabilities is off too: nothing to suggest.
				c := errCase{kind: "namespace off", tool: tl.Name(), p: admin, args: argsOf(tl), wantNext: d != "system"}
				count(c, checkActionable(t, dr, c))
			}
		}
	}

	// The root helper gone: every tool that needs it answers unavailable,
	// with the retry and the status call. Mutating tools run as dry runs.
	r.killHelper()
	unavailable := 0
	for _, tl := range tools {
		args := argsOf(tl)
		if tl.Mutating() {
			args["dry_run"] = true
		}
		res, sc := r.as(admin, tl.Name(), args)
		if errCode(res, sc) != CodeUnavailable {
			continue
		}
		unavailable++
		count(errCase{kind: "helper unavailable"}, checkActionable(t, r, errCase{kind: "helper unavailable", tool: tl.Name(), p: admin, args: args, wantNext: true}))
	}
	if unavailable < 5 {
		t.Errorf("only %d tools answered unavailable with the helper gone", unavailable)
	}
	total := 0
	var lines []string
	for k, n := range kinds {
		total += n
		lines = append(lines, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(lines)
	t.Logf("%d error paths over %d tools: %s", total, len(tools), strings.Join(lines, ", "))
}

func disableDomain(c *config.Config, d string) {
	s, _ := config.NamespaceSwitch(d)
	s.Set(c, false)
}

// SIGTERM and TERM name the same signal; the result and the audit say TERM.
func TestSignalTakesSIGPrefix(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Process.AllowedSignals = []string{"TERM"} })
	for _, name := range []string{"TERM", "SIGTERM"} {
		res, sc := r.as(admin, "process_send_signal", map[string]any{"pid": os.Getpid(), "signal": name, "dry_run": true})
		// raspi-mcp itself is never signalled: the refusal shows the name was understood.
		if errCode(res, sc) != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc["error"]), "raspi-mcp itself") {
			t.Errorf("%s: %v, want the refusal for raspi-mcp itself", name, sc)
		}
	}
	res, sc := r.as(admin, "process_send_signal", map[string]any{"pid": os.Getpid(), "signal": "SIGHUP", "dry_run": true})
	if errCode(res, sc) != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc["error"]), "SIGHUP is not allowed") {
		t.Errorf("SIGHUP: %v, want not allowed", sc)
	}
}

package agent

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestDecideTable(t *testing.T) {
	on := config.Laptop("/x", "a")
	off := config.Default()
	disabled := config.Laptop("/x", "a")
	disabled.System.Enabled = false
	reboot := tool.Rule{Tool: "system.reboot", Domain: "system", MinRole: RoleOperate, Risk: tool.RiskHigh,
		Gate: config.SwitchSystemReboot}
	shutdown := tool.Rule{Tool: "system.shutdown", Domain: "system", MinRole: RoleAdmin, Risk: tool.RiskCritical,
		Gate: config.SwitchSystemShutdown}
	read := tool.Rule{Tool: "system.get_basic_info", Domain: "system", MinRole: RoleRead}
	p := func(r Role) Principal { return Principal{Name: "u", Role: r} }
	ok := tool.Guard{Confirm: true, Reason: "why"}
	for i, tc := range []struct {
		cfg       config.Config
		p         Principal
		r         tool.Rule
		g         tool.Guard
		committed bool
		want      string // error code, "" = allowed
		inMsg     string
	}{
		{on, p(RoleNone), read, tool.Guard{}, false, CodePermissionDenied, "no role"},
		{on, p(RoleRead), read, tool.Guard{}, false, "", ""},
		{disabled, p(RoleAdmin), read, tool.Guard{}, false, CodePermissionDenied, "namespace is disabled"},
		{on, p(RoleRead), reboot, ok, false, CodePermissionDenied, "needs role operate"},
		{on, p(RoleRead), reboot, tool.Guard{DryRun: true}, false, CodePermissionDenied, "needs role operate"},
		{off, p(RoleAdmin), reboot, ok, false, CodePermissionDenied, "switched off"},
		{off, p(RoleAdmin), reboot, tool.Guard{DryRun: true}, false, CodePermissionDenied, "switched off"},
		{on, p(RoleOperate), reboot, tool.Guard{}, false, CodeFailedPrecondition, "confirm: true and a reason"},
		{on, p(RoleOperate), reboot, tool.Guard{Confirm: true}, false, CodeFailedPrecondition, "high-risk"},
		{on, p(RoleOperate), reboot, tool.Guard{Reason: "x"}, false, CodeFailedPrecondition, "high-risk"},
		{on, p(RoleOperate), reboot, tool.Guard{DryRun: true}, false, "", ""},
		{on, p(RoleOperate), reboot, ok, false, "", ""},
		{on, p(RoleOperate), shutdown, ok, true, CodePermissionDenied, "needs role admin"},
		{on, p(RoleAdmin), shutdown, ok, false, CodeFailedPrecondition, "change_prepare"},
		{on, p(RoleAdmin), shutdown, tool.Guard{DryRun: true}, false, "", ""},
		{on, p(RoleAdmin), shutdown, tool.Guard{}, true, "", ""},
		{off, p(RoleAdmin), shutdown, tool.Guard{}, true, CodePermissionDenied, "switched off"},
	} {
		err := tool.Decide(&tc.cfg, tc.p, tc.r, tc.g, tc.committed)
		got := ""
		if err != nil {
			got = err.Code
		}
		if got != tc.want || (err != nil && !strings.Contains(err.Message, tc.inMsg)) {
			t.Errorf("case %d (%s as %s, %+v): got %v, want %q containing %q", i, tc.r.Tool, tc.p.Role, tc.g, err, tc.want, tc.inMsg)
		}
	}
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)

func TestToolNamesAndSchemas(t *testing.T) {
	r := newRig(t, nil)
	if len(r.a.tools.All()) < 11 {
		t.Fatalf("only %d tools", len(r.a.tools.All()))
	}
	for _, tl := range r.a.tools.All() {
		if !nameRE.MatchString(tl.Name()) {
			t.Errorf("wire name %q breaks %s", tl.Name(), nameRE)
		}
		if tl.Input().Tree.AdditionalProperties == nil || tl.Input().Tree.AdditionalProperties.Not == nil {
			t.Errorf("%s: input schema does not forbid additional properties", tl.Name())
		}
		ann := tl.MCP().Annotations
		if ann.ReadOnlyHint == tl.Mutating() {
			t.Errorf("%s: readOnlyHint %v but mutating %v", tl.Name(), ann.ReadOnlyHint, tl.Mutating())
		}
		if tl.Mutating() && tl.Rule().Risk >= tool.RiskHigh && (ann.DestructiveHint == nil || !*ann.DestructiveHint) {
			t.Errorf("%s: high-risk tool without destructiveHint", tl.Name())
		}
	}
	// Dotted mode exposes the canonical ids; a bad id fails start-up.
	c := config.Laptop("/x", "a")
	c.Agent.ExposeDottedNames = true
	reg := tool.NewRegistry(tool.Options{Dotted: true, CheckOutput: true})
	tool.Add(reg, tool.Spec[noArgs, noArgs]{ID: "system.get_basic_info", Run: func(context.Context, *tool.Call, noArgs) (noArgs, error) { return noArgs{}, nil }})
	if reg.Err() != nil || reg.All()[0].Name() != "system.get_basic_info" {
		t.Fatalf("dotted: %v %v", reg.Err(), reg.All())
	}
	tool.Add(reg, tool.Spec[noArgs, noArgs]{ID: "system.get_basic_info", Run: func(context.Context, *tool.Call, noArgs) (noArgs, error) { return noArgs{}, nil }})
	if reg.Err() == nil {
		t.Fatal("duplicate id accepted")
	}
	for _, bad := range []string{"System.Info", "system.get-info", "x." + strings.Repeat("a", 50)} {
		if _, err := tool.WireName(bad, false); err == nil {
			t.Errorf("wireName(%q) accepted", bad)
		}
	}
	reg = tool.NewRegistry(tool.Options{CheckOutput: true})
	tool.Add(reg, tool.Spec[noArgs, noArgs]{ID: "a.b_c", Run: func(context.Context, *tool.Call, noArgs) (noArgs, error) { return noArgs{}, nil }})
	tool.Add(reg, tool.Spec[noArgs, noArgs]{ID: "a_b.c", Run: func(context.Context, *tool.Call, noArgs) (noArgs, error) { return noArgs{}, nil }})
	if reg.Err() == nil || !strings.Contains(reg.Err().Error(), "collides") {
		t.Fatalf("collision a.b_c / a_b.c not caught: %v", reg.Err())
	}
}

// Outside tests (Options.CheckOutput off) a tool keeps its output schema as
// the JSON raspi://agent/schemas/{tool} serves, not as a tree of schema values: those trees were
// most of the idle agent's live heap. The JSON is the schema itself.
func TestOutputSchemaKeptAsJSON(t *testing.T) {
	// The input schema too is listed as JSON, and the one a call is checked
	// against (built on the tool's first call) is the same schema.
	r := newRig(t, nil)
	local := 0
	for _, tl := range r.a.tools.All() {
		if tl.LAN() {
			continue
		}
		local++
		listed, ok := tl.MCP().InputSchema.(json.RawMessage)
		if !ok {
			t.Fatalf("%s: InputSchema is %T, want json.RawMessage", tl.Name(), tl.MCP().InputSchema)
		}
		checked, err := json.Marshal(tl.Input().Tree)
		if err != nil || string(checked) != string(listed) {
			t.Errorf("%s: listed input schema\n%s\ndiffers from the one calls are checked against\n%s (%v)", tl.Name(), listed, checked, err)
		}
	}
	if local < 50 {
		t.Fatalf("%d tools checked, want all of the agent's own", local)
	}

	type out struct {
		Level int    `json:"level" jsonschema:"the level"`
		Note  string `json:"note,omitempty"`
	}
	for _, check := range []bool{false, true} {
		reg := tool.NewRegistry(tool.Options{CheckOutput: check})
		tool.Add(reg, tool.Spec[noArgs, out]{ID: "a.b", Run: func(context.Context, *tool.Call, noArgs) (out, error) { return out{}, nil }})
		if reg.Err() != nil {
			t.Fatal(reg.Err())
		}
		tl := reg.All()[0]
		if tl.ChecksOutput() != check {
			t.Errorf("checkOutput %v: resolved output schema kept: %v", check, tl.ChecksOutput())
		}
		// Served as raspi://agent/schemas/{tool}, not listed.
		if tl.MCP().OutputSchema != nil {
			t.Errorf("checkOutput %v: the listing carries an output schema", check)
		}
		raw := tl.OutputSchema()
		var got map[string]any
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		props, _ := got["properties"].(map[string]any)
		level, _ := props["level"].(map[string]any)
		// Descriptions stay in the Go type: the listing leaves them out (tool.undescribed).
		if got["type"] != "object" || level["type"] != "integer" || level["description"] != nil || !slices.Equal(got["required"].([]any), []any{"level"}) {
			t.Errorf("checkOutput %v: output schema %s", check, raw)
		}
	}
}

// badInputs derives, from a tool's own input schema, arguments that must be
// refused: an unknown field, a wrong type for every property, and values just
// outside every bound.
func badInputs(s *jsonschema.Schema) map[string]map[string]any {
	cases := map[string]map[string]any{"unknown field": {"no_such_parameter": 1}}
	for name, p := range s.Properties {
		wrong := any("not-a-number")
		switch tool.SchemaType(p) {
		case "string":
			wrong = 12
		case "object":
			wrong = "not-an-object"
		}
		cases[name+": wrong type"] = map[string]any{name: wrong}
		if p.Minimum != nil {
			cases[name+": below minimum"] = map[string]any{name: *p.Minimum - 1}
		}
		if p.Maximum != nil {
			cases[name+": above maximum"] = map[string]any{name: *p.Maximum + 1}
		}
		if p.MaxLength != nil {
			cases[name+": too long"] = map[string]any{name: strings.Repeat("x", *p.MaxLength+1)}
		}
		if len(p.Enum) > 0 {
			cases[name+": not in enum"] = map[string]any{name: "no-such-value"}
		}
	}
	return cases
}

func TestEveryToolRefusesBadInputAndChangesNothing(t *testing.T) {
	r := newRig(t, nil)
	for _, tl := range r.a.tools.All() {
		cases := badInputs(tl.Input().Tree)
		names := make([]string, 0, len(cases))
		for n := range cases {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			before := r.auditCount()
			_, e := callAs[any](t, r, admin, tl.Name(), cases[n])
			if e == nil || e.Code != CodeInvalidArgument {
				t.Errorf("%s %s: got %+v, want invalid_argument", tl.Name(), n, e)
				continue
			}
			if _, ok := e.Details["parameter"]; !ok {
				t.Errorf("%s %s: error does not name the parameter: %+v", tl.Name(), n, e)
			}
			if got := r.auditCount() - before; got != 1 {
				t.Errorf("%s %s: %d audit records, want 1", tl.Name(), n, got)
			}
		}
	}
	if ev := r.pw.Events(); len(ev) != 0 {
		t.Fatalf("bad input changed the power state: %v", ev)
	}
	toks, _ := r.db.PruneChangeTokens(time.Now().Add(time.Hour))
	if toks != 0 {
		t.Fatalf("bad input created %d change tokens", toks)
	}
}

// Arguments that are not a JSON object never reach a client session (its
// SDK would refuse to send them), so they go to the pipeline directly.
func TestArgumentsMustBeAnObject(t *testing.T) {
	r := newRig(t, nil)
	tl, _ := r.a.tools.Lookup("system_reboot")
	for _, raw := range []string{`[]`, `"x"`, `12`, `{"delay_seconds":1`} {
		res := r.a.invoke(context.Background(), tl, &tool.Call{Principal: admin, CorrelationID: "c"}, json.RawMessage(raw))
		if e := resultError(t, res); e.Code != CodeInvalidArgument {
			t.Errorf("%s: %+v", raw, e)
		}
	}
}

// powerOut compares a scheduled power action without the values that
// depend on the clock or are drawn at random, after checking they are set.
func powerOut(t *testing.T, what string, want, got SystemPowerOut) {
	t.Helper()
	if got.Scheduled {
		if _, err := time.Parse(time.RFC3339, got.ScheduledFor); err != nil || !strings.HasPrefix(got.JobID, "job-") {
			t.Errorf("%s: scheduled_for %q, job_id %q", what, got.ScheduledFor, got.JobID)
		}
	}
	if got.DryRun && len(got.Plan) == 0 {
		t.Errorf("%s: a dry run without a plan", what)
	}
	diff(t, what, want, got, cmpopts.IgnoreFields(SystemPowerOut{}, "ScheduledFor", "JobID", "Plan"))
}

func TestRebootGuardsDryRunAndAudit(t *testing.T) {
	r := newRig(t, nil)
	n := r.auditCount()
	_, e := callAs[SystemPowerOut](t, r, reader, "system_reboot", map[string]any{"confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"required_role": "operate", "role": "read", "tool": "system.reboot"})
	if r.auditCount() != n+1 {
		t.Fatal("read role: denial not audited")
	}
	_, e = callAs[SystemPowerOut](t, r, admin, "system_reboot", map[string]any{})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"missing": []any{"confirm", "reason"}, "risk": "high", "tool": "system.reboot"})
	diff(t, "no confirm: next call", []tool.SuggestedCall{{Tool: "system_reboot", Arguments: map[string]any{"dry_run": true},
		Why: "see what it would do; then call again with confirm: true and a reason"}}, e.Next)
	if r.auditCount() != n+2 {
		t.Fatal("no confirm: refusal not audited")
	}
	dry, _ := callAs[SystemPowerOut](t, r, admin, "system_reboot", map[string]any{"dry_run": true, "delay_seconds": 30})
	powerOut(t, "dry run", SystemPowerOut{EffectiveAfterSeconds: 30, Action: "reboot", DryRun: true}, dry)
	if r.auditCount() != n+3 {
		t.Fatal("dry run not audited")
	}
	if len(r.pw.Events()) != 0 {
		t.Fatal("dry run scheduled something")
	}
	res := r.call(t, admin, "system_reboot", map[string]any{"confirm": true, "reason": "kernel update", "delay_seconds": 30})
	out, _ := decodeResult[SystemPowerOut](t, res)
	powerOut(t, "reboot", SystemPowerOut{Scheduled: true, EffectiveAfterSeconds: 30, Action: "reboot"}, out)
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || s.Action != "reboot" || time.Until(s.At) < 25*time.Second {
		t.Fatalf("sim power: %+v %v", s, ok)
	}
	if res.Meta["audit_ref"] == nil || res.Meta["correlation_id"] == nil || res.Meta["duration_ms"] == nil {
		t.Fatalf("meta: %v", res.Meta)
	}
	recs, total, _ := r.a.store.QueryAudit(storeQuery(4))
	if total != n+4 || recs[0].Decision != "allow" || recs[0].Reason != "kernel update" || recs[1].DryRun != true ||
		recs[2].ErrorCode != CodeFailedPrecondition || recs[3].Decision != "deny" || recs[3].Principal != "bob" {
		t.Fatalf("audit trail: %+v", recs)
	}
	if v, _ := r.verifyAudit(); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
}

func TestWritesOffByDefault(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.System.Reboot, c.System.Shutdown = false, false })
	// The switch is named in the text a model reads (resultError checks it
	// carries the same object as _meta.error).
	_, e := callAs[SystemPowerOut](t, r, admin, "system_reboot", map[string]any{"confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"config_key": "[system] reboot", "tool": "system.reboot"})
	// And the helper refuses on its own even if the agent is bypassed.
	_, err := callHelperReboot(r)
	if err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("helper accepted a reboot its config forbids: %v", err)
	}
	if len(r.pw.Events()) != 0 {
		t.Fatal("something was scheduled")
	}
}

// prepare is change_prepare of tool with args as p; it fails t unless the
// token is issued.
func prepare(t *testing.T, r *rig, p Principal, tool string, args map[string]any) changePrepareOut {
	t.Helper()
	out, e := callAs[changePrepareOut](t, r, p, "change_prepare", map[string]any{"tool": tool, "arguments": args})
	if e != nil {
		t.Fatalf("prepare %s %v: %+v", tool, args, e)
	}
	return out
}

func TestShutdownNeedsChangeToken(t *testing.T) {
	r := newRig(t, nil)
	_, e := callAs[SystemPowerOut](t, r, admin, "system_shutdown", map[string]any{"confirm": true, "reason": "move"})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"risk": "critical", "tool": "system.shutdown"})
	diff(t, "direct: next call", []tool.SuggestedCall{{Tool: "change_prepare",
		Arguments: map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"confirm": true, "delay_seconds": 5.0, "force": false, "reason": "move"}},
		Why:       "get a single-use change token for exactly this call"}}, e.Next)

	for name, tc := range map[string]struct {
		p    Principal
		args map[string]any
		code string
	}{
		"operator":       {operator, map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move"}}, CodePermissionDenied},
		"dry_run inside": {admin, map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move", "dry_run": true}}, CodeInvalidArgument},
		"bad arguments":  {admin, map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"delay_seconds": 9999}}, CodeInvalidArgument},
		"a read tool":    {admin, map[string]any{"tool": "system_get_basic_info"}, CodeInvalidArgument},
	} {
		_, e := callAs[changePrepareOut](t, r, tc.p, "change_prepare", tc.args)
		if e == nil || e.Code != tc.code {
			t.Fatalf("%s: got %+v, want %s", name, e, tc.code)
		}
	}

	args := map[string]any{"reason": "move", "delay_seconds": 60}
	p := prepare(t, r, admin, "system_shutdown", args)
	if len(r.pw.Events()) != 0 {
		t.Fatal("prepare acted")
	}
	if _, err := time.Parse(time.RFC3339, p.ExpiresAt); err != nil || p.Token == "" || !strings.HasPrefix(p.PlanHash, "sha256:") {
		t.Fatalf("prepare: token %q, plan_hash %q, expires_at %q", p.Token, p.PlanHash, p.ExpiresAt)
	}
	diff(t, "prepare", changePrepareOut{Tool: "system_shutdown", ToolID: "system.shutdown", Risk: "critical",
		Arguments: map[string]any{"reason": "move", "delay_seconds": 60.0}}, p,
		cmpopts.IgnoreFields(changePrepareOut{}, "Token", "PlanHash", "ExpiresAt", "Plan"))
	diff(t, "the plan is the dry run", map[string]any{"action": "poweroff", "dry_run": true, "effective_after_seconds": 60.0, "scheduled": false},
		p.Plan, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "plan" }))

	_, e = callAs[changeCommitOut](t, r, Principal{Name: "eve", UID: 1003, Role: RoleAdmin}, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodePermissionDenied, map[string]any{"parameter": "token"}) // another principal's token
	// That attempt left the token to its holder (change_test.go commits it).

	p = prepare(t, r, admin, "system.shutdown", args)
	c, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	if e != nil || !strings.HasPrefix(c.ToolAuditRef, "audit:") {
		t.Fatalf("commit: %+v %+v", c, e)
	}
	diff(t, "commit", changeCommitOut{Tool: "system_shutdown", ToolID: "system.shutdown", PlanHash: p.PlanHash,
		Result: map[string]any{"action": "poweroff", "effective_after_seconds": 60.0, "scheduled": true}}, c,
		cmpopts.IgnoreFields(changeCommitOut{}, "ToolAuditRef"),
		cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "job_id" || k == "scheduled_for" }))
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || s.Action != "poweroff" {
		t.Fatalf("not scheduled: %+v", s)
	}
	_, e = callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodeNotFound, map[string]any{"parameter": "token"}) // reused

	// Policy is re-checked at commit: switched off between prepare and commit.
	p = prepare(t, r, admin, "system_shutdown", map[string]any{"reason": "again"})
	r.cfg.System.Shutdown = false
	_, e = callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodePermissionDenied, nil)
	if v, _ := r.verifyAudit(); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
}

func TestExpiredToken(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Change.TokenTTL = config.Duration(time.Second) })
	p := prepare(t, r, admin, "system_shutdown", map[string]any{"reason": "x"})
	time.Sleep(1100 * time.Millisecond)
	_, e := callAs[changeCommitOut](t, r, admin, "change_commit", map[string]any{"token": p.Token})
	wantErr(t, e, CodeFailedPrecondition, map[string]any{"parameter": "token"})
	if !strings.Contains(e.Message, "expired") {
		t.Fatalf("message does not say the token expired: %+v", e)
	}
}

func TestHelperDownAnswersUnavailableThenRecovers(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]any{"confirm": true, "reason": "x", "delay_seconds": 300}
	if _, e := callAs[SystemPowerOut](t, r, admin, "system_reboot", args); e != nil {
		t.Fatal(e)
	}
	r.killHelper()
	_, e := callAs[SystemPowerOut](t, r, admin, "system_reboot", args)
	wantErr(t, e, CodeUnavailable, map[string]any{"socket": r.cfg.Helper.Socket})
	if !e.Retryable {
		t.Fatalf("helper down is not retryable: %+v", e)
	}
	// The socket says the helper is gone (refused, reset, closed): the call
	// did not wait out the helper client's timeout.
	if strings.Contains(e.Message, "timeout") {
		t.Fatalf("helper down, found out by a timeout: %s", e.Message)
	}
	// Reads that need no root keep working.
	if _, e := callAs[HealthSnapshot](t, r, admin, "system_get_health_snapshot", nil); e != nil {
		t.Fatal(e)
	}
	r.startHelper()
	if _, e := callAs[SystemPowerOut](t, r, admin, "system_reboot", args); e != nil {
		t.Fatalf("after restart: %+v", e)
	}
}

func TestReadToolsAnswerTheirSchemas(t *testing.T) {
	r := newRig(t, nil)
	for name, out := range map[string]any{"system_get_basic_info": &basicInfo{}, "system_get_health_snapshot": &HealthSnapshot{},
		"metrics_get_realtime_metrics": &HealthSnapshot{}, "system_get_capabilities": &capabilities{}, "manage_get_server_status": &ServerStatus{},
		"logs_get_recent_audit_logs": &AuditLogsOut{}, "logs_verify_audit_chain": &AuditVerifyOut{}} {
		res := r.call(t, admin, name, nil)
		if res.IsError {
			t.Errorf("%s: %+v", name, resultError(t, res))
			continue
		}
		strictDecode(t, name, res.StructuredContent, out)
		text := res.Content[0].(*mcp.TextContent).Text
		line, rest, _ := strings.Cut(text, "\n")
		if line == "" || !json.Valid([]byte(rest)) {
			t.Errorf("%s: text is not summary line + JSON: %q", name, text)
		}
	}
	caps, _ := callAs[capabilities](t, r, reader, "system_get_capabilities", nil)
	var reboot []toolCaps
	for _, d := range caps.Domains {
		for _, tl := range d.Tools {
			if tl.Name == "system_reboot" {
				reboot = append(reboot, tl)
			}
		}
	}
	if len(reboot) != 1 {
		t.Fatalf("capabilities list system_reboot %d times", len(reboot))
	}
	diff(t, "reboot for a reader", toolCaps{Name: "system_reboot", ID: "system.reboot", Title: "Reboot", Risk: "high", MinRole: "operate",
		Stability: "stable", Unavailable: "system.reboot needs role operate; bob has role read"}, reboot[0])
}

func TestAuditLogFilters(t *testing.T) {
	r := newRig(t, nil)
	callAs[SystemPowerOut](t, r, admin, "system_reboot", map[string]any{"dry_run": true})
	callAs[SystemPowerOut](t, r, reader, "system_reboot", map[string]any{"dry_run": true})
	page := func(args map[string]any) AuditLogsOut {
		t.Helper()
		out, e := callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", args)
		if e != nil {
			t.Fatalf("%v: %+v", args, e)
		}
		out.Entries = nil // the records themselves are TestIntentIsAudited's and store's
		return out
	}
	diff(t, "denials", AuditLogsOut{TotalCount: 1, ReturnedCount: 1}, page(map[string]any{"decision": "deny"}))
	diff(t, "one of two reboots", AuditLogsOut{TotalCount: 2, ReturnedCount: 1, HasMore: true, NextOffset: 1},
		page(map[string]any{"tool": "system_reboot", "limit": 1}))
	_, e := callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", map[string]any{"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
	wantErr(t, e, CodeInvalidArgument, nil) // inverted range
	_, e = callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", map[string]any{"since": "yesterday"})
	wantErr(t, e, CodeInvalidArgument, nil) // not a time
}

// Over the socket, with the SDK client: protocol errors carry data.error_code
// and the principal comes from the peer credentials.
func TestOverTheSocket(t *testing.T) {
	r := newRig(t, nil)
	s := r.serve()
	ctx := context.Background()
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != len(r.a.tools.All()) {
		t.Fatalf("list: %v %v", err, tools)
	}
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
	var we *jsonrpc.Error
	if err == nil || !errorsAs(err, &we) || !strings.Contains(string(we.Data), `"error_code":"not_found"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "manage_get_server_status"})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	st, e := decodeResult[ServerStatus](t, res)
	if e != nil || st.Caller.Role != "admin" || !st.Helper.Reachable {
		t.Fatalf("status: %+v %+v", st, e)
	}
	// Every write switch that is on, not only the power ones.
	if w, _ := st.ConfigSummary["writes"].(map[string]any); w["[gpio] writes"] != true || w["[system] reboot"] != true {
		t.Fatalf("status writes: %v", st.ConfigSummary["writes"])
	}
}

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

func TestDecideTable(t *testing.T) {
	on := config.Laptop("/x", "a")
	off := config.Default()
	disabled := config.Laptop("/x", "a")
	disabled.System.Enabled = false
	reboot := Rule{Tool: "system.reboot", Domain: "system", MinRole: RoleOperate, Risk: RiskHigh,
		Gate: config.SwitchSystemReboot}
	shutdown := Rule{Tool: "system.shutdown", Domain: "system", MinRole: RoleAdmin, Risk: RiskCritical,
		Gate: config.SwitchSystemShutdown}
	read := Rule{Tool: "system.get_basic_info", Domain: "system", MinRole: RoleRead}
	p := func(r Role) Principal { return Principal{Name: "u", Role: r} }
	ok := Guard{Confirm: true, Reason: "why"}
	for i, tc := range []struct {
		cfg       config.Config
		p         Principal
		r         Rule
		g         Guard
		committed bool
		want      string // error code, "" = allowed
		inMsg     string
	}{
		{on, p(RoleNone), read, Guard{}, false, CodePermissionDenied, "no role"},
		{on, p(RoleRead), read, Guard{}, false, "", ""},
		{disabled, p(RoleAdmin), read, Guard{}, false, CodePermissionDenied, "namespace is disabled"},
		{on, p(RoleRead), reboot, ok, false, CodePermissionDenied, "needs role operate"},
		{on, p(RoleRead), reboot, Guard{DryRun: true}, false, CodePermissionDenied, "needs role operate"},
		{off, p(RoleAdmin), reboot, ok, false, CodePermissionDenied, "switched off"},
		{off, p(RoleAdmin), reboot, Guard{DryRun: true}, false, CodePermissionDenied, "switched off"},
		{on, p(RoleOperate), reboot, Guard{}, false, CodeFailedPrecondition, "confirm: true and a reason"},
		{on, p(RoleOperate), reboot, Guard{Confirm: true}, false, CodeFailedPrecondition, "high-risk"},
		{on, p(RoleOperate), reboot, Guard{Reason: "x"}, false, CodeFailedPrecondition, "high-risk"},
		{on, p(RoleOperate), reboot, Guard{DryRun: true}, false, "", ""},
		{on, p(RoleOperate), reboot, ok, false, "", ""},
		{on, p(RoleOperate), shutdown, ok, true, CodePermissionDenied, "needs role admin"},
		{on, p(RoleAdmin), shutdown, ok, false, CodeFailedPrecondition, "change_prepare"},
		{on, p(RoleAdmin), shutdown, Guard{DryRun: true}, false, "", ""},
		{on, p(RoleAdmin), shutdown, Guard{}, true, "", ""},
		{off, p(RoleAdmin), shutdown, Guard{}, true, CodePermissionDenied, "switched off"},
	} {
		err := Decide(&tc.cfg, tc.p, tc.r, tc.g, tc.committed)
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
	if len(r.a.tools.order) < 11 {
		t.Fatalf("only %d tools", len(r.a.tools.order))
	}
	for _, tl := range r.a.tools.order {
		if !nameRE.MatchString(tl.name) {
			t.Errorf("wire name %q breaks %s", tl.name, nameRE)
		}
		if tl.in.AdditionalProperties == nil || tl.in.AdditionalProperties.Not == nil {
			t.Errorf("%s: input schema does not forbid additional properties", tl.name)
		}
		ann := tl.mcp.Annotations
		if ann.ReadOnlyHint == tl.mutating {
			t.Errorf("%s: readOnlyHint %v but mutating %v", tl.name, ann.ReadOnlyHint, tl.mutating)
		}
		if tl.mutating && tl.rule.Risk >= RiskHigh && (ann.DestructiveHint == nil || !*ann.DestructiveHint) {
			t.Errorf("%s: high-risk tool without destructiveHint", tl.name)
		}
	}
	// Dotted mode exposes the canonical ids; a bad id fails start-up.
	c := config.Laptop("/x", "a")
	c.Agent.ExposeDottedNames = true
	reg := newRegistry(true)
	add(reg, Spec[NoArgs, NoArgs]{ID: "system.get_basic_info", Run: func(context.Context, *Call, NoArgs) (NoArgs, error) { return NoArgs{}, nil }})
	if reg.err != nil || reg.order[0].name != "system.get_basic_info" {
		t.Fatalf("dotted: %v %v", reg.err, reg.order)
	}
	add(reg, Spec[NoArgs, NoArgs]{ID: "system.get_basic_info", Run: func(context.Context, *Call, NoArgs) (NoArgs, error) { return NoArgs{}, nil }})
	if reg.err == nil {
		t.Fatal("duplicate id accepted")
	}
	for _, bad := range []string{"System.Info", "system.get-info", "x." + strings.Repeat("a", 50)} {
		if _, err := wireName(bad, false); err == nil {
			t.Errorf("wireName(%q) accepted", bad)
		}
	}
	reg = newRegistry(false)
	add(reg, Spec[NoArgs, NoArgs]{ID: "a.b_c", Run: func(context.Context, *Call, NoArgs) (NoArgs, error) { return NoArgs{}, nil }})
	add(reg, Spec[NoArgs, NoArgs]{ID: "a_b.c", Run: func(context.Context, *Call, NoArgs) (NoArgs, error) { return NoArgs{}, nil }})
	if reg.err == nil || !strings.Contains(reg.err.Error(), "collides") {
		t.Fatalf("collision a.b_c / a_b.c not caught: %v", reg.err)
	}
}

// badInputs derives, from a tool's own input schema, arguments that must be
// refused: an unknown field, a wrong type for every property, and values just
// outside every bound.
func badInputs(s *jsonschema.Schema) map[string]map[string]any {
	cases := map[string]map[string]any{"unknown field": {"no_such_parameter": 1}}
	for name, p := range s.Properties {
		wrong := any("not-a-number")
		switch schemaType(p) {
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
	for _, tl := range r.a.tools.order {
		cases := badInputs(tl.in)
		names := make([]string, 0, len(cases))
		for n := range cases {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			before := r.auditCount()
			res, sc := r.as(admin, tl.name, cases[n])
			if got := errCode(res, sc); got != CodeInvalidArgument {
				t.Errorf("%s %s: got %q (%v), want invalid_argument", tl.name, n, got, sc)
				continue
			}
			details := sc["error"].(map[string]any)["details"].(map[string]any)
			if _, ok := details["parameter"]; !ok {
				t.Errorf("%s %s: error does not name the parameter: %v", tl.name, n, sc)
			}
			if got := r.auditCount() - before; got != 1 {
				t.Errorf("%s %s: %d audit records, want 1", tl.name, n, got)
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

func TestArgumentsMustBeAnObject(t *testing.T) {
	r := newRig(t, nil)
	tl, _ := r.a.tools.lookup("system_reboot")
	for _, raw := range []string{`[]`, `"x"`, `12`, `{"delay_seconds":1`} {
		res := r.a.invoke(context.Background(), tl, &Call{Principal: admin, CorrelationID: "c"}, json.RawMessage(raw))
		sc := structured(t, res)
		if errCode(res, sc) != CodeInvalidArgument {
			t.Errorf("%s: %v", raw, sc)
		}
	}
}

func TestRebootGuardsDryRunAndAudit(t *testing.T) {
	r := newRig(t, nil)
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}

	n := r.auditCount()
	res, sc := r.as(reader, "system_reboot", map[string]any{"confirm": true, "reason": "x"})
	if errCode(res, sc) != CodePermissionDenied || r.auditCount() != n+1 {
		t.Fatalf("read role: %v", sc)
	}
	res, sc = r.as(admin, "system_reboot", map[string]any{})
	if errCode(res, sc) != CodeFailedPrecondition || r.auditCount() != n+2 {
		t.Fatalf("no confirm: %v", sc)
	}
	res, sc = r.as(admin, "system_reboot", map[string]any{"dry_run": true, "delay_seconds": 30})
	if res.IsError || sc["dry_run"] != true || sc["scheduled"] != false || r.auditCount() != n+3 {
		t.Fatalf("dry run: %v", sc)
	}
	if len(r.pw.Events()) != 0 {
		t.Fatal("dry run scheduled something")
	}
	res, sc = r.as(admin, "system_reboot", map[string]any{"confirm": true, "reason": "kernel update", "delay_seconds": 30})
	if res.IsError || sc["scheduled"] != true {
		t.Fatalf("reboot: %v", sc)
	}
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
	if v, _ := r.a.VerifyAudit(); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
}

func TestWritesOffByDefault(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.System.Reboot, c.System.Shutdown = false, false })
	res, sc := r.as(admin, "system_reboot", map[string]any{"confirm": true, "reason": "x"})
	if errCode(res, sc) != CodePermissionDenied || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "[system] reboot") {
		t.Fatalf("%v", sc)
	}
	// And the helper refuses on its own even if the agent is bypassed.
	_, err := callHelperReboot(r)
	if err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("helper accepted a reboot its config forbids: %v", err)
	}
	if len(r.pw.Events()) != 0 {
		t.Fatal("something was scheduled")
	}
}

func TestShutdownNeedsChangeToken(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "system_shutdown", map[string]any{"confirm": true, "reason": "move"})
	if errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("direct: %v", sc)
	}
	next := sc["error"].(map[string]any)["suggested_next_tool_calls"].([]any)
	if len(next) != 1 || next[0].(map[string]any)["tool"] != "change_prepare" {
		t.Fatalf("no suggestion: %v", sc)
	}
	operator := Principal{Name: "op", UID: 1002, Role: RoleOperate}
	res, sc = r.as(operator, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move"}})
	if errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("operator prepared a shutdown: %v", sc)
	}
	res, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move", "dry_run": true}})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("dry_run inside prepare: %v", sc)
	}
	res, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"delay_seconds": 9999}})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad arguments prepared: %v", sc)
	}
	res, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system_get_basic_info"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("read tool prepared: %v", sc)
	}
	res, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "move", "delay_seconds": 60}})
	if res.IsError {
		t.Fatalf("prepare: %v", sc)
	}
	token := sc["token"].(string)
	if len(r.pw.Events()) != 0 {
		t.Fatal("prepare acted")
	}
	res, sc = r.as(Principal{Name: "eve", UID: 1003, Role: RoleAdmin}, "change_commit", map[string]any{"token": token})
	if errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("another principal committed: %v", sc)
	}
	// That attempt burnt the token: it fails safe.
	res, sc = r.as(admin, "change_commit", map[string]any{"token": token})
	if errCode(res, sc) != CodeNotFound {
		t.Fatalf("burnt token: %v", sc)
	}
	_, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system.shutdown", "arguments": map[string]any{"reason": "move", "delay_seconds": 60}})
	token = sc["token"].(string)
	res, sc = r.as(admin, "change_commit", map[string]any{"token": token})
	if res.IsError || sc["result"].(map[string]any)["scheduled"] != true {
		t.Fatalf("commit: %v", sc)
	}
	if s, ok, _ := r.pw.Scheduled(context.Background()); !ok || s.Action != "poweroff" {
		t.Fatalf("not scheduled: %+v", s)
	}
	res, sc = r.as(admin, "change_commit", map[string]any{"token": token})
	if errCode(res, sc) != CodeNotFound {
		t.Fatalf("token reused: %v", sc)
	}
	// Policy is re-checked at commit: switched off between prepare and commit.
	_, sc = r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "again"}})
	token = sc["token"].(string)
	r.cfg.System.Shutdown = false
	res, sc = r.as(admin, "change_commit", map[string]any{"token": token})
	if errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("commit ignored a policy change: %v", sc)
	}
	if v, _ := r.a.VerifyAudit(); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
}

func TestExpiredToken(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Change.TokenTTL = config.Duration(time.Second) })
	_, sc := r.as(admin, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": map[string]any{"reason": "x"}})
	time.Sleep(1100 * time.Millisecond)
	res, sc := r.as(admin, "change_commit", map[string]any{"token": sc["token"]})
	if errCode(res, sc) != CodeFailedPrecondition || !strings.Contains(fmt.Sprint(sc), "expired") {
		t.Fatalf("%v", sc)
	}
}

func TestHelperDownAnswersUnavailableThenRecovers(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]any{"confirm": true, "reason": "x", "delay_seconds": 300}
	if res, sc := r.as(admin, "system_reboot", args); res.IsError {
		t.Fatalf("%v", sc)
	}
	r.killHelper()
	res, sc := r.as(admin, "system_reboot", args)
	if errCode(res, sc) != CodeUnavailable || sc["error"].(map[string]any)["retryable"] != true {
		t.Fatalf("helper down: %v", sc)
	}
	// The socket says the helper is gone (refused, reset, closed): the call
	// did not wait out the helper client's timeout.
	if msg := fmt.Sprint(sc["error"].(map[string]any)["message"]); strings.Contains(msg, "timeout") {
		t.Fatalf("helper down, found out by a timeout: %s", msg)
	}
	// Reads that need no root keep working.
	if res, sc := r.as(admin, "system_get_health_snapshot", nil); res.IsError {
		t.Fatalf("%v", sc)
	}
	r.startHelper()
	if res, sc := r.as(admin, "system_reboot", args); res.IsError {
		t.Fatalf("after restart: %v", sc)
	}
}

func TestReadToolsAnswerTheirSchemas(t *testing.T) {
	r := newRig(t, nil)
	for _, name := range []string{"system_get_basic_info", "system_get_health_snapshot", "metrics_get_realtime_metrics",
		"system_get_capabilities", "manage_get_server_status", "logs_get_recent_audit_logs", "logs_verify_audit_chain"} {
		res, sc := r.as(admin, name, nil)
		if res.IsError {
			t.Errorf("%s: %v", name, sc)
			continue
		}
		text := res.Content[0].(*mcp.TextContent).Text
		line, rest, _ := strings.Cut(text, "\n")
		if line == "" || !json.Valid([]byte(rest)) {
			t.Errorf("%s: text is not summary line + JSON: %q", name, text)
		}
	}
	_, sc := r.as(Principal{Name: "bob", Role: RoleRead}, "system_get_capabilities", nil)
	found := false
	for _, d := range sc["domains"].([]any) {
		for _, tl := range d.(map[string]any)["tools"].([]any) {
			m := tl.(map[string]any)
			if m["name"] == "system_reboot" {
				found = true
				if m["available"] != false || !strings.Contains(m["unavailable_reason"].(string), "operate") {
					t.Errorf("reboot for a reader: %v", m)
				}
			}
		}
	}
	if !found {
		t.Fatal("capabilities lack system_reboot")
	}
}

func TestAuditLogFilters(t *testing.T) {
	r := newRig(t, nil)
	r.as(admin, "system_reboot", map[string]any{"dry_run": true})
	r.as(Principal{Name: "bob", Role: RoleRead}, "system_reboot", map[string]any{"dry_run": true})
	_, sc := r.as(admin, "logs_get_recent_audit_logs", map[string]any{"decision": "deny"})
	if sc["total_count"].(float64) != 1 {
		t.Fatalf("%v", sc)
	}
	_, sc = r.as(admin, "logs_get_recent_audit_logs", map[string]any{"tool": "system_reboot", "limit": 1})
	if sc["total_count"].(float64) != 2 || sc["returned_count"].(float64) != 1 || sc["has_more"] != true {
		t.Fatalf("%v", sc)
	}
	res, sc := r.as(admin, "logs_get_recent_audit_logs", map[string]any{"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("inverted range: %v", sc)
	}
	res, sc = r.as(admin, "logs_get_recent_audit_logs", map[string]any{"since": "yesterday"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad time: %v", sc)
	}
}

// Over the socket, with the SDK client: protocol errors carry data.error_code
// and the principal comes from the peer credentials.
func TestOverTheSocket(t *testing.T) {
	r := newRig(t, nil)
	s := r.serve()
	ctx := context.Background()
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != len(r.a.tools.order) {
		t.Fatalf("list: %v %v", err, tools)
	}
	_, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
	var we *jsonrpc.Error
	if err == nil || !errorsAs(err, &we) || !strings.Contains(string(we.Data), `"error_code":"not_found"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "manage_get_server_status"})
	if err != nil || res.IsError {
		t.Fatalf("status: %v %v", err, res)
	}
	var st ServerStatus
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &st)
	if st.Caller.Role != "admin" || !st.Helper.Reachable {
		t.Fatalf("status: %+v", st)
	}
	// Every write switch that is on, not only the power ones.
	if w, _ := st.ConfigSummary["writes"].(map[string]any); w["[gpio] writes"] != true || w["[system] reboot"] != true {
		t.Fatalf("status writes: %v", st.ConfigSummary["writes"])
	}
}

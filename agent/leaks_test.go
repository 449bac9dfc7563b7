package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Nothing leaks down a role (issue 28, item 4): what a role may not read
// through the audit tool it does not read through another tool either, and
// another principal's change token neither works for nor is burnt by a
// principal it was not prepared for.

// resultText is everything a client gets from a call: the text blocks and
// the structured content.
func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	js, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(js)
	return b.String()
}

func TestStatusShowsAuditDetailsOnlyToWhoMayReadTheAudit(t *testing.T) {
	r := newRig(t, nil)
	// Someone else's refused call, from an HTTP address, with a message
	// naming the tool and the principal.
	mallory := Principal{Name: "mallory-x", UID: 1009, Role: RoleRead, Remote: "192.0.2.77:40001"}
	if res, _ := r.as(mallory, "system_reboot", map[string]any{"confirm": true, "reason": "secret-reason-x"}); !res.IsError {
		t.Fatal("a read principal rebooted")
	}
	secrets := []string{"mallory-x", "192.0.2.77", "secret-reason-x", "system.reboot needs role"}

	// A read principal may not call logs_get_recent_audit_logs: it gets
	// counts and where the details are, none of the records.
	if _, e := callAs[AuditLogsOut](t, r, reader, "logs_get_recent_audit_logs", map[string]any{}); e == nil {
		t.Fatal("the rule this test relies on changed: a read principal reads the audit")
	}
	res := r.call(t, reader, "manage_get_server_status", nil)
	st, e := decodeResult[ServerStatus](t, res)
	if e != nil {
		t.Fatal(e)
	}
	text := resultText(t, res)
	for _, s := range secrets {
		if i := strings.Index(text, s); i >= 0 {
			t.Errorf("a read principal's server status shows %q: ...%s...", s, text[max(i-80, 0):min(i+80, len(text))])
		}
	}
	if len(st.Recent) != 0 {
		t.Errorf("recent_problems for a read principal: %d records", len(st.Recent))
	}
	if st.Problems.LastHour < 1 || st.Problems.LastDay < st.Problems.LastHour || st.Audit.Denied < 1 {
		t.Errorf("a read principal gets no counts: %+v %+v", st.Problems, st.Audit)
	}
	if !strings.Contains(st.Problems.Withheld, "logs_get_recent_audit_logs") || !strings.Contains(st.Problems.Withheld, "operate") {
		t.Errorf("withheld %q does not say who sees the records", st.Problems.Withheld)
	}

	// An admin reads the audit, and the status shows it the records.
	for _, p := range []Principal{admin, operator} {
		res = r.call(t, p, "manage_get_server_status", nil)
		st, e = decodeResult[ServerStatus](t, res)
		if e != nil {
			t.Fatal(e)
		}
		if !slices.ContainsFunc(st.Recent, func(e AuditEntry) bool {
			return e.Principal == "mallory-x" && e.Remote == "192.0.2.77:40001" && e.Reason == "secret-reason-x"
		}) {
			t.Errorf("%s: recent_problems lack mallory-x's refusal: %+v", p.Name, st.Recent)
		}
		if st.Problems.Withheld != "" || st.Problems.LastHour < 1 {
			t.Errorf("%s: problems %+v", p.Name, st.Problems)
		}
	}

	// With the logs namespace off, nobody reads the audit tool, so nobody
	// reads the records here either.
	r.cfg.Logs.Enabled = false
	res = r.call(t, admin, "manage_get_server_status", nil)
	if st, e = decodeResult[ServerStatus](t, res); e != nil {
		t.Fatal(e)
	}
	if len(st.Recent) != 0 || !strings.Contains(st.Problems.Withheld, "logs") {
		t.Errorf("logs off: %d recent records, withheld %q", len(st.Recent), st.Problems.Withheld)
	}
}

// The agent's own log names who connected; logs_get_recent_app_logs, which a
// read principal may call, gives it those lines without the names.
func TestAppLogsWithholdWhoFromNonAuditReaders(t *testing.T) {
	r := newRig(t, nil)
	r.a.log.Warn("refused a handover", "principal", "mallory-x", "uid", 1009, "pid", 4711, "remote", "192.0.2.77:40001", "err", "no such session")
	r.a.log.With("principal", "mallory y").Info("session opened")
	// Keyed as the log line writes them: a bare 1009 may be part of a
	// temporary directory's random name in another line.
	secrets := []string{"mallory", "uid=1009", "pid=4711", "192.0.2.77"}

	res := r.call(t, reader, "logs_get_recent_app_logs", map[string]any{"limit": 500})
	out, e := decodeResult[appLogsOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	text := resultText(t, res)
	for _, s := range secrets {
		if i := strings.Index(text, s); i >= 0 {
			t.Errorf("a read principal's app logs show %q: ...%s...", s, text[max(i-80, 0):min(i+80, len(text))])
		}
	}
	if !strings.Contains(text, "refused a handover") || !strings.Contains(text, "principal=[withheld]") || !strings.Contains(text, "no such session") {
		t.Errorf("the line itself is gone, or not marked withheld: %+v", out.Entries)
	}

	out, e = callAs[appLogsOut](t, r, admin, "logs_get_recent_app_logs", map[string]any{"limit": 500})
	if e != nil {
		t.Fatal(e)
	}
	js, _ := json.Marshal(out)
	for _, s := range secrets {
		if !strings.Contains(string(js), s) {
			t.Errorf("an admin's app logs lack %q", s)
		}
	}
}

// Who queued a job is the audit trail's too: the read tools that list jobs
// show a job's creator to its creator and to audit readers only.
func TestJobListsWithholdOtherPrincipalsNames(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	r.startSampler()
	carol := Principal{Name: "carol-op", UID: 1010, Role: RoleOperate}
	if _, e := callAs[jobStatus](t, r, carol, "metrics_start_sampling_job", map[string]any{"interval_seconds": 60}); e != nil {
		t.Fatal(e)
	}
	if _, e := callAs[SystemPowerOut](t, r, admin, "system_reboot", map[string]any{"confirm": true, "reason": "x", "delay_seconds": 300}); e != nil {
		t.Fatal(e)
	}
	for _, tool := range []string{"manage_list_jobs", "metrics_list_sampling_jobs", "manage_get_server_status"} {
		text := resultText(t, r.call(t, reader, tool, nil))
		for _, s := range []string{"carol-op", `"alice"`} {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows a read principal %s: ...%s...", tool, s, text[max(i-80, 0):min(i+80, len(text))])
			}
		}
		if !strings.Contains(text, `"created_by":"[withheld]"`) {
			t.Errorf("%s: no created_by marked withheld", tool)
		}
		if text = resultText(t, r.call(t, admin, tool, nil)); !strings.Contains(text, "carol-op") {
			t.Errorf("%s: an admin does not see who created the job", tool)
		}
	}
	// The creator sees its own name, not the others'.
	text := resultText(t, r.call(t, carol, "manage_list_jobs", nil))
	if !strings.Contains(text, "carol-op") {
		t.Error("the creator does not see its own job's creator")
	}
}

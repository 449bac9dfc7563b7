package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// A W3C traceparent in a call's _meta is kept in the call's audit record
// (and shown by logs_get_recent_audit_logs) and in its log line; a
// malformed one is dropped without failing the call, and the record then
// carries no traceparent field at all, so it hashes as a record before
// the field existed did.
func TestTraceparentRecorded(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Audit.RecordReads = true })
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, sent, want string
	}{
		{"valid", good, good},
		{"uppercase", strings.ToUpper(good), ""},
		{"short", "00-1bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			res, err := r.session(t, reader).CallTool(ctx, &mcp.CallToolParams{Name: "system_get_capabilities",
				Arguments: map[string]any{}, Meta: mcp.Meta{"traceparent": tc.sent}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			_, _, _, last, err := r.db.AuditCounts()
			if err != nil {
				t.Fatal(err)
			}
			if last.Tool != "system.get_capabilities" || last.Traceparent != tc.want {
				t.Fatalf("last audit record: tool %q traceparent %q, want %q", last.Tool, last.Traceparent, tc.want)
			}
			if v, err := r.verifyAudit(); err != nil || !v.OK {
				t.Fatalf("audit chain: %+v %v", v, err)
			}
			logged := false
			for _, e := range r.appLog.Entries(slog.LevelDebug, "agent", 100) {
				if strings.Contains(e.Attrs, tc.sent) {
					logged = true
				}
			}
			if logged != (tc.want != "") {
				t.Fatalf("traceparent %q in the agent log: %v, want %v", tc.sent, logged, tc.want != "")
			}
		})
	}
	out, terr := callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", map[string]any{"limit": 10})
	if terr != nil {
		t.Fatal(terr)
	}
	n := 0
	for _, e := range out.Entries {
		if e.Traceparent == good {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("audit entries with the traceparent: %d, want 1: %+v", n, out.Entries)
	}
}

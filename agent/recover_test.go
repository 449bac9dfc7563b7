package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
)

// loggedError finds the agent's error-level record with message msg whose
// attributes hold every one of want.
func loggedError(r *rig, msg string, want ...string) bool {
	for _, e := range r.appLog.Entries(slog.LevelError, "agent", 100) {
		ok := e.Message == msg
		for _, w := range want {
			ok = ok && strings.Contains(e.Attrs, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// A tool that panics costs that one call: an internal error a model can read
// (not the panic's text), an audit record, the stack in the agent log, and
// the agent and the same session go on serving.
func TestAToolPanicCostsOnlyItsCall(t *testing.T) {
	r := newRig(t, nil)
	tool.Add(r.a.tools, tool.Spec[noArgs, noArgs]{ID: "system.explode", Title: "Explode", Description: "Writes to a nil map.",
		Run: func(context.Context, *tool.Call, noArgs) (noArgs, error) {
			var m map[string]int
			m["pin"] = 1 // the kind of bug a recover is for
			return noArgs{}, nil
		}})
	tl, ok := r.a.tools.Get("system.explode")
	if err := r.a.tools.Err(); err != nil || !ok {
		t.Fatal(err)
	}
	r.a.server.AddTool(tl.MCP(), r.a.handler(tl))

	for range 2 { // a second panic is handled like the first
		_, e := callAs[noArgs](t, r, admin, "system_explode", nil)
		wantErr(t, e, CodeInternal, nil)
		if strings.Contains(e.Message, "nil map") || strings.Contains(e.Message, "goroutine") {
			t.Fatalf("the panic reached the client: %s", e.Message)
		}
	}
	if _, e := callAs[basicInfo](t, r, admin, "system_get_basic_info", nil); e != nil {
		t.Fatalf("after the panics, on the same session: %+v", e)
	}
	if _, e := callAs[basicInfo](t, r, reader, "system_get_basic_info", nil); e != nil {
		t.Fatalf("after the panics, another session: %+v", e)
	}
	audit, e := callAs[AuditLogsOut](t, r, admin, "logs_get_recent_audit_logs", map[string]any{"tool": "system_explode"})
	if e != nil {
		t.Fatal(e)
	}
	if audit.TotalCount != 2 || audit.Entries[0].ErrorCode != CodeInternal || audit.Entries[0].Principal != admin.Name {
		t.Fatalf("audit of the panicking calls: %+v", audit)
	}
	if !loggedError(r, "tool failed", "system.explode panicked", "assignment to entry in nil map", "recover_test.go") {
		t.Fatalf("no log record with the panic and its stack: %+v", r.appLog.Entries(slog.LevelError, "agent", 100))
	}
}

// A panic outside any tool (here a prompt's handler; the SDK's own code
// would be caught the same way) is that request's -32603 with data.error_code,
// and the session goes on.
func TestARequestPanicCostsOnlyThatRequest(t *testing.T) {
	r := newRig(t, nil)
	r.a.server.AddPrompt(&mcp.Prompt{Name: "explode"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		panic("prompt bug")
	})
	s := r.session(t, admin)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := s.GetPrompt(ctx, &mcp.GetPromptParams{Name: "explode"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32603 || strings.Contains(we.Message, "prompt bug") {
		t.Fatalf("GetPrompt: %v, want -32603 without the panic's text", err)
	}
	var data struct {
		ErrorCode string `json:"error_code"`
	}
	if json.Unmarshal(we.Data, &data) != nil || data.ErrorCode != CodeInternal {
		t.Fatalf("data %s, want error_code %s", we.Data, CodeInternal)
	}
	if _, e := callAs[basicInfo](t, r, admin, "system_get_basic_info", nil); e != nil {
		t.Fatalf("after the panic, on the same session: %+v", e)
	}
	if !loggedError(r, "request panicked", "method=prompts/get", "prompt bug", "recover_test.go") {
		t.Fatalf("no log record with the panic and its stack: %+v", r.appLog.Entries(slog.LevelError, "agent", 100))
	}
}

package fallback

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A go-sdk client of either era connects to the fallback, reads the reason
// as instructions and in the description of its one read-only tool, and gets
// an unavailable tool error that carries the fix, from that tool or any
// other; the fallback returns when the client closes.
func TestUnavailableBothEras(t *testing.T) {
	down := Down{Reason: "the agent is not running (/run/raspi-mcp/mcp.sock: no such file or directory)",
		FixHint: "sudo systemctl start raspi-mcp", Version: "1.2.3"}
	for _, era := range []string{"", "2025-11-25"} {
		t.Run("era="+era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- Serve(inR, outW, down); outW.Close() }()
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
			cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: era})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			ir := cs.InitializeResult()
			wantVersion := "2026-07-28"
			if era != "" {
				wantVersion = era
			}
			if ir.ProtocolVersion != wantVersion {
				t.Errorf("protocol version %q, want %q", ir.ProtocolVersion, wantVersion)
			}
			if !strings.Contains(ir.Instructions, down.Reason) || !strings.Contains(ir.Instructions, down.FixHint) {
				t.Errorf("instructions %q lack the reason or the fix", ir.Instructions)
			}
			if ir.ServerInfo == nil || ir.ServerInfo.Version != "1.2.3" {
				t.Errorf("server info %+v", ir.ServerInfo)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 1 {
				t.Fatalf("tools/list: %v %+v", err, tools)
			}
			tool := tools.Tools[0]
			if tool.Name != UnavailableTool || !strings.Contains(tool.Description, down.Reason) || !strings.Contains(tool.Description, down.FixHint) {
				t.Errorf("tool %q: description %q lacks the reason or the fix", tool.Name, tool.Description)
			}
			if a := tool.Annotations; a == nil || !a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || !a.IdempotentHint {
				t.Errorf("annotations %+v: want read-only, not destructive, idempotent", a)
			}
			if s, _ := json.Marshal(tool.InputSchema); !strings.Contains(string(s), `"type":"object"`) {
				t.Errorf("input schema %s", s)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Errorf("ping: %v", err)
			}
			for _, name := range []string{UnavailableTool, "system_get_health"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
				if err != nil {
					t.Fatalf("tools/call %s: %v", name, err)
				}
				checkUnavailable(t, res, down)
			}
			// Anything else is refused with the reason, not "method not found".
			_, err = cs.ListPrompts(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), down.FixHint) {
				t.Errorf("prompts/list: %v", err)
			}
			cs.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Unavailable: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("Unavailable did not return when stdin closed")
			}
		})
	}
}

// Lines that are not JSON get a parse error under a null id; notifications
// and responses get nothing.
func TestUnavailableMalformed(t *testing.T) {
	var out strings.Builder
	in := "not json\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + `{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"
	if err := Serve(strings.NewReader(in), &out, Down{Reason: "r", FixHint: "f"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"id":null`) || !strings.Contains(lines[0], "-32700") {
		t.Errorf("answers: %q", out.String())
	}
}

// checkUnavailable asserts a tool result is the agent's `unavailable` error
// with the reason and the fix.
func checkUnavailable(t *testing.T, res *mcp.CallToolResult, down Down) {
	t.Helper()
	if !res.IsError {
		t.Fatalf("tools/call not an error: %+v", res)
	}
	var e struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		FixHint   string `json:"fix_hint"`
		Retryable bool   `json:"retryable"`
	}
	b, _ := json.Marshal(res.Meta["error"])
	if err := json.Unmarshal(b, &e); err != nil || e.Code != "unavailable" || e.FixHint != down.FixHint || e.Message != down.Reason || !e.Retryable {
		t.Errorf("_meta.error = %s (%v)", b, err)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(txt, "error unavailable: "+down.Reason) {
		t.Errorf("text %q", txt)
	}
}

// Package mcpcall is what the end-to-end tests share to call a tool the way
// a model sees the answer: the structured result, or {"error": {...}} with
// the code a model acts on.
package mcpcall

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call calls one tool and returns the raw result and its content as a map:
// structuredContent, or {"error": _meta.error} when the tool failed. A
// protocol error ends the test.
func Call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var src any = res.StructuredContent
	if res.IsError {
		src = map[string]any{"error": res.Meta["error"]}
	}
	b, _ := json.Marshal(src)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res, m
}

// Code is the error code of a Call's map, "" when it succeeded.
func Code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// Text is the text content of a result, the line a model reads first.
func Text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	return s
}

// Stdio waits, up to within, until `raspiMCP status --config cfg` says the
// agent and helper answer, then connects as client through
// `raspiMCP stdio --config cfg`, as a laptop's client does over SSH. The
// session closes with the test.
func Stdio(t testing.TB, raspiMCP, cfg, client string, within time.Duration) *mcp.ClientSession {
	t.Helper()
	deadline := time.Now().Add(within)
	for exec.Command(raspiMCP, "status", "--config", cfg).Run() != nil {
		if time.Now().After(deadline) {
			out, _ := exec.Command(raspiMCP, "status", "--config", cfg).CombinedOutput()
			t.Fatalf("agent and helper not ready: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(raspiMCP, "stdio", "--config", cfg)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

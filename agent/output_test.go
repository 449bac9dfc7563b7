package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// Every read-only tool's result, on the simulated board, matches the output
// schema it advertises. A serving agent no longer checks this per call
// (Options.CheckOutput), so this test is what holds the line.
func TestEveryToolOutputMatchesItsSchema(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Logs.JournalUnits = []string{"nginx.service"} })
	checked := 0
	for _, tl := range r.a.tools.All() {
		if tl.Mutating() || tl.LAN() {
			continue
		}
		res, sc := r.as(admin, tl.Name(), argsOf(tl))
		if res.IsError {
			// Some reads need hardware the board may lack (a camera
			// still); they must say so, not break their schema.
			if code := errCode(res, sc); code == CodeInternal {
				t.Errorf("%s: internal error %v", tl.Name(), sc)
			}
			continue
		}
		js, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := tl.CheckOut(js); err != nil {
			t.Errorf("%s: result breaks its output schema: %v\n%s", tl.Name(), err, js)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d read tools answered on the simulated board", checked)
	}
}

// With CheckOutput a result that breaks its schema becomes an internal
// error naming no detail of the bug to the model; without it (a serving
// agent) the result goes out as the tool made it.
func TestCheckOutputCatchesABrokenResult(t *testing.T) {
	r := newRig(t, nil)
	// The same tool, with a result that says it is what its schema
	// describes and is not.
	old, _ := r.a.tools.Get("system.get_basic_info")
	r.a.tools.Unmount(func(x *tool.Tool) bool { return x == old })
	tool.Add(r.a.tools, tool.Spec[noArgs, brokenInfo]{ID: old.ID(), Title: old.MCP().Title, Rule: old.Rule(),
		Run: func(context.Context, *tool.Call, noArgs) (brokenInfo, error) { return brokenInfo{}, nil }})
	tl, ok := r.a.tools.Get("system.get_basic_info")
	if r.a.tools.Err() != nil || !ok {
		t.Fatal(r.a.tools.Err())
	}
	r.a.server.AddTool(tl.MCP(), r.a.handler(tl))
	res, sc := r.as(admin, "system_get_basic_info", nil)
	if errCode(res, sc) != CodeInternal || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "invalid result") {
		t.Fatalf("checked: %v", sc)
	}
	r.a.checkOutput = false
	res, sc = r.as(admin, "system_get_basic_info", nil)
	if res.IsError || sc["hostname"] != float64(42) {
		t.Fatalf("unchecked: %v", sc)
	}
}

// brokenInfo's schema says hostname is a string; it marshals a number.
type brokenInfo struct {
	Hostname string `json:"hostname"`
}

func (brokenInfo) MarshalJSON() ([]byte, error) { return []byte(`{"hostname":42}`), nil }

package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Every read-only tool's result, on the simulated board, matches the output
// schema it advertises. A serving agent no longer checks this per call
// (Options.CheckOutput), so this test is what holds the line.
func TestEveryToolOutputMatchesItsSchema(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Logs.JournalUnits = []string{"nginx.service"} })
	checked := 0
	for _, tl := range r.a.tools.all() {
		if tl.mutating || tl.lan {
			continue
		}
		res, sc := r.as(admin, tl.name, argsOf(tl))
		if res.IsError {
			// Some reads need hardware the board may lack (a camera
			// still); they must say so, not break their schema.
			if code := errCode(res, sc); code == CodeInternal {
				t.Errorf("%s: internal error %v", tl.name, sc)
			}
			continue
		}
		js, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := tl.checkOut(js); err != nil {
			t.Errorf("%s: result breaks its output schema: %v\n%s", tl.name, err, js)
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
	tl, _ := r.a.tools.lookup("system_get_basic_info")
	tl.run = func(ctx context.Context, c *Call, args []byte) (any, string, error) {
		return map[string]any{"hostname": 42}, "broken", nil
	}
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

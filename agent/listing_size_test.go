package agent

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the tool listing costs, for issue 31's targets. A model is shown
// each tool's name, description and input schema (what an LLM API takes
// as a tool definition), on every turn; the rest of a tools/list entry
// (title, annotations, output schema, _meta, icons) is for the client.
// This measures both, as an admin with every switch on (config.Laptop):
//
//	go test ./agent -run TestToolListingSize -count=1 -v | grep MEASURE
//
// Tokens are estimated as bytes/4: no tokenizer is at hand offline. On
// this listing o200k counts about 4.3 bytes a token (JSON with English
// descriptions), so the estimate is a little high.
// Ceilings a little above what this branch measured, so that the listing
// does not grow back unnoticed; issue 31's targets (≤ 6k o200k tokens,
// ≤ 50 KB on the wire) are lower, and these come down as it gets there.
const (
	maxModelFacingBytes = 33 * 1024  // measured 32,219 (7,590 o200k tokens)
	maxToolsListBytes   = 104 * 1024 // measured 102,234 / 102,366
)

// guardArgNames are the parameters of tool.GuardArgs.
var guardArgNames = []string{"dry_run", "confirm", "reason", "intent"}

func TestToolListingSize(t *testing.T) {
	r := newSimRig(t, nil)
	r.serveMany()
	for _, era := range schemaEras {
		entries, pages := r.listToolsWire(t, era)
		var model, guards, desc, outSchemas, icons, meta int
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			e := entries[name].(map[string]any)
			model += jsonLen(t, map[string]any{"name": e["name"], "description": e["description"], "inputSchema": e["inputSchema"]})
			desc += len(e["description"].(string))
			props, _ := e["inputSchema"].(map[string]any)["properties"].(map[string]any)
			for _, g := range guardArgNames {
				if p, ok := props[g]; ok {
					guards += jsonLen(t, map[string]any{g: p})
				}
			}
			outSchemas += jsonLen(t, e["outputSchema"])
			if e["icons"] != nil {
				icons += jsonLen(t, e["icons"])
			}
			meta += jsonLen(t, e["_meta"])
		}
		wire, serverInfo := 0, 0
		for _, p := range pages {
			wire += len(p)
			var msg struct {
				Result struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"result"`
			}
			if err := json.Unmarshal(p, &msg); err != nil {
				t.Fatal(err)
			}
			serverInfo += len(msg.Result.Meta[mcp.MetaKeyServerInfo])
		}
		t.Logf("MEASURE era %s: %d tools; model-facing (name, description, inputSchema) %d bytes ≈ %d tokens (bytes/4), of which descriptions %d bytes, guard arguments %d bytes",
			era, len(entries), model, model/4, desc, guards)
		t.Logf("MEASURE era %s: tools/list on the wire %d bytes in %d page(s): output schemas %d, icons %d, _meta %d, serverInfo in the result's _meta %d",
			era, wire, len(pages), outSchemas, icons, meta, serverInfo)
		if model > maxModelFacingBytes {
			t.Errorf("era %s: the model-facing listing is %d bytes, over %d: shorten descriptions or say it once in raspi://agent/contract", era, model, maxModelFacingBytes)
		}
		if wire > maxToolsListBytes {
			t.Errorf("era %s: tools/list is %d bytes on the wire, over %d", era, wire, maxToolsListBytes)
		}
		if icons != 0 {
			t.Errorf("era %s: tools carry %d bytes of icons; the server's Implementation has the icon", era, icons)
		}
	}
}

func jsonLen(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

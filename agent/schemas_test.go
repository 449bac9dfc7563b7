package agent

// Schema snapshots: what a client sees of each tool in tools/list, one
// golden file per tool under testdata/schemas, so that no tool's name,
// title, description, annotations, input or output schema, _meta or icons
// change without a reviewer seeing the change in the diff.
//
// After a deliberate change to a tool (or a new or removed tool), rewrite
// the files and commit them with the change:
//
//	go test ./agent -run TestToolSchemaSnapshots -count=1 -update-schemas
//
// then read `git diff agent/testdata/schemas`: it is the change clients
// will see. The flag also deletes the files of tools that are gone.
// Without it the test fails, naming the tool and the era, on any entry
// that differs from its file, on a tool with no file and on a file with
// no tool.
//
// What a file holds: the tool's entry of the tools/list result exactly as
// the agent sends it (read from the wire, before the SDK's client decodes
// it), every key of it: name, title, description, annotations, inputSchema,
// _meta (id, risk, min_role, stability: the contract a
// client's policy reads) and icons, should a tool carry any (none do: the
// server's icon is in the handshake, TestIconsAndTitlesOnTheWire). Nothing
// is left out, so nothing a client sees can change unnoticed. It is listed
// by an admin through real go-sdk client sessions on the agent's socket,
// on the simulated board with every switch on (config.Laptop), once per
// protocol era. Keys are sorted and numbers kept as sent.
//
// The file is an object whose keys are the eras and whose values are the
// entry those eras list. Eras that list the tool identically share one key,
// "2025-11-25 and 2026-07-28", and the entry is stored once: a reviewer
// reads a single entry, and the key says it is what both eras see. When the
// eras differ, each has its own key and the diff between the two is the
// difference. An era that does not list the tool has no key. One more key,
// outputSchemaKey, holds the schema the tool's results conform to, which
// tools/list leaves out and raspi://agent/schemas/{tool} serves.
//
// The tools of LAN upstreams (mounted namespaces) are not ours to snapshot:
// the rig mounts none, and any it listed would be skipped.

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var updateSchemas = flag.Bool("update-schemas", false, "rewrite agent/testdata/schemas from the tools the agent lists (TestToolSchemaSnapshots)")

// schemaEras are the protocol eras whose listings are snapshot, oldest first.
var schemaEras = []string{"2025-11-25", "2026-07-28"}

const schemaDir = "testdata/schemas"

// outputSchemaKey is the snapshot's key for the tool's output schema,
// which tools/list leaves out and raspi://agent/schemas/{tool} serves
// (outputschemas.go): kept under review as the listing is.
const outputSchemaKey = "outputSchema, served as raspi://agent/schemas/{tool}"

// snapshotKeys are the keys of a snapshot file: the eras, then the output schema.
func snapshotKeys() []string { return append(slices.Clone(schemaEras), outputSchemaKey) }

func TestToolSchemaSnapshots(t *testing.T) {
	r := newSimRig(t, nil)
	r.serveMany() // starts the agent on its socket, which listToolsRaw dials
	// era -> wire name -> entry
	listed := map[string]map[string]any{}
	for _, era := range schemaEras {
		listed[era] = r.listToolsRaw(t, era)
	}
	names := map[string]bool{}
	for _, era := range schemaEras {
		for name := range listed[era] {
			names[name] = true
		}
	}
	if len(names) == 0 {
		t.Fatal("no tools listed")
	}

	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if names[name] {
			continue
		}
		if *updateSchemas {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: removed, no era lists the tool", f)
			continue
		}
		t.Errorf("%s: no era lists tool %s; if it is gone on purpose, run with -update-schemas", f, name)
	}

	if *updateSchemas {
		if err := os.MkdirAll(schemaDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		byEra := map[string]any{}
		for _, era := range schemaEras {
			if e, ok := listed[era][name]; ok {
				byEra[era] = e
			}
		}
		tl, _ := r.a.tools.Lookup(name)
		var out any
		if err := decodeNumbers(tl.OutputSchema(), &out); err != nil {
			t.Fatalf("tool %s: output schema: %v", name, err)
		}
		byEra[outputSchemaKey] = out
		want := snapshotFile(t, byEra)
		path := filepath.Join(schemaDir, name+".json")
		if *updateSchemas {
			if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, want) {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("%s: written", path)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("tool %s has no snapshot %s; run with -update-schemas and commit it", name, path)
			continue
		}
		if !bytes.Equal(got, want) {
			compareSnapshot(t, name, path, got, byEra)
		}
	}
}

// compareSnapshot reports how the file of tool name differs from what
// each era lists; eras that differ from it alike are reported together.
func compareSnapshot(t *testing.T, name, path string, file []byte, byEra map[string]any) {
	t.Helper()
	var stored map[string]any
	if err := decodeNumbers(file, &stored); err != nil {
		t.Errorf("tool %s: %s: %v; run with -update-schemas", name, path, err)
		return
	}
	fromFile := map[string]any{}
	for key, e := range stored {
		for era := range strings.SplitSeq(key, " and ") {
			fromFile[era] = e
		}
	}
	var eras, problems []string // the same problem for consecutive eras is one report
	for _, era := range snapshotKeys() {
		want, inFile := fromFile[era]
		got, isListed := byEra[era]
		var p string
		switch {
		case !inFile && !isListed:
		case !inFile:
			p = "listed but not in " + path
		case !isListed:
			p = "in " + path + " but no longer listed"
		default:
			if d := cmp.Diff(want, got); d != "" {
				p = "tools/list differs from " + path + " (-file +listed):\n" + d
			}
		}
		if p == "" {
			continue
		}
		if n := len(problems); n > 0 && problems[n-1] == p {
			eras[n-1] += " and " + era
			continue
		}
		eras, problems = append(eras, era), append(problems, p)
	}
	for i, p := range problems {
		t.Errorf("tool %s, era %s: %s", name, eras[i], p)
	}
	if len(problems) == 0 { // the same entries, grouped or laid out otherwise
		t.Errorf("tool %s: %s holds what is listed but not as -update-schemas writes it (eras grouped as %q)", name, path, slices.Sorted(maps.Keys(stored)))
	}
	t.Logf("to accept what tool %s lists now: go test ./agent -run TestToolSchemaSnapshots -count=1 -update-schemas", name)
}

// snapshotFile is the file for one tool: its entry keyed by the eras that
// list it identically, pretty-printed with sorted keys.
func snapshotFile(t *testing.T, byEra map[string]any) []byte {
	t.Helper()
	var groups [][]string // eras with the same entry, in era order
	for _, era := range snapshotKeys() {
		e, ok := byEra[era]
		if !ok {
			continue
		}
		i := slices.IndexFunc(groups, func(g []string) bool { return cmp.Equal(byEra[g[0]], e) })
		if i < 0 {
			groups = append(groups, []string{era})
		} else {
			groups[i] = append(groups[i], era)
		}
	}
	out := map[string]any{}
	for _, g := range groups {
		out[strings.Join(g, " and ")] = byEra[g[0]]
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // descriptions read as written: "<", ">" and "&" stay
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil { // maps: keys sorted
		t.Fatal(err)
	}
	return b.Bytes()
}

// listToolsRaw lists the agent's tools as an admin (the rig's user) in a
// session of protocol era version, and returns each tool's entry as it
// came over the socket, by wire name. LAN upstreams' tools are left out.
func (r *rig) listToolsRaw(t *testing.T, version string) map[string]any {
	t.Helper()
	entries, _ := r.listToolsWire(t, version)
	return entries
}

// listToolsWire is listToolsRaw that also returns the tools/list results'
// messages as they came over the socket (one a page).
func (r *rig) listToolsWire(t *testing.T, version string) (map[string]any, []json.RawMessage) {
	t.Helper()
	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	return r.listToolsOver(t, version, conn)
}

// listToolsOver is listToolsWire over conn, a connection to the agent.
func (r *rig) listToolsOver(t *testing.T, version string, conn net.Conn) (map[string]any, []json.RawMessage) {
	t.Helper()
	wire := &teeBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "snapshots", Version: "1"}, nil).Connect(ctx,
		&mcp.IOTransport{Reader: teeConn{io.TeeReader(conn, wire), conn}, Writer: conn}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	n := 0
	for _, err := range s.Tools(ctx, nil) { // every page
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	entries := map[string]any{}
	var pages []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(wire.bytes()))
	dec.UseNumber()
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.ErrUnexpectedEOF {
			break // a message after the listing, still being read
		} else if err != nil {
			t.Fatalf("era %s: reading the wire: %v", version, err)
		}
		var msg struct {
			Result *struct {
				Tools []map[string]any `json:"tools"`
			} `json:"result"`
		}
		if err := decodeNumbers(raw, &msg); err != nil {
			t.Fatalf("era %s: reading the wire: %v", version, err)
		}
		if msg.Result == nil || msg.Result.Tools == nil {
			continue
		}
		pages = append(pages, raw)
		for _, e := range msg.Result.Tools {
			name, _ := e["name"].(string)
			tl, ok := r.a.tools.Lookup(name)
			if !ok {
				t.Errorf("era %s: listed tool %q is not registered", version, name)
				continue
			}
			if tl.LAN() {
				continue
			}
			if _, dup := entries[name]; dup {
				t.Errorf("era %s: tool %s listed twice", version, name)
			}
			entries[name] = e
		}
	}
	if len(entries) == 0 || n < len(entries) {
		t.Fatalf("era %s: the SDK client listed %d tools, the wire carried %d of ours", version, n, len(entries))
	}
	return entries, pages
}

// teeConn reads through a tee and closes the connection.
type teeConn struct {
	io.Reader
	io.Closer
}

// teeBuffer keeps what a client session reads from its connection.
type teeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *teeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *teeBuffer) bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf.Bytes())
}

// decodeNumbers decodes JSON keeping numbers as written (json.Number).
func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

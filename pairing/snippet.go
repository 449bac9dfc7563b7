package pairing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Client is an MCP client whose configuration entry pairing can print.
type Client struct {
	ID    string // what --client takes
	Title string
	// key is the object of servers in a JSON config file; "" for a client
	// whose file is not written here (printed only).
	key string
	// stdioType is the entry's "type" for clients that want one.
	stdioType string
	// file is the user-wide config file, from the OS's user config and
	// home directories; nil when not written.
	file func(configDir, home string) string
}

// Clients are those whose entries pairing prints, in the order printed.
// Only the three whose config file is plain JSON with a documented servers
// object are written: Claude Code's ~/.claude.json is its own state file,
// Codex's is TOML, and Gemini CLI scopes servers per folder; those are
// printed as the client's own `mcp add` command.
var clients = []Client{
	{ID: "claude-desktop", Title: "Claude Desktop", key: "mcpServers",
		file: func(cfg, _ string) string { return filepath.Join(cfg, "Claude", "claude_desktop_config.json") }},
	{ID: "claude-code", Title: "Claude Code"},
	{ID: "cursor", Title: "Cursor", key: "mcpServers",
		file: func(_, home string) string { return filepath.Join(home, ".cursor", "mcp.json") }},
	{ID: "vscode", Title: "VS Code", key: "servers", stdioType: "stdio",
		file: func(cfg, _ string) string { return filepath.Join(cfg, "Code", "User", "mcp.json") }},
	{ID: "codex", Title: "Codex CLI"},
	{ID: "gemini", Title: "Gemini CLI"},
}

// ClientIDs lists what --client takes.
func ClientIDs() []string {
	ids := make([]string, len(clients))
	for i, c := range clients {
		ids[i] = c.ID
	}
	return ids
}

// LookupClient finds a client by its --client name.
func LookupClient(id string) (Client, error) {
	for _, c := range clients {
		if c.ID == id {
			return c, nil
		}
	}
	return Client{}, fmt.Errorf("pairing: client %q: want one of %s", id, strings.Join(ClientIDs(), ", "))
}

// Writable says whether WriteConfig can write the client's config file.
func (c Client) Writable() bool { return c.file != nil }

// ConfigPath is the client's user-wide config file.
func (c Client) ConfigPath() (string, error) {
	if c.file == nil {
		return "", fmt.Errorf("pairing: %s's config is not written here: run the command printed for it", c.Title)
	}
	cfg, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("pairing: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("pairing: %w", err)
	}
	return c.file(cfg, home), nil
}

// args are what the client passes the laptop binary: it is the stdio
// server, and connects to the Pi of pairing name.
func args(name string) []string { return []string{"connect", "paired", name} }

// entry is the client's server entry, as JSON.
func (c Client) entry(name, exe string) json.RawMessage {
	e := struct {
		Type    string   `json:"type,omitempty"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}{c.stdioType, exe, args(name)}
	return marshal(e)
}

// marshal is json.Marshal without HTML escaping, for files people read.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings, slices and structs of them: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Snippet is what to add to the client so it starts exe as the stdio
// server of pairing name: the file's JSON, or the client's command.
func (c Client) Snippet(name, exe string) string {
	cmd := shellQuote(exe) + " " + strings.Join(args(name), " ")
	switch c.ID {
	case "claude-code":
		return "claude mcp add --scope user " + name + " -- " + cmd + "\n"
	case "codex":
		return "codex mcp add " + name + " -- " + cmd + "\n" +
			"# or in ~/.codex/config.toml:\n" +
			"[mcp_servers." + name + "]\ncommand = " + string(marshal(exe)) + "\nargs = " + string(marshal(args(name))) + "\n"
	case "gemini":
		return "gemini mcp add --scope user " + name + " " + cmd + "\n"
	}
	return string(encodeObject([]member{{c.key, encodeObject([]member{{name, c.entry(name, exe)}}, "  ")}}, "")) + "\n"
}

// shellQuote quotes a path with a space or a shell's special character for
// the printed commands, in double quotes, which sh, PowerShell and cmd
// all read.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t'\"$&|;<>()*?[]{}!`~#") {
		return s
	}
	return `"` + s + `"`
}

// WriteConfig adds pairing name's entry to the client's JSON config file
// at path, keeping every other server and setting in their order: read,
// change, write a temporary file, rename it over the old one. The old
// file is first copied beside it (PATH.raspi-mcp-TIME.bak), whose name is
// returned. A file that is not plain JSON (comments, trailing commas) is
// left as it was: the error carries the entry to add by hand. An existing
// entry of the same name is replaced (replaced is true).
func (c Client) WriteConfig(path, name, exe string, now time.Time) (backup string, replaced bool, err error) {
	if c.file == nil {
		return "", false, fmt.Errorf("pairing: %s's config is not written here; run:\n%s", c.Title, c.Snippet(name, exe))
	}
	if err := CheckName(name); err != nil {
		return "", false, err
	}
	byHand := func(why string) error {
		return fmt.Errorf("pairing: %s: %s; nothing was changed: add the entry by hand:\n%s", path, why, c.Snippet(name, exe))
	}
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o600)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return "", false, fmt.Errorf("pairing: %s: no directory %s: is %s installed? (--file FILE names another config file)", path, filepath.Dir(path), c.Title)
		}
		old = nil
	case err != nil:
		return "", false, fmt.Errorf("pairing: %w", err)
	default:
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	top := []member{}
	if len(bytes.TrimSpace(old)) > 0 {
		if top, err = parseObject(old); err != nil {
			return "", false, byHand("not plain JSON (comments or trailing commas?) or not an object")
		}
	}
	servers := []member{}
	i := find(top, c.key)
	if i >= 0 {
		if servers, err = parseObject(top[i].val); err != nil {
			return "", false, byHand(fmt.Sprintf("%q is not an object", c.key))
		}
	}
	j := find(servers, name)
	replaced = j >= 0
	servers = set(servers, name, c.entry(name, exe))
	top = set(top, c.key, encodeObject(servers, ""))
	data := append(encodeObject(top, ""), '\n')
	if old != nil && bytes.Equal(data, old) {
		return "", true, nil // already there, as it would be written
	}
	if old != nil {
		backup = path + ".raspi-mcp-" + now.UTC().Format("20060102T150405Z") + ".bak"
		if err := writeNew(backup, old, mode); err != nil {
			return "", false, err
		}
	}
	if err := writeAtomic(path, data, mode); err != nil {
		return "", false, err
	}
	return backup, replaced, nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("pairing: backup: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("pairing: backup: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("pairing: backup: %w", err)
	}
	return nil
}

// member is one key of a JSON object, its value as written: an object is
// read and written back in its own order, and values pairing does not
// change keep their numbers and strings exactly.
type member struct {
	key string
	val json.RawMessage
}

// parseObject reads a JSON object's members in order.
func parseObject(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("pairing: not a JSON object")
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		ms = append(ms, member{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("pairing: data after the JSON object")
	}
	return ms, nil
}

func find(ms []member, key string) int {
	for i, m := range ms {
		if m.key == key {
			return i
		}
	}
	return -1
}

// set replaces the first member named key (dropping any later duplicate,
// which a reader would take instead) or appends it.
func set(ms []member, key string, v json.RawMessage) []member {
	i := find(ms, key)
	if i < 0 {
		return append(ms, member{key, v})
	}
	ms[i].val = v
	out := ms[:i+1]
	for _, m := range ms[i+1:] {
		if m.key != key {
			out = append(out, m)
		}
	}
	return out
}

// encodeObject writes members as an indented object, each value
// re-indented to its depth; indent is the object's own.
func encodeObject(ms []member, indent string) json.RawMessage {
	if len(ms) == 0 {
		return json.RawMessage("{}")
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range ms {
		b.WriteString(indent + "  ")
		b.Write(marshal(m.key))
		b.WriteString(": ")
		if err := json.Indent(&b, m.val, indent+"  ", "  "); err != nil {
			b.Write(m.val) // parsed as JSON already: not reached
		}
		if i < len(ms)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + "}")
	return b.Bytes()
}

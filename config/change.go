package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// MCPDropIn is the one drop-in a configuration change over MCP writes,
// beside config.toml in config.d/. Its name sorts after the packaged and
// most hand-written drop-ins, so what the owner applied over MCP wins over
// them, and it is the only file such a change ever replaces.
const MCPDropIn = "50-mcp.toml"

// PrevSuffix is appended to MCPDropIn for the copy kept before a change
// replaces it; the glob of Load (*.toml) does not read it.
const PrevSuffix = ".prev"

// MCPDropInPath is where MCPDropIn lives for the main file path.
func MCPDropInPath(path string) string {
	return filepath.Join(filepath.Dir(path), "config.d", MCPDropIn)
}

// MaxDropIn is the largest candidate drop-in accepted over MCP: a file of
// switches, lists and a few pins is well under it.
const MaxDropIn = 16 << 10

// fixedTables are tables of namespace switches whose keys still decide who
// may do what: [manage] updates lets a model replace the server itself.
var fixedTables = []string{"manage"}

// fixedKeys are keys inside changeable tables that are safety floors rather
// than settings: the users whose processes no signal reaches.
var fixedKeys = []string{"process.protected_users"}

// Changeable reports whether a dotted key ("gpio.writes", "gpio.pins") may
// be set by a configuration change over MCP. It is an allow-list: the keys
// of the tables that the switches table turns on and off (system, gpio,
// i2c, ...), less fixedTables and fixedKeys. Everything else, [roles],
// [http], [guard], [audit], [change], [helper], [agent], [manage] and
// [[upstream]] included, and any table added later, can only be changed on
// the device, so a model can never widen its own powers or switch off the
// person's confirmation.
func Changeable(key string) bool {
	table, field, ok := strings.Cut(key, ".")
	if !ok || field == "" || strings.Contains(field, ".") {
		return false
	}
	if slices.Contains(fixedTables, table) || slices.Contains(fixedKeys, key) {
		return false
	}
	for _, s := range Switches() {
		if len(s.def().namespaces) > 0 && s.def().path == table+".enabled" {
			return knownKey(table, field)
		}
	}
	return false
}

// knownKey reports whether table.field is a key of Config.
func knownKey(table, field string) bool {
	t := fieldByTag(reflect.ValueOf(Config{}), table)
	return t.IsValid() && t.Kind() == reflect.Struct && fieldByTag(t, field).IsValid()
}

// KeyError is a problem with one key of a candidate drop-in: its dotted
// name, the value the candidate gave it when there is one, and why.
type KeyError struct {
	Key string `json:"key,omitempty"`
	// Value is the candidate's value as JSON text ("true", "\"off\"",
	// "[1, 2]"): one type for every key, so a schema can say what it is.
	Value  string `json:"value,omitempty"`
	Reason string `json:"reason"`
	// Forbidden marks a key that may be valid but can only be changed on
	// the device (not Changeable).
	Forbidden bool `json:"forbidden,omitempty"`
}

func (e *KeyError) Error() string {
	if e.Key == "" {
		return "config: " + e.Reason
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Reason)
}

// Keys lists the dotted keys a TOML document sets, sorted: "gpio.writes"
// for a key of a table, "gpio.pins" for a whole list, "upstream" for
// [[upstream]], "roles.users" for a nested table. Values are the decoded
// TOML values.
func Keys(data []byte) (map[string]any, error) {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, err
	}
	keys := map[string]any{}
	for table, v := range doc {
		sub, ok := v.(map[string]any)
		if !ok {
			keys[table] = v
			continue
		}
		if len(sub) == 0 {
			keys[table] = sub // an empty [table] still names it
		}
		for k, sv := range sub {
			keys[table+"."+k] = sv
		}
	}
	return keys, nil
}

// CheckCandidate checks a candidate for MCPDropIn of the config at path
// exactly as Load does (and so as `raspi-mcp config check` does), with the
// candidate in place of the current MCPDropIn, after refusing any key that
// is not Changeable. It returns the merged result. The error is a
// *KeyError naming the key and value where one is to blame.
func CheckCandidate(path string, candidate []byte) (Config, error) {
	if len(candidate) > MaxDropIn {
		return Config{}, &KeyError{Reason: fmt.Sprintf("candidate is %d bytes; at most %d", len(candidate), MaxDropIn)}
	}
	keys, err := Keys(candidate)
	if err != nil {
		return Config{}, &KeyError{Reason: "not TOML: " + parseMessage(err, candidate)}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !Changeable(k) {
			return Config{}, &KeyError{Key: k, Value: JSONText(keys[k]), Forbidden: true,
				Reason: "cannot be changed over MCP, only on the device (it decides who may do what)"}
		}
	}
	c, err := load(path, map[string][]byte{MCPDropIn: candidate})
	if err != nil {
		return Config{}, keyError(err, keys)
	}
	return c, nil
}

// parseMessage is a TOML error with its position when the decoder has one.
func parseMessage(err error, data []byte) string {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		return positioned(perr, data)
	}
	return err.Error()
}

// keyError turns a Load error ("config: FILE: gpio.revert: want ...",
// "unknown key \"gpio.foo\"") into a KeyError naming the key.
func keyError(err error, keys map[string]any) *KeyError {
	var ps Problems
	if errors.As(err, &ps) && len(ps) > 0 {
		// The first problem: a candidate is refused whole, and the model
		// fixes one key at a time.
		p := ps[0]
		ke := &KeyError{Key: p.Key, Reason: p.Msg}
		if k, ok := strings.CutPrefix(p.Msg, "unknown key "); ok && ke.Key == "" {
			if k, _, ok := strings.Cut(strings.TrimPrefix(k, `"`), `"`); ok {
				ke.Key = k
			}
		}
		if v, ok := keys[baseKey(ke.Key)]; ok && ke.Key != "" {
			ke.Value = JSONText(v)
		} else if i := strings.IndexByte(ke.Key, '['); i >= 0 {
			if v, ok := keys[ke.Key[:i]]; ok {
				ke.Value = JSONText(v)
			}
		}
		return ke
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "config: ")
	// Strip the file name Load puts first.
	if i := strings.Index(msg, ".toml: "); i >= 0 {
		msg = msg[i+len(".toml: "):]
	}
	ke := &KeyError{Reason: msg}
	if _, rest, ok := strings.Cut(msg, `(last key "`); ok {
		// A wrong type: the decoder names the key it was filling.
		if k, _, ok := strings.Cut(rest, `"`); ok {
			ke.Key = k
		}
	} else if rest, ok := strings.CutPrefix(msg, "unknown key "); ok {
		if k, _, ok := strings.Cut(strings.TrimPrefix(rest, `"`), `"`); ok {
			ke.Key, ke.Reason = k, "unknown key (see config.example.toml for every key)"
		}
	} else if k, reason, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(k, " \"") {
		ke.Key, ke.Reason = k, reason
		if i := strings.IndexByte(k, '['); i >= 0 {
			k = k[:i] // gpio.pins[0].mode: the list is the key set
		}
		if !strings.Contains(k, ".") {
			ke.Key = k
		}
	}
	if ke.Key != "" {
		base := ke.Key
		if i := strings.IndexByte(base, '['); i >= 0 {
			base = base[:i]
		}
		if v, ok := keys[base]; ok {
			ke.Value = JSONText(v)
		}
	}
	return ke
}

// load is Load with some drop-ins' contents replaced (or added) by name.
// It reads every file even after one is wrong and returns all their
// problems together, as Problems, each with its file and, where the TOML
// decoder knows it, its line.
func load(path string, replace map[string][]byte) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	dropins, err := dropInData(path, replace)
	if err != nil {
		return Config{}, err
	}
	c := Default()
	at, failed := located{}, map[string]bool{}
	var probs Problems
	unreadable := false
	files := append([]fileData{{path, data}}, dropins...)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.path
		if i > 0 {
			if err := clearLists(&c, f.data); err != nil {
				probs = append(probs, Problem{File: f.path, Msg: parseMessage(err, f.data)})
				unreadable = true
				continue
			}
		}
		ps, syntax := decodeFile(&c, f.path, f.data, at, failed)
		probs = append(probs, ps...)
		unreadable = unreadable || syntax
	}
	// A file that did not parse left its settings out: what Validate would
	// say of the rest could be wrong.
	if !unreadable {
		if err := c.Validate(); err != nil {
			var ps Problems
			errors.As(err, &ps)
			// Validate walks some maps: sort by key first so that the
			// order is the same each run.
			sort.SliceStable(ps, func(i, j int) bool { return ps[i].Key < ps[j].Key })
			for _, p := range ps {
				if !failedUnder(failed, p.Key) {
					probs = append(probs, at.place(p, path))
				}
			}
		}
	}
	if len(probs) > 0 {
		sortProblems(probs, names)
		return Config{}, probs
	}
	return c, nil
}

type fileData struct {
	path string
	data []byte
}

// dropInData reads the drop-ins of path in Load's order, with replace's
// contents for the names it holds (a name not on disk is added in order).
func dropInData(path string, replace map[string][]byte) ([]fileData, error) {
	paths, err := DropIns(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(filepath.Dir(path), "config.d")
	for name := range replace {
		if p := filepath.Join(dir, name); !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	var out []fileData
	for _, p := range paths {
		data, ok := replace[filepath.Base(p)]
		if !ok {
			if data, err = os.ReadFile(p); err != nil {
				return nil, fmt.Errorf("config: %w", err)
			}
		}
		out = append(out, fileData{p, data})
	}
	return out, nil
}

// Origins says for each key that a file sets which file that is: the last
// of path and its drop-ins to set it, as Load merges them. Keys no file
// sets keep their default and are absent.
func Origins(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	files, err := dropInData(path, nil)
	if err != nil {
		return nil, err
	}
	files = append([]fileData{{path, data}}, files...)
	origin := map[string]string{}
	for _, f := range files {
		keys, err := Keys(f.data)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", f.path, err)
		}
		for k := range keys {
			origin[k] = f.path
		}
	}
	return origin, nil
}

// Flat is the configuration as dotted keys and their values as JSON would
// show them ("gpio.writes": true, "gpio.pins": [...]), with upstream
// tokens as their references, never a secret.
func (c Config) Flat() map[string]any {
	c.Upstreams = slices.Clone(c.Upstreams)
	for i := range c.Upstreams {
		c.Upstreams[i].Token = c.Upstreams[i].TokenRef()
	}
	data, err := c.Encode()
	if err != nil {
		return map[string]any{}
	}
	keys, err := Keys(data)
	if err != nil {
		return map[string]any{}
	}
	// Round-trip through JSON so values compare and print as a client sees them.
	b, _ := json.Marshal(keys)
	flat := map[string]any{}
	_ = json.Unmarshal(b, &flat)
	return flat
}

// JSONText is v as compact JSON, "" for nil (a key not set).
func JSONText(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// KeyChange is one key a change sets differently.
type KeyChange struct {
	Key  string `json:"key"`
	From string `json:"from"` // JSON text, "" when not set
	To   string `json:"to"`
}

// SwitchChange is a switch a change turns on or off in effect (a write
// switch counts only with its namespace on).
type SwitchChange struct {
	Key string `json:"key"` // "[gpio] writes"
	On  bool   `json:"on"`  // its effect after the change
}

// Diff is what changes from old to new: keys, sorted, and switches.
func Diff(old, new Config) ([]KeyChange, []SwitchChange) {
	a, b := old.Flat(), new.Flat()
	names := map[string]bool{}
	for k := range a {
		names[k] = true
	}
	for k := range b {
		names[k] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var changes []KeyChange
	for _, k := range keys {
		from, _ := json.Marshal(a[k])
		to, _ := json.Marshal(b[k])
		if !bytes.Equal(from, to) {
			changes = append(changes, KeyChange{Key: k, From: JSONText(a[k]), To: JSONText(b[k])})
		}
	}
	var sw []SwitchChange
	for _, s := range Switches() {
		if was, is := s.Effective(&old), s.Effective(&new); was != is {
			sw = append(sw, SwitchChange{Key: s.Key(), On: is})
		}
	}
	return changes, sw
}

// DiffHash is the SHA-256 of a diff's keys and values, "sha256:<hex>": what
// an apply is audited with and what binds a change token to one diff.
func DiffHash(changes []KeyChange) string {
	b, _ := json.Marshal(changes)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

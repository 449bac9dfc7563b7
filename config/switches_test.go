package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// notSwitches are the bool keys that gate no tool: they choose how
// something is done, not whether a tool may run. A new bool key must be
// either a row of the switches table or listed here.
var notSwitches = []string{"agent.expose_dotted_names", "audit.record_reads", "metrics.default_job",
	"http.tls", "http.insecure_plaintext"}

// fieldAt walks c by toml tags: "gpio.writes" is c.GPIO.Writes.
func fieldAt(c *Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, k := range strings.Split(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}
		}
		if v = fieldByTag(v, k); !v.IsValid() {
			return v
		}
	}
	return v
}

// Every row names a real bool key, points at that very field, and agrees
// with Default(); enabled switches own namespaces, write switches sit under
// their table's enabled switch.
func TestSwitchTable(t *testing.T) {
	if got := len(Switches()); got != int(numSwitches)-1 {
		t.Fatalf("%d switches, want %d", got, numSwitches-1)
	}
	keyRe := regexp.MustCompile(`^[a-z0-9]+\.[a-z_]+$`)
	seen := map[string]Switch{}
	d := Default()
	for _, s := range Switches() {
		row := switches[s]
		if !keyRe.MatchString(row.path) || row.ptr == nil || row.doc == "" {
			t.Errorf("switch %d: incomplete row %+v", s, row)
			continue
		}
		if o, dup := seen[row.path]; dup {
			t.Errorf("%s declared twice (%d and %d)", row.path, o, s)
		}
		seen[row.path] = s
		var c Config
		f := fieldAt(&c, row.path)
		if !f.IsValid() || f.Kind() != reflect.Bool {
			t.Errorf("%s: no bool field with that toml key", s.Path())
		} else if f.Addr().Interface().(*bool) != row.ptr(&c) {
			t.Errorf("%s: its accessor reads another field", s.Path())
		}
		if s.On(&d) != s.Default() {
			t.Errorf("%s: Default() has %v, the table %v", s.Key(), s.On(&d), s.Default())
		}
		enabled := strings.HasSuffix(row.path, ".enabled")
		switch {
		case enabled != (len(row.namespaces) > 0):
			t.Errorf("%s: only an enabled switch owns namespaces (%v)", s.Key(), row.namespaces)
		case !enabled && !row.write:
			t.Errorf("%s: a switch that is not a namespace's must be a write switch", s.Key())
		case !enabled && !s.Within().Valid():
			t.Errorf("%s: its table has no enabled switch", s.Key())
		case enabled && s.Within() != NoSwitch:
			t.Errorf("%s: Within = %s, want none", s.Key(), s.Within())
		}
	}
	names := map[string]bool{}
	for _, n := range Namespaces() {
		if !validUpstreamName(n.Name) || names[n.Name] {
			t.Errorf("namespace %q: duplicate or not a valid prefix", n.Name)
		}
		names[n.Name] = true
		if s, ok := NamespaceSwitch(n.Name); !ok || s != n.Switch {
			t.Errorf("NamespaceSwitch(%q) = %s, %v", n.Name, s, ok)
		}
	}
	if s, ok := NamespaceSwitch("hs4"); ok || s != NoSwitch {
		t.Errorf("NamespaceSwitch(hs4) = %s, %v; want not local", s, ok)
	}
	if NoSwitch.Valid() || !NoSwitch.On(&Config{}) || NoSwitch.Key() != "" || Switch(numSwitches).Valid() {
		t.Error("NoSwitch or an out-of-range switch behaves as a switch")
	}
}

// Every bool key of the file is a switch of the table or listed in
// notSwitches, so a switch added without a row fails here.
func TestEveryBoolKeyIsDeclared(t *testing.T) {
	var c Config
	top := reflect.TypeOf(c)
	for i := range top.NumField() {
		sec := top.Field(i)
		if sec.Type.Kind() != reflect.Struct {
			continue
		}
		table, _, _ := strings.Cut(sec.Tag.Get("toml"), ",")
		for j := range sec.Type.NumField() {
			f := sec.Type.Field(j)
			if f.Type.Kind() != reflect.Bool {
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			path := table + "." + key
			declared := slices.ContainsFunc(Switches(), func(s Switch) bool { return s.Path() == path })
			if declared == slices.Contains(notSwitches, path) {
				t.Errorf("%s: want exactly one of a switches row or an entry in notSwitches (row %v)", path, declared)
			}
		}
	}
}

// config.example.toml writes every switch of the table with its default,
// and every bool key it writes is a switch or listed in notSwitches.
func TestExampleHasEverySwitch(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		t.Fatal(err)
	}
	for _, s := range Switches() {
		table, key, _ := strings.Cut(s.Path(), ".")
		sec, _ := doc[table].(map[string]any)
		if v, ok := sec[key].(bool); !ok || v != s.Default() {
			t.Errorf("example: %s = %v, want %v", s.Key(), sec[key], s.Default())
		}
	}
	for table, v := range doc {
		sec, _ := v.(map[string]any)
		for key, val := range sec {
			path := table + "." + key
			if _, isBool := val.(bool); isBool && !slices.Contains(notSwitches, path) &&
				!slices.ContainsFunc(Switches(), func(s Switch) bool { return s.Path() == path }) {
				t.Errorf("example: bool key %s is not in the switches table", path)
			}
		}
	}
}

// Each write switch alone, with its table on, is what WritesOn reports; with
// its table's enabled switch off it no longer counts.
func TestWritesOnFollowsTable(t *testing.T) {
	for _, s := range Switches() {
		if !s.Write() {
			continue
		}
		c := Default()
		s.Set(&c, true)
		s.Within().Set(&c, true)
		if got := c.WritesOn(); !slices.Equal(got, []string{s.Key()}) {
			t.Errorf("%s on: WritesOn = %v", s.Key(), got)
		}
		if w := s.Within(); w.Valid() {
			w.Set(&c, false)
			if got := c.WritesOn(); len(got) != 0 {
				t.Errorf("%s on under %s off: WritesOn = %v", s.Key(), w.Key(), got)
			}
		}
	}
}

// Laptop mode switches every namespace and write on, whatever the base file says.
func TestLaptopTurnsEverySwitchOn(t *testing.T) {
	base := Default()
	for _, s := range Switches() {
		s.Set(&base, false)
	}
	c := LaptopFrom(base, t.TempDir(), "pi")
	for _, s := range Switches() {
		if !s.Effective(&c) {
			t.Errorf("laptop mode: %s is off", s.Key())
		}
	}
}

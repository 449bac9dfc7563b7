package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestProfilesParse(t *testing.T) {
	c, err := Parse([]byte(`
[roles]
users = { alice = "operate:sensors", bob = "admin:read-only", carol = "read:all", dave = "read" }
groups = { fleet = "read:hs4-reads" }

[profiles.sensors]
toolsets = ["system", "metrics", "gpio", "i2c", "sensors"]
read_only = true

[profiles.hs4-reads]
toolsets = ["hs4"]

[[upstream]]
name = "hs4"
url = "http://192.168.1.10:8080/mcp"
`))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := c.LookupProfile("sensors"); !ok || !p.ReadOnly || !reflect.DeepEqual(p.Toolsets, []string{"system", "metrics", "gpio", "i2c", "sensors"}) {
		t.Errorf("sensors: %+v %v", p, ok)
	}
	if p, ok := c.LookupProfile("hs4-reads"); !ok || p.ReadOnly || !p.AllowsNamespace("hs4") || p.AllowsNamespace("gpio") || !p.AllowsNamespace("change") {
		t.Errorf("hs4-reads: %+v %v", p, ok)
	}
	for name, want := range map[string]Profile{"": {}, "all": {}, "read-only": {ReadOnly: true}} {
		if p, ok := c.LookupProfile(name); !ok || !reflect.DeepEqual(p, want) {
			t.Errorf("built in %q: %+v %v", name, p, ok)
		}
	}
	if _, ok := c.LookupProfile("gone"); ok {
		t.Error("an undefined profile was found")
	}
	if got := c.ProfileNames(); !reflect.DeepEqual(got, []string{"all", "read-only", "hs4-reads", "sensors"}) {
		t.Errorf("ProfileNames = %v", got)
	}
	for s, want := range map[string][3]string{"operate:sensors": {"operate", "sensors", "ok"}, "read": {"read", "", "ok"}, "root:x": {"root", "x", ""}} {
		role, prof, ok := ParseGrant(s)
		if role != want[0] || prof != want[1] || ok != (want[2] == "ok") {
			t.Errorf("ParseGrant(%q) = %q %q %v", s, role, prof, ok)
		}
	}
	// The encoded config (laptop mode hands it to the helper) reads back.
	enc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(enc)
	if err != nil || !reflect.DeepEqual(back.Profiles, c.Profiles) {
		t.Errorf("encoded profiles do not read back: %v\n%s", err, enc)
	}
}

// Every bad profile or reference is an error naming the key, with a
// suggestion for a near miss.
func TestProfilesValidate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[profiles.s]\ntoolsets = [\"gpoi\"]\n", `profiles.s.toolsets: "gpoi" is not a namespace of the agent or an [[upstream]] name; did you mean "gpio"?`},
		{"[profiles.s]\ntoolsets = [\"weather\"]\n", `profiles.s.toolsets: "weather" is not a namespace`},
		{"[profiles.s]\ntoolsets = []\n", "profiles.s.toolsets: an empty list allows no tool"},
		{"[profiles.s]\ntoolsets = [\"gpio\", \"gpio\"]\n", `"gpio" is listed twice`},
		{"[profiles.s]\nread_only = \"yes\"\n", "read_only"},
		{"[profiles.s]\nreadonly = true\n", `unknown key "profiles.s.readonly"`},
		{"[profiles.all]\nread_only = true\n", `profiles.all: "all" is built in`},
		{"[profiles.read-only]\ntoolsets = [\"gpio\"]\n", `profiles.read-only: "read-only" is built in`},
		{"[profiles.Sensors]\nread_only = true\n", `profile name "Sensors"`},
		{"[roles]\nusers = { pi = \"operate:sensors\" }\n", `roles.users.pi: profile "sensors" is not defined: want all, read-only, or a [profiles.sensors] table`},
		{"[roles]\ngroups = { lab = \"read:\" }\n", `roles.groups.lab: profile "" is not defined`},
		{"[roles]\nusers = { pi = \"operate:read-onyl\" }\n", `did you mean "read-only"?`},
		{"[roles]\nusers = { pi = \"root:all\" }\n", `roles.users.pi: want one of read, operate, admin, or one and a profile ("read:sensors"), got "root"`},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %s", tc.in, err, tc.want)
		}
	}
	if err := Default().CheckProfile("sensors"); err == nil || !strings.Contains(err.Error(), `profile "sensors" is not defined`) {
		t.Errorf("CheckProfile of an undefined profile: %v", err)
	}
	if err := Default().CheckProfile("read-only"); err != nil {
		t.Errorf("CheckProfile(read-only): %v", err)
	}
}

// The README's profiles example (indented in its list item) is a valid
// drop-in, and its grants read as it says.
func TestReadmeProfilesExample(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "  ```toml\n  # /etc/raspi-mcp/config.d/profiles.toml\n")
	block, _, ok2 := strings.Cut(rest, "  ```")
	if !ok || !ok2 {
		t.Fatal("README has no profiles.toml example")
	}
	c, err := Parse([]byte(strings.ReplaceAll(block, "\n  ", "\n")))
	if err != nil {
		t.Fatalf("README's profiles.toml: %v", err)
	}
	if p, ok := c.LookupProfile("sensors"); !ok || !p.ReadOnly || p.AllowsNamespace("service") {
		t.Errorf("sensors: %+v %v", p, ok)
	}
	if role, prof, _ := ParseGrant(c.Roles.Users["kiosk"]); role != "admin" || prof != ProfileReadOnly {
		t.Errorf("kiosk: %s %s", role, prof)
	}
}

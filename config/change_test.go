package config

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every key of the tables that decide who may do what, found by walking the
// Config struct (so a key added later is covered), is refused over MCP.
func TestNoForbiddenKeyIsChangeable(t *testing.T) {
	forbidden := []string{"roles", "profiles", "http", "guard", "manage", "audit", "helper", "agent", "change", "upstream"}
	ct := reflect.TypeOf(Config{})
	seen := 0
	for i := range ct.NumField() {
		table, _, _ := strings.Cut(ct.Field(i).Tag.Get("toml"), ",")
		isForbidden := false
		for _, f := range forbidden {
			isForbidden = isForbidden || f == table
		}
		if Changeable(table) {
			t.Errorf("bare table %q is changeable", table)
		}
		ft := ct.Field(i).Type
		if ft.Kind() != reflect.Struct {
			if !isForbidden {
				t.Errorf("top-level key %q is not a table: decide whether it is changeable and list it here", table)
			}
			continue
		}
		for j := range ft.NumField() {
			key, _, _ := strings.Cut(ft.Field(j).Tag.Get("toml"), ",")
			full := table + "." + key
			if isForbidden {
				seen++
				if Changeable(full) {
					t.Errorf("%s is changeable over MCP; it decides who may do what", full)
				}
			}
		}
	}
	if seen < 15 {
		t.Errorf("walked only %d keys of the forbidden tables", seen)
	}
	for _, k := range []string{"process.protected_users", "roles.users.pi", "gpio", "gpio.nope", "gpio.writes.x", ""} {
		if Changeable(k) {
			t.Errorf("Changeable(%q) = true", k)
		}
	}
	// Every switch of a namespace other than [manage] can be changed: that
	// is what the tools are for.
	for _, s := range Switches() {
		table, _, _ := strings.Cut(s.Path(), ".")
		if want := table != "manage"; Changeable(s.Path()) != want {
			t.Errorf("Changeable(%s) = %v, want %v", s.Path(), !want, want)
		}
	}
	for _, k := range []string{"gpio.pins", "i2c.read", "service.allow", "metrics.max_jobs", "camera.public_url"} {
		if !Changeable(k) {
			t.Errorf("Changeable(%q) = false", k)
		}
	}
}

func candidateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "[gpio]\npins = [ { pin = 17, mode = \"output\", value = 0, name = \"relay\" } ]\n")
	writeFile(t, filepath.Join(dir, "config.d", "10-local.toml"), "[process]\nsignals = false\n")
	writeFile(t, MCPDropInPath(main), "[metrics]\nmax_jobs = 4\n")
	return main
}

func TestCheckCandidate(t *testing.T) {
	main := candidateDir(t)
	c, err := CheckCandidate(main, []byte("[gpio]\nwrites = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.GPIO.Writes || len(c.GPIO.Pins) != 1 {
		t.Errorf("merged gpio = %+v, want writes on and the main file's pin", c.GPIO)
	}
	if c.Metrics.MaxJobs != 8 {
		t.Errorf("max_jobs = %d: the candidate replaces the current %s, whose max_jobs = 4 must be gone", c.Metrics.MaxJobs, MCPDropIn)
	}
	for _, tc := range []struct {
		name, toml, key string
		value           string
		forbidden       bool
		reason          string
	}{
		{"roles", "[roles]\nusers = { mallory = \"admin\" }\n", "roles.users", `{"mallory":"admin"}`, true, "only on the device"},
		{"guard", "[guard]\nelicitation = \"off\"\n", "guard.elicitation", `"off"`, true, "only on the device"},
		{"manage", "[manage]\nupdates = true\n", "manage.updates", "true", true, "only on the device"},
		{"upstream", "[[upstream]]\nname = \"x\"\nurl = \"http://127.0.0.1:1\"\n", "upstream", "", true, "only on the device"},
		{"protected", "[process]\nprotected_users = []\n", "process.protected_users", "", true, "only on the device"},
		{"unknown key", "[gpio]\nwritez = true\n", "gpio.writez", "", true, "only on the device"},
		{"bad value", "[gpio]\nrevert = \"sideways\"\n", "gpio.revert", `"sideways"`, false, "want previous or inverse"},
		{"bad pin", "[gpio]\npins = [ { pin = 99, mode = \"output\" } ]\n", "gpio.pins[0].pin", "", false, "0..53"},
		{"bad type", "[gpio]\nwrites = \"yes\"\n", "gpio.writes", `"yes"`, false, "want true or false, got the string \"yes\""},
		{"bad toml", "[gpio\n", "", "", false, "not TOML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckCandidate(main, []byte(tc.toml))
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("err = %v, want a KeyError", err)
			}
			if ke.Key != tc.key || ke.Forbidden != tc.forbidden || !strings.Contains(ke.Error(), tc.reason) {
				t.Errorf("err = %+v (%v), want key %q forbidden %v mentioning %q", ke, ke, tc.key, tc.forbidden, tc.reason)
			}
			if tc.value != "" && ke.Value != tc.value {
				t.Errorf("value = %#v, want %#v", ke.Value, tc.value)
			}
		})
	}
	if _, err := CheckCandidate(main, []byte(strings.Repeat("#", MaxDropIn+1))); err == nil {
		t.Error("an oversized candidate was accepted")
	}
}

func TestOriginsAndDiff(t *testing.T) {
	main := candidateDir(t)
	o, err := Origins(main)
	if err != nil {
		t.Fatal(err)
	}
	if o["gpio.pins"] != main || o["process.signals"] != filepath.Join(filepath.Dir(main), "config.d", "10-local.toml") ||
		o["metrics.max_jobs"] != MCPDropInPath(main) {
		t.Errorf("origins = %v", o)
	}
	if _, ok := o["gpio.writes"]; ok {
		t.Error("gpio.writes has an origin though no file sets it")
	}
	old, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	next, err := CheckCandidate(main, []byte("[gpio]\nwrites = true\n[camera]\nenabled = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	keys, sw := Diff(old, next)
	var got []string
	for _, k := range keys {
		got = append(got, k.Key)
	}
	if strings.Join(got, ",") != "camera.enabled,gpio.writes,metrics.max_jobs" {
		t.Errorf("changed keys = %v", got)
	}
	if len(sw) != 2 || sw[0] != (SwitchChange{Key: "[gpio] writes", On: true}) || sw[1] != (SwitchChange{Key: "[camera] enabled", On: true}) {
		t.Errorf("switches = %+v", sw)
	}
	if DiffHash(keys) == DiffHash(keys[:1]) || !strings.HasPrefix(DiffHash(nil), "sha256:") {
		t.Error("diff hash does not tell diffs apart")
	}
	if k, s := Diff(old, old); len(k) != 0 || len(s) != 0 {
		t.Errorf("diff of a config with itself = %v %v", k, s)
	}
}

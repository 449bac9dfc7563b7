package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// What the README tells an owner to do: leave the packaged config.toml alone
// and turn things on in config.d/, where tables merge and arrays replace.
func TestDropInsMergeInNameOrder(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "[roles]\ngroups = { raspi-mcp = \"read\" }\n[gpio]\npins = [ { pin = 4, mode = \"input\", pull = \"up\", name = \"button\" } ]\n")
	writeFile(t, filepath.Join(dir, "config.d", "20-later.toml"), "[roles]\nusers = { pi = \"admin\" }\n")
	writeFile(t, filepath.Join(dir, "config.d", "10-local.toml"),
		"[roles]\nusers = { pi = \"operate\", bob = \"read\" }\n[gpio]\nwrites = true\npins = [ { pin = 17, mode = \"output\", value = 0 } ]\n")
	writeFile(t, filepath.Join(dir, "config.d", "notes.txt"), "not toml, not read")

	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Roles.Users; got["pi"] != "admin" || got["bob"] != "read" || len(got) != 2 {
		t.Errorf("users = %v, want pi from 20-later over 10-local, bob kept", got)
	}
	if c.Roles.Groups["raspi-mcp"] != "read" {
		t.Errorf("groups from config.toml lost: %v", c.Roles.Groups)
	}
	if !c.GPIO.Writes || len(c.GPIO.Pins) != 1 || c.GPIO.Pins[0] != (Pin{Pin: 17, Mode: "output"}) {
		t.Errorf("gpio = writes %v pins %+v, want writes and only pin 17, with nothing of pin 4", c.GPIO.Writes, c.GPIO.Pins)
	}
	files, _ := DropIns(main)
	if len(files) != 2 || !strings.HasSuffix(files[0], "10-local.toml") {
		t.Errorf("DropIns = %v", files)
	}
}

func TestDropInErrorsNameTheFile(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key": "[gpio]\nwrtes = true\n",
		"syntax":      "[gpio\n",
		"bad value":   "[roles]\nusers = { pi = \"root\" }\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			main := filepath.Join(dir, "config.toml")
			writeFile(t, main, "")
			writeFile(t, filepath.Join(dir, "config.d", "local.toml"), body)
			_, err := Load(main)
			if err == nil {
				t.Fatal("accepted")
			}
			if name != "bad value" && !strings.Contains(err.Error(), "local.toml") {
				t.Errorf("error does not name the drop-in: %v", err)
			}
		})
	}
}

func TestWritesOn(t *testing.T) {
	c := Default()
	if got := c.WritesOn(); len(got) != 0 {
		t.Errorf("defaults have writes on: %v", got)
	}
	c.GPIO.Writes, c.System.Reboot, c.Camera.Enabled = true, true, true
	c.I2C.Writes, c.I2C.Enabled = true, false // a write switch under a namespace that is off
	if got := strings.Join(c.WritesOn(), ", "); got != "[system] reboot, [gpio] writes, [camera] enabled" {
		t.Errorf("WritesOn = %s", got)
	}
}

// An upstream declared in a drop-in never inherits the token of the entry
// at the same position in config.toml.
func TestDropInUpstreamsDoNotInheritTokens(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "[[upstream]]\nname = \"hs4\"\nurl = \"http://127.0.0.1:8080/mcp\"\ntoken = \"env:HS4\"\n")
	writeFile(t, filepath.Join(dir, "config.d", "local.toml"), "[[upstream]]\nname = \"hook\"\nurl = \"http://127.0.0.1:9090/mcp\"\n")
	c, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "hook" || c.Upstreams[0].Token != "" {
		t.Fatalf("upstreams = %+v", c.Upstreams)
	}
}

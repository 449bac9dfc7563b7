package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Flags work before and after the positional arguments; "--" ends them.
func TestParseFlagsAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"--json", "gpio_read_pin", "pin=17"},
		{"gpio_read_pin", "--json", "pin=17"},
		{"gpio_read_pin", "pin=17", "--json"},
	} {
		c := newCommand("call", "TOOL", "test")
		asJSON := c.fs.Bool("json", false, "")
		pos, err := c.parse(args)
		if err != nil || !*asJSON || !reflect.DeepEqual(pos, []string{"gpio_read_pin", "pin=17"}) {
			t.Errorf("%v: pos %v json %v err %v", args, pos, *asJSON, err)
		}
	}
	c := newCommand("call", "TOOL", "test")
	asJSON := c.fs.Bool("json", false, "")
	pos, err := c.parse([]string{"x", "--", "--json"})
	if err != nil || *asJSON || !reflect.DeepEqual(pos, []string{"x", "--json"}) {
		t.Errorf("after --: pos %v json %v err %v", pos, *asJSON, err)
	}
}

// --help is help (exit 0), never a file name; a bad flag is a usage error (exit 2).
func TestHelpAndBadFlags(t *testing.T) {
	var ee *exitError
	if err := cmdConfig([]string{"check", "--help"}); !errors.As(err, &ee) || ee.code != 0 {
		t.Errorf("config check --help: %v, want help with exit 0", err)
	}
	if err := cmdConfig([]string{"check", "--no-such-flag", "x"}); !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("config check --no-such-flag: %v, want exit 2", err)
	}
	if err := cmdConfig(nil); !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("config without check: %v, want exit 2", err)
	}
	if err := cmdAudit([]string{"--help"}); !errors.As(err, &ee) || ee.code != 0 {
		t.Errorf("audit --help: %v, want exit 0", err)
	}
	if err := cmdAudit([]string{"frobnicate"}); !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("audit frobnicate: %v, want exit 2", err)
	}
}

// Each command's help names its arguments and writes flags with two dashes.
func TestUsageWritesDoubleDashes(t *testing.T) {
	c := newCommand("serve", "[--dir DIR]", "run")
	c.fs.String("dir", "", "the `DIR` of it")
	c.fs.Int("n", 1, "`N` records")
	var b strings.Builder
	c.usage(&b)
	for _, want := range []string{"raspi-mcp serve: run", "usage: raspi-mcp serve [--dir DIR]", "  --dir DIR", "  -n N"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, b.String())
		}
	}
}

// key=value arguments take the type the tool's schema gives the key.
func TestKeyValueArguments(t *testing.T) {
	tool := &mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"pin":     map[string]any{"type": "integer"},
		"value":   map[string]any{"type": "string", "enum": []any{"high", "low"}},
		"dry_run": map[string]any{"type": "boolean"},
		"metrics": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"data":    map[string]any{"type": "array", "items": map[string]any{"type": "integer"}},
		"filter":  map[string]any{"type": "object"},
	}}}
	got, err := parseArguments(tool, []string{"pin=17", "value=high", "dry_run=true", "metrics=cpu_percent,load1", "data=1,2", `filter={"status":["running"]}`})
	want := map[string]any{"pin": 17.0, "value": "high", "dry_run": true, "metrics": []any{"cpu_percent", "load1"},
		"data": []any{1.0, 2.0}, "filter": map[string]any{"status": []any{"running"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v\nwant %v", got, err, want)
	}
	if got, err := parseArguments(tool, []string{`{"pin": 4}`}); err != nil || got["pin"] != 4.0 {
		t.Errorf("JSON object: %v %v", got, err)
	}
	for _, bad := range [][]string{{"pin=seventeen"}, {"dry_run=maybe"}, {"novalue"}} {
		if _, err := parseArguments(tool, bad); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestClosestToolNames(t *testing.T) {
	var tools []*mcp.Tool
	for _, n := range []string{"gpio_write_pin", "gpio_read_pin", "gpio_list_pins", "system_reboot"} {
		tools = append(tools, &mcp.Tool{Name: n})
	}
	if got := closest("gpio_write_pn", tools, 3); len(got) == 0 || got[0] != "gpio_write_pin" {
		t.Errorf("gpio_write_pn: %v", got)
	}
	if got := closest("reboot", tools, 3); !reflect.DeepEqual(got, []string{"system_reboot"}) {
		t.Errorf("reboot: %v", got)
	}
	if got := closest("zzzzzzzzzzzzzzzzzzzzzzz", tools, 3); len(got) != 0 {
		t.Errorf("far off: %v", got)
	}
}

// Client commands find laptop mode without --dir, and the hint for a dead
// agent says what is actually wrong instead of repeating what the user did.
func TestFindsLaptopModeAndHintsHonestly(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("HOME", t.TempDir()) // macOS keeps laptop mode under HOME
	w := where{cfg: filepath.Join(t.TempDir(), "none.toml")}
	if _, err := os.Stat(w.fileConfig().Agent.Socket); err == nil {
		t.Skip("this machine runs a real agent")
	}
	_, err := w.dial()
	if err == nil || !strings.Contains(err.Error(), "raspi-mcp serve --sim") || !strings.Contains(err.Error(), "not running") {
		t.Errorf("nothing running anywhere: %v", err)
	}
	dir := simDir("")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := laptopConfig(config.Default(), ""); err != nil {
		t.Fatal(err)
	}
	if got := w.agentSocket(); got != filepath.Join(dir, "mcp.sock") {
		t.Errorf("socket %s, want the laptop-mode one in %s", got, dir)
	}
	_, err = w.dial()
	if err == nil || !strings.Contains(err.Error(), "not running any more") || !strings.Contains(err.Error(), dir) {
		t.Errorf("dead laptop-mode agent: %v", err)
	}
	w.dir = filepath.Join(t.TempDir(), "elsewhere")
	_, err = w.dial()
	if err == nil || !strings.Contains(err.Error(), "--dir "+w.dir) {
		t.Errorf("--dir with no agent: %v", err)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
)

// tokenConfig writes a config whose [http] tokens is a file in a temp dir.
func tokenConfig(t *testing.T) (cfg, tokens string) {
	t.Helper()
	dir := t.TempDir()
	cfg, tokens = filepath.Join(dir, "config.toml"), filepath.Join(dir, "tokens.toml")
	if err := os.WriteFile(cfg, []byte("[http]\ntokens = \""+tokens+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, tokens
}

func token(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = runToken(args, &o, &e)
	return o.String(), e.String(), err
}

// create prints the secret alone on stdout, and it verifies; list shows the
// token without it; revoke refuses its next use.
func TestTokenCreateListRevoke(t *testing.T) {
	cfg, path := tokenConfig(t)
	out, info, err := token(t, "create", "laptop", "--role", "operate", "--expires", "90d", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(secret, bearer.Prefix) || strings.Contains(secret, "\n") {
		t.Fatalf("stdout %q, want the secret alone", out)
	}
	if !strings.Contains(info, "Authorization: Bearer") || !strings.Contains(info, `"laptop"`) {
		t.Errorf("no word on how to use it: %q", info)
	}
	f := &bearer.File{Path: path}
	if tok, err := f.Verify(secret, time.Now()); err != nil || tok.Role != "operate" {
		t.Fatalf("verify: %+v %v", tok, err)
	}
	if _, _, err := token(t, "create", "--config", cfg, "--role", "metrics", "prom"); err != nil {
		t.Fatal(err)
	}

	out, _, err = token(t, "list", "--config", cfg)
	if err != nil || !strings.Contains(out, "NAME") || !strings.Contains(out, "laptop") || !strings.Contains(out, "never") || strings.Contains(out, secret) {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, _, err = token(t, "list", "--json", "--config", cfg)
	var list []tokenJSON
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if l := list[0]; l.Name != "laptop" || l.Role != "operate" || l.Expires == nil || l.Expired || list[1].Expires != nil {
		t.Errorf("list --json: %+v", list)
	}

	if out, _, err := token(t, "revoke", "laptop", "--config", cfg); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %v %s", err, out)
	}
	if _, err := f.Verify(secret, time.Now()); !errors.Is(err, bearer.ErrUnknown) {
		t.Errorf("after revoke: %v", err)
	}
}

// Usage errors exit 2; bad values are errors naming them; neither writes.
func TestTokenRefusals(t *testing.T) {
	cfg, path := tokenConfig(t)
	if _, _, err := token(t, "create", "keep", "--role", "read", "--config", cfg); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	var ee *exitError
	for _, args := range [][]string{
		{"create", "--config", cfg, "--role", "read"},
		{"create", "x", "--config", cfg},
		{"create", "x", "y", "--role", "read", "--config", cfg},
		{"create", "x", "--role", "read", "--no-such-flag", "--config", cfg},
		{"revoke", "--config", cfg},
		{"list", "extra", "--config", cfg},
		{"frobnicate"},
		{},
	} {
		if _, _, err := token(t, args...); !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%q: %v, want a usage error (exit 2)", args, err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "Bad_Name", "--role", "read"}, `"Bad_Name"`},
		{[]string{"create", "x", "--role", "root"}, `role "root"`},
		{[]string{"create", "x", "--role", "read", "--expires", "forever"}, `"forever"`},
		{[]string{"create", "keep", "--role", "admin"}, `"keep" exists already`},
		{[]string{"revoke", "nobody"}, `no token named "nobody"`},
	} {
		_, _, err := token(t, append(c.args, "--config", cfg)...)
		if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %s", c.args, err, c.want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("a refused command changed the file")
	}
	// A --config that does not load is an error, not the default file.
	if _, _, err := token(t, "list", "--config", filepath.Join(t.TempDir(), "none.toml")); err == nil {
		t.Error("list with a missing --config file: no error")
	}
	if err := runToken([]string{"--help"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &ee) || ee.code != 0 {
		t.Errorf("token --help: %v, want exit 0", err)
	}
}

// --profile narrows a token to a profile the config defines (or a built-in
// one); list shows it; a profile the config does not define, or one on a
// metrics token, is refused and writes nothing.
func TestTokenProfile(t *testing.T) {
	cfg, path := tokenConfig(t)
	conf, _ := os.ReadFile(cfg)
	conf = append(conf, "\n[profiles.sensors]\ntoolsets = [\"gpio\", \"i2c\"]\nread_only = true\n"...)
	if err := os.WriteFile(cfg, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, info, err := token(t, "create", "fleet", "--role", "operate", "--profile", "sensors", "--config", cfg)
	if err != nil || !strings.Contains(info, "profile sensors") {
		t.Fatalf("create --profile sensors: %v %s", err, info)
	}
	if tok, err := (&bearer.File{Path: path}).Verify(strings.TrimSpace(out), time.Now()); err != nil || tok.Profile != "sensors" || tok.Role != "operate" {
		t.Fatalf("verify: %+v %v", tok, err)
	}
	for _, args := range [][]string{{"create", "ro", "--role", "admin", "--profile", "read-only"}, {"create", "wide", "--role", "read", "--profile", "all"}} {
		if _, _, err := token(t, append(args, "--config", cfg)...); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	out, _, err = token(t, "list", "--config", cfg)
	if err != nil || !strings.Contains(out, "PROFILE") || !regexpLine(out, `fleet\s+operate\s+sensors`) || !regexpLine(out, `ro\s+admin\s+read-only`) || !regexpLine(out, `wide\s+read\s+all`) {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, _, _ = token(t, "list", "--json", "--config", cfg)
	var list []tokenJSON
	if json.Unmarshal([]byte(out), &list) != nil || len(list) != 3 || list[0].Profile != "sensors" || list[2].Profile != "all" {
		t.Errorf("list --json: %s", out)
	}
	before, _ := os.ReadFile(path)
	if bytes.Count(before, []byte("profile =")) != 2 {
		t.Errorf("the file keeps a profile for fleet and ro only:\n%s", before)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "x", "--role", "read", "--profile", "sensor"}, `--profile: profile "sensor" is not defined: want all, read-only, sensors, or a [profiles.sensor] table; did you mean "sensors"?`},
		{[]string{"create", "x", "--role", "metrics", "--profile", "sensors"}, "a metrics token calls no tool"},
	} {
		if _, _, err := token(t, append(c.args, "--config", cfg)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %s", c.args, err, c.want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("a refused create changed the file")
	}
}

// regexpLine reports whether some line of s matches re.
func regexpLine(s, re string) bool {
	return regexp.MustCompile(`(?m)^` + re).MatchString(s)
}

// Without --dir or --config, token finds the laptop-mode agent as every
// other command does (issue 32: it went for /etc/raspi-mcp/tokens.toml and
// failed on its lock), and writes the token file that agent reads.
func TestTokenFindsLaptopAgent(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("HOME", t.TempDir()) // macOS keeps laptop mode under HOME
	if _, err := os.Stat(config.Default().Agent.Socket); err == nil {
		t.Skip("this machine runs a real agent: token goes to it")
	}
	cfg, err := laptopConfig(config.Default(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(simDir(""), "tokens.toml")
	if cfg.HTTP.Tokens != want {
		t.Fatalf("laptop config's token file %s, want %s", cfg.HTTP.Tokens, want)
	}
	out, info, err := token(t, "create", "laptop", "--role", "read")
	if err != nil {
		t.Fatalf("token create without --dir in laptop mode: %v", err)
	}
	if !strings.Contains(info, want) {
		t.Errorf("create does not say where the token is: %q", info)
	}
	if tok, err := (&bearer.File{Path: want}).Verify(strings.TrimSpace(out), time.Now()); err != nil || tok.Role != "read" {
		t.Fatalf("the laptop agent's file does not hold it: %+v %v", tok, err)
	}
	if out, _, err := token(t, "list"); err != nil || !strings.Contains(out, "laptop") {
		t.Errorf("list without --dir: %v\n%s", err, out)
	}
	if out, _, err := token(t, "revoke", "laptop"); err != nil || !strings.Contains(out, "revoked") {
		t.Errorf("revoke without --dir: %v %s", err, out)
	}
}

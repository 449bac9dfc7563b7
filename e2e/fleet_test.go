package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Pi behind Pi: a second agent's HTTP endpoint, on TLS with the
// certificate it made itself, mounted in the first as an [[upstream]]
// with a token file and the fingerprint its `raspi-mcp status` shows. One
// session to the first reaches the second's simulated board under the
// second's policy (an operate token there: a pin write runs, a shutdown the
// first lets through is refused by the second), and each of those calls is
// in both audit trails. A wrong fingerprint mounts nothing.
func TestPiBehindPi(t *testing.T) {
	tlsConf := filepath.Join(t.TempDir(), "back.toml")
	if err := os.WriteFile(tlsConf, []byte("[http]\ntls = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	back := startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0", "--config", tlsConf)
	backURL := waitURL(t, back)
	out, _ := back.cli(t, "status", "--json")
	var st struct {
		Status struct {
			HTTP struct {
				Fingerprint string `json:"tls_fingerprint"`
			} `json:"http"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !strings.HasPrefix(st.Status.HTTP.Fingerprint, "sha256:") || !strings.HasPrefix(backURL, "https://") {
		t.Fatalf("back Pi: no TLS endpoint with a fingerprint in status (%v):\n%s", err, out)
	}
	tokenFile := filepath.Join(t.TempDir(), "back.token")
	if err := os.WriteFile(tokenFile, []byte(token(t, back, "front", "operate")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	front := func(name, fingerprint string) *sim {
		conf := filepath.Join(t.TempDir(), "front.toml")
		toml := "[[upstream]]\nname = \"" + name + "\"\nurl = \"" + backURL + "\"\ntoken = \"file:" + tokenFile +
			"\"\ntls_fingerprint = \"" + fingerprint + "\"\ntimeout = \"20s\"\n"
		if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		return startSimIn(t, t.TempDir(), "--config", conf)
	}
	f := front("pi2", st.Status.HTTP.Fingerprint)
	cs := f.session(t)
	waitTools(t, cs, "pi2_system_get_basic_info", "pi2_gpio_write_pin")

	res, m := call(t, cs, "pi2_system_get_basic_info", map[string]any{})
	if res.IsError || m["hostname"] == nil || res.Meta["upstream"] != "pi2" {
		t.Fatalf("basic info through the front Pi: %v %v", res.Meta, m)
	}
	res, _ = call(t, cs, "pi2_gpio_write_pin", map[string]any{"pin": 17, "value": "high", "confirm": true, "reason": "e2e"})
	if res.IsError {
		t.Fatalf("write through the front Pi: %s", textOf(res))
	}
	if _, m := call(t, cs, "pi2_gpio_read_pin", map[string]any{"pin": 17}); m["value"] != "high" && m["value"] != 1.0 {
		t.Fatalf("the back Pi's pin 17 after the write: %v", m)
	}
	// The back Pi lists an operate token no admin tool (lists are shaped
	// by policy), so the front mounts no shutdown of it at all.
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Name == "pi2_system_shutdown" {
			t.Fatal("the front mounts the back Pi's shutdown for an operate token")
		}
	}
	frontTail, _ := f.cli(t, "audit", "tail", "-n", "10")
	backTail, _ := back.cli(t, "audit", "tail", "-n", "10")
	for _, tool := range []string{"gpio_write_pin"} {
		dotted := strings.Replace(tool, "_", ".", 1)
		if !strings.Contains(frontTail, "pi2."+tool) || !strings.Contains(backTail, dotted) {
			t.Fatalf("%s missing from an audit trail:\nfront:\n%s\nback:\n%s", tool, frontTail, backTail)
		}
	}
	if !strings.Contains(backTail, "token:front") {
		t.Fatalf("the back Pi does not name the front's token:\n%s", backTail)
	}
	if out, code := back.cli(t, "audit", "verify"); code != 0 {
		t.Fatalf("back audit verify: %s", out)
	}

	// Another certificate's fingerprint: the handshake fails, no tool is mounted.
	wrong := "sha256:" + strings.Repeat("ab", 32)
	g := front("pi3", wrong)
	var status string
	for deadline := time.Now().Add(hangGuard); !strings.Contains(status, "pins "+wrong); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("status never named the refused pin:\n%s", status)
		}
		status, _ = g.cli(t, "status", "--json")
	}
	gs := g.session(t)
	lt, err := gs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if strings.HasPrefix(tl.Name, "pi3_") {
			t.Fatalf("a tool of an upstream with the wrong pin is mounted: %s\n%s", tl.Name, status)
		}
	}
}

package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
	"github.com/raspi-mcp/raspi-mcp/internal/webguard"
	"github.com/raspi-mcp/raspi-mcp/pairing"
)

func pair(t *testing.T, env pairEnv, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = runPair(args, &o, &e, false, env)
	return o.String(), e.String(), err
}

func TestPairAddress(t *testing.T) {
	host := func() (string, error) { return "Kitchen", nil }
	for _, c := range []struct {
		h       config.HTTP
		address string
		want    string // or the error's words
	}{
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443", Names: []string{"kitchen.local"}}, "", "kitchen.local:8443"},
		{config.HTTP{TLS: true, Listen: "[::]:8443", Names: []string{"KITCHEN.local"}}, "", "kitchen.local:8443"},
		{config.HTTP{TLS: true, Listen: "192.168.1.5:8443"}, "", "192.168.1.5:8443"},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443"}, "10.0.0.7:443", "10.0.0.7:443"},
		{config.HTTP{TLS: true}, "[fe80::1]:8443", "[fe80::1]:8443"},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443", Names: []string{"pi.example"}}, "pi.example:8443", "pi.example:8443"},
		{config.HTTP{TLS: true, Listen: "127.0.0.1:8443"}, "", "127.0.0.1:8443"},
		{config.HTTP{Listen: "127.0.0.1:8443"}, "", "tls = true"},
		{config.HTTP{TLS: true}, "", "listen is empty"},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443"}, "", `add it to [http] names (names = ["kitchen.local"])`},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443"}, "pi.example:8443", "add it to [http] names"},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443"}, "0.0.0.0:8443", "name the Pi as the laptop reaches it"},
		{config.HTTP{TLS: true, Listen: "0.0.0.0:8443"}, "pi.example", "want HOST:PORT"},
	} {
		got, err := pairAddress(c.h, c.address, host)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("pairAddress(%+v, %q) = %q, want %q", c.h, c.address, got, c.want)
		}
	}
}

// pairConfig writes a config for pair whose token file, state (and so the
// self-signed certificate's place) are in a temp dir.
func pairConfig(t *testing.T, http string) (cfg, tokens string) {
	t.Helper()
	dir := t.TempDir()
	cfg, tokens = filepath.Join(dir, "config.toml"), filepath.Join(dir, "tokens.toml")
	body := "[agent]\nstate = \"" + filepath.Join(dir, "state.db") + "\"\n[http]\ntokens = \"" + tokens + "\"\n" + http
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, tokens
}

// Each refusal names what to do and makes no token.
func TestPairRefuses(t *testing.T) {
	host := pairEnv{hostname: func() (string, error) { return "kitchen", nil }}
	for _, c := range []struct {
		http string
		args []string
		want string
	}{
		{"listen = \"127.0.0.1:8443\"\n", nil, "Connect over HTTP"},
		{"tls = true\n", nil, "listen is empty"},
		{"tls = true\nlisten = \"0.0.0.0:8443\"\n", nil, "[http] names"},
		// Nothing answers on port 1 and the agent made no certificate yet.
		{"tls = true\nlisten = \"127.0.0.1:1\"\n", nil, "no certificate yet"},
		{"tls = true\nlisten = \"127.0.0.1:1\"\n", []string{"--role", "metrics"}, "want read, operate or admin"},
		{"tls = true\nlisten = \"127.0.0.1:1\"\n", []string{"--profile", "nosuch"}, "--profile"},
		{"tls = true\nlisten = \"127.0.0.1:1\"\n", []string{"--expires", "soon"}, "expiry"},
	} {
		cfg, tokens := pairConfig(t, c.http)
		args := append([]string{"laptop", "--role", "operate", "--config", cfg}, c.args...)
		_, _, err := pair(t, host, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q with %q: %v, want %q", c.http, c.args, err, c.want)
		}
		if _, err := os.Stat(tokens); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q with %q: a token file was written", c.http, c.args)
		}
	}
	cfg, _ := pairConfig(t, "tls = true\n")
	for _, args := range [][]string{{"--role", "read", "--config", cfg}, {"laptop", "--config", cfg}, {"a", "b", "--role", "read", "--config", cfg}} {
		var ee *exitError
		if _, _, err := pair(t, host, args...); !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

var httpsURL = regexp.MustCompile(`MCP over HTTP: https://(127\.0\.0\.1:\d+)/mcp`)

// startTLSSim starts `raspi-mcp serve --sim` with the HTTP endpoint on
// TLS at a free loopback port and returns its directory and HOST:PORT.
func startTLSSim(t *testing.T) (dir, addr string) {
	t.Helper()
	bin, err := cliBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	conf := filepath.Join(t.TempDir(), "tls.toml")
	if err := os.WriteFile(conf, []byte("[http]\ntls = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	log := startServe(t, bin, nil, "--dir", dir, "--config", conf, "--http", "127.0.0.1:0")
	deadline := time.Now().Add(2 * time.Minute) // a hang guard, not a speed requirement
	for {
		if m := httpsURL.FindStringSubmatch(log.String()); m != nil {
			return dir, m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sim agent printed no https URL in 2 minutes:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// post sends an MCP initialize to url over TLS pinned to fingerprint with
// the token, and returns the status and body.
func post(t *testing.T, url, fingerprint, token string) (int, string, error) {
	t.Helper()
	tc, err := pairing.PinnedTLS(fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pair-test","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	cl := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tc}}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Against a running laptop-mode agent on TLS: pair prints, alone on
// stdout, a line that decodes to the certificate the agent serves and a
// token it accepts over a connection pinned to that fingerprint, with the
// role and profile asked for; pairing again rotates (the old token is
// refused, and the laptop's explanation says so); a wrong pin fails the
// handshake.
func TestPairAgainstSimAgent(t *testing.T) {
	dir, addr := startTLSSim(t)
	env := pairEnv{hostname: func() (string, error) { return "unused", nil }}
	out, info, err := pair(t, env, "laptop", "--role", "read", "--profile", "read-only", "--expires", "90d", "--dir", dir, "--address", addr)
	if err != nil {
		t.Fatalf("pair: %v\n%s", err, info)
	}
	l, err := pairing.Decode(out)
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("stdout %q: %v", out, err)
	}
	certFP, err := certFileFingerprint(filepath.Join(dir, "http-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Fingerprint != certFP || l.URL != "https://"+addr+"/mcp" || l.TokenName != "laptop" || l.Role != "read" || l.Profile != "read-only" {
		t.Errorf("line: %+v, want the fingerprint %s", l, certFP)
	}
	if d := time.Until(l.Expires); d < 89*24*time.Hour || d > 91*24*time.Hour {
		t.Errorf("expires %v", l.Expires)
	}
	if strings.Contains(info, l.Token) || !strings.Contains(info, "raspi-mcp-laptop pair") || !strings.Contains(info, "█") {
		t.Errorf("stderr: the token, or no instructions or code:\n%s", info)
	}
	for _, line := range strings.Split(info, "\n") {
		if n := len([]rune(line)); n > 80 && strings.ContainsAny(line, "█▀▄") {
			t.Errorf("a QR line of %d columns", n)
		}
	}
	toks, err := (&bearer.File{Path: filepath.Join(dir, "tokens.toml")}).List()
	if err != nil || len(toks) != 1 || toks[0].Role != "read" || toks[0].Profile != "read-only" {
		t.Errorf("token file: %+v %v", toks, err)
	}

	if st, body, err := post(t, l.URL, l.Fingerprint, l.Token); err != nil || st != http.StatusOK {
		t.Fatalf("the paired token: %d %v\n%s", st, err, body)
	}
	wrong := "sha256:" + strings.Repeat("00", 32)
	if _, _, err := post(t, l.URL, wrong, l.Token); !errors.Is(err, pairing.ErrFingerprint) {
		t.Errorf("a wrong pin: %v", err)
	}

	out, info, err = pair(t, env, "laptop", "--role", "operate", "--dir", dir, "--address", addr)
	if err != nil || !strings.Contains(info, "rotated") {
		t.Fatalf("pair again: %v\n%s", err, info)
	}
	l2, err := pairing.Decode(out)
	if err != nil || l2.Token == l.Token || l2.Role != "operate" || !l2.Expires.IsZero() {
		t.Fatalf("second line: %+v %v", l2, err)
	}
	st, body, err := post(t, l.URL, l.Fingerprint, l.Token)
	if err != nil || st != http.StatusUnauthorized || pairing.ExplainRefusal(st, body) != pairing.Revoked {
		t.Errorf("the rotated token: %d %v %q: %q", st, err, body, pairing.ExplainRefusal(st, body))
	}
	if st, body, err := post(t, l2.URL, l2.Fingerprint, l2.Token); err != nil || st != http.StatusOK {
		t.Errorf("the new token: %d %v\n%s", st, err, body)
	}
	if toks, _ := (&bearer.File{Path: filepath.Join(dir, "tokens.toml")}).List(); len(toks) != 1 {
		t.Errorf("%d tokens after rotation, want 1", len(toks))
	}
}

// With the agent down, the fingerprint is the certificate file's: the
// owner's ([http] tls_cert) or the self-signed one beside the state file,
// with a warning that says so.
func TestPairFingerprintFromFile(t *testing.T) {
	dir := t.TempDir()
	cert, err := webguard.SelfSigned(dir, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := webguard.Fingerprint(cert.Certificate[0])
	for _, cfg := range []config.Config{
		{Agent: config.Agent{State: filepath.Join(dir, "state.db")}, HTTP: config.HTTP{TLS: true}},
		{Agent: config.Agent{State: "/nonexistent/state.db"}, HTTP: config.HTTP{TLS: true, TLSCert: filepath.Join(dir, webguard.CertFile)}},
	} {
		fp, warn, err := pairFingerprint(cfg, "127.0.0.1:1")
		if err != nil || fp != want || !strings.Contains(warn, "does not answer") {
			t.Errorf("%+v: %q %q %v, want %s", cfg.HTTP, fp, warn, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pairFingerprint(config.Config{HTTP: config.HTTP{TLS: true, TLSCert: filepath.Join(dir, "junk.pem")}}, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("junk certificate: %v", err)
	}
}

package e2e

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// laptopBin builds raspi-mcp-laptop beside the other binaries, once.
func laptopBin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(bin, "raspi-mcp-laptop")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	// In CI, the binary the desktop bundle carries: .ci/run builds the
	// bundle from this commit right before make test, so the tests drive
	// what a person installs. Elsewhere a bundle in dist/ may be older than
	// the tree, so the tests build their own.
	if os.Getenv("CI") == "true" {
		bundle, _ := filepath.Abs("../dist/raspi-mcp.mcpb")
		if err := extractFromBundle(bundle, "server/linux-"+runtime.GOARCH+"/raspi-mcp-laptop", p); err != nil {
			t.Fatalf("the bundle's laptop binary: %v (.ci/run runs make mcpb before make test)", err)
		}
		t.Logf("raspi-mcp-laptop from %s", bundle)
		return p
	}
	cmd := exec.Command("go", "build", "-o", p, "../cmd/raspi-mcp-laptop")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build raspi-mcp-laptop: %v\n%s", err, out)
	}
	return p
}

// extractFromBundle copies the file name of the zip bundle to dst, executable.
func extractFromBundle(bundle, name, dst string) error {
	z, err := zip.OpenReader(bundle)
	if err != nil {
		return err
	}
	defer z.Close()
	f, err := z.Open(name)
	if err != nil {
		return fmt.Errorf("%s: %w", bundle, err)
	}
	defer f.Close()
	out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, f); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}

// laptopSession connects the go-sdk client through raspi-mcp-laptop ARGS
// in one protocol era ("" for the newest), with env added.
func laptopSession(t *testing.T, era string, env []string, args ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(laptopBin(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-laptop", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connect through raspi-mcp-laptop %v: %v\nstderr:\n%s", args, err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// wantFallback checks that a session reached only the laptop's fallback,
// and that the reason the client sees (the instructions, the one tool's
// description, a call's error) names every part of want.
func wantFallback(t *testing.T, cs *mcp.ClientSession, want ...string) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "raspi_mcp_unavailable" {
		t.Fatalf("tools: want only raspi_mcp_unavailable, got %d: %v", len(tools.Tools), tools.Tools)
	}
	res, m := call(t, cs, "system_get_health_snapshot", map[string]any{})
	instructions := cs.InitializeResult().Instructions
	for _, w := range want {
		if !strings.Contains(instructions, w) || !strings.Contains(tools.Tools[0].Description, w) {
			t.Errorf("the reason lacks %q:\ninstructions: %s\ndescription: %s", w, instructions, tools.Tools[0].Description)
		}
	}
	if !res.IsError || code(m) != "unavailable" {
		t.Errorf("a call: want an unavailable error, got %v", m)
	}
}

// sshPi is a local sshd on a loopback port with its own host key, whose
// authorized key may only run `raspi-mcp stdio` against a simulated board,
// and an ssh client configuration naming it (hosts pi, pi-down).
type sshPi struct {
	dir     string // the client's side: keys, ssh_config, the ssh wrapper
	env     []string
	refused string // a client key the Pi does not know
}

func startSSHPi(t *testing.T, s *sim) *sshPi {
	t.Helper()
	const sshd = "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sshd in CI (%v): .ci/run must install openssh-server", err)
		}
		t.Skipf("no %s (openssh-server): %v", sshd, err)
	}
	// Short: ssh's control socket path must fit in 104 bytes.
	dir, err := os.MkdirTemp("", "rml-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	keygen := func(name string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", p).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
		return p
	}
	hostKey, clientKey, otherKey := keygen("host"), keygen("laptop"), keygen("stranger")
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	authorized := filepath.Join(dir, "authorized_keys")
	forced := fmt.Sprintf(`restrict,command="%s stdio --dir %s" %s`, raspi(), s.dir, read(clientKey+".pub"))
	if err := os.WriteFile(authorized, []byte(forced+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(freePort(t))
	down := fmt.Sprint(freePort(t))
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"ListenAddress 127.0.0.1:" + port, "HostKey " + hostKey, "AuthorizedKeysFile " + authorized,
		"PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
		"PermitRootLogin prohibit-password", "AllowUsers " + me.Username, "PidFile none", "LogLevel VERBOSE", "",
	}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation, as the package's unit makes it
	}
	cmd := exec.Command(sshd, "-D", "-e", "-f", conf)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sshd log:\n%s", log)
		}
	})
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(log.String(), "Server listening on 127.0.0.1 port "+port) {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("sshd did not start:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}

	known := filepath.Join(dir, "known_hosts")
	hostPub := strings.Fields(read(hostKey + ".pub"))
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%s %s %s\n", port, hostPub[0], hostPub[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	client := func(host, port, key string) string {
		return fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %s\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  IdentityAgent none\n"+
			"  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  HostKeyAlias [127.0.0.1]:%s\n", host, port, me.Username, key, known, port)
	}
	// pi-moved: known_hosts holds another key for the Pi, as after a reinstall.
	movedKnown := filepath.Join(dir, "known_hosts_moved")
	otherPub := strings.Fields(read(otherKey + ".pub"))
	if err := os.WriteFile(movedKnown, []byte(fmt.Sprintf("[127.0.0.1]:%s %s %s\n", port, otherPub[0], otherPub[1])), 0o600); err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(client("pi-moved", port, clientKey), known, movedKnown, 1)
	sshConf := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(sshConf, []byte(client("pi", port, clientKey)+client("pi-stranger", port, otherKey)+client("pi-down", down, clientKey)+moved), 0o600); err != nil {
		t.Fatal(err)
	}
	// ssh reads ~/.ssh from the password database, not $HOME: an ssh on
	// PATH that adds -F is how the test's configuration reaches it.
	wrap := filepath.Join(dir, "bin")
	if err := os.MkdirAll(wrap, 0o755); err != nil {
		t.Fatal(err)
	}
	realSSH, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wrap, "ssh"), []byte("#!/bin/sh\nexec "+realSSH+" -F "+sshConf+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &sshPi{dir: dir, refused: otherKey,
		env: []string{"PATH=" + wrap + ":" + os.Getenv("PATH"), "XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}}
}

// Over a real sshd with a forced-command key: the go-sdk client lists and
// calls the simulated board's tools through `raspi-mcp-laptop connect ssh`
// in both protocol eras, the second session over the first one's master
// connection, and the Inspector (a client nobody here wrote) does too.
func TestLaptopOverSSH(t *testing.T) {
	s := startSim(t)
	pi := startSSHPi(t, s)
	t.Cleanup(func() {
		// The master connection outlives the sessions (ControlPersist): end it.
		_ = exec.Command(filepath.Join(pi.dir, "bin", "ssh"), "-O", "exit", "-o", "ControlPath="+filepath.Join(pi.dir, "cache", "raspi-mcp", "ssh", "%C"), "pi").Run()
	})
	for _, era := range []string{"", "2025-11-25"} {
		cs, _ := laptopSession(t, era, pi.env, "connect", "ssh", "pi", "--command", raspi()+" stdio")
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) < 11 {
			t.Fatalf("era %q: tools/list: %v (%d tools)", era, err, len(tools.Tools))
		}
		if res, m := call(t, cs, "system_get_health_snapshot", map[string]any{}); res.IsError || m["cpu_usage_percent"] == nil {
			t.Fatalf("era %q: health: %v", era, m)
		}
		cs.Close()
	}
	socks, _ := filepath.Glob(filepath.Join(pi.dir, "cache", "raspi-mcp", "ssh", "*"))
	if len(socks) != 1 {
		t.Errorf("want one master connection's control socket, got %q", socks)
	}

	node, cli := inspector(t)
	cmd := exec.Command(node, cli, "--cli", laptopBin(t), "connect", "ssh", "pi", "--no-master", "--method", "tools/call",
		"--tool-name", "system_get_health_snapshot", "--format", "json", "-q")
	cmd.Env = append(append(os.Environ(), pi.env...), "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, "PATH="+filepath.Join(pi.dir, "bin")+":"+filepath.Dir(node)+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "cpu_usage_percent") {
		t.Fatalf("inspector through connect ssh: %v\n%s", err, out)
	}
}

// A key the Pi does not accept, a Pi where nothing listens, and a Pi whose
// host key is not the one known_hosts holds: the client
// completes its handshake with the laptop's fallback, which says what ssh
// said and what to do, and the laptop exits 1 once the client leaves.
func TestLaptopSSHFailures(t *testing.T) {
	s := startSim(t)
	pi := startSSHPi(t, s)
	for _, tc := range []struct {
		host string
		want []string
	}{
		{"pi-stranger", []string{"the Pi refused this laptop's SSH key", "Permission denied (publickey)", "ssh-copy-id pi-stranger"}},
		{"pi-down", []string{"nothing accepts SSH connections", "Connection refused"}},
		{"pi-moved", []string{"no longer trusts the Pi's host key", "Host key verification failed", "ssh-keygen -R"}},
	} {
		for _, era := range []string{"", "2025-11-25"} {
			cs, stderr := laptopSession(t, era, pi.env, "connect", "ssh", tc.host, "--no-master")
			wantFallback(t, cs, tc.want...)
			cs.Close()
			if !strings.Contains(stderr.String(), tc.want[0]) {
				t.Errorf("%s: stderr lacks the reason:\n%s", tc.host, stderr)
			}
		}
	}
}

// laptopHTTPS is a simulated board serving HTTPS on loopback with its
// self-signed certificate, its URL and fingerprint, and token files.
type laptopHTTPS struct {
	s           *sim
	url, fp     string
	operate     string // a token file with an operate token
	metricsOnly string // a token of a role that may not use MCP
	wrong       string // a token the Pi never made
}

func startHTTPSPi(t *testing.T) *laptopHTTPS {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "tls.toml")
	if err := os.WriteFile(conf, []byte("[http]\ntls = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0", "--config", conf)
	p := &laptopHTTPS{s: s, url: waitURL(t, s)}
	out, _ := s.cli(t, "status", "--json")
	var st struct {
		Status struct {
			HTTP struct {
				Fingerprint string `json:"tls_fingerprint"`
			} `json:"http"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !strings.HasPrefix(st.Status.HTTP.Fingerprint, "sha256:") || !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("no TLS endpoint with a fingerprint (%v):\n%s", err, out)
	}
	p.fp = st.Status.HTTP.Fingerprint
	file := func(secret string) string {
		f := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	p.operate = file(token(t, s, "laptop", "operate"))
	p.metricsOnly = file(token(t, s, "scraper", "metrics"))
	p.wrong = file("rmcp_" + strings.Repeat("x", 40))
	return p
}

// With the Pi's fingerprint and an operate token, the go-sdk client lists
// and calls tools through `raspi-mcp-laptop connect https` in both eras
// (a dry-run write shows the token's role reached the Pi, audited under the
// token's name), given the URL with or without /mcp and the fingerprint in
// either spelling; the Inspector does too.
func TestLaptopOverHTTPS(t *testing.T) {
	p := startHTTPSPi(t)
	base := strings.TrimSuffix(p.url, "/mcp")
	hexFP := strings.TrimPrefix(p.fp, "sha256:")
	var pairs []string
	for i := 0; i < len(hexFP); i += 2 {
		pairs = append(pairs, strings.ToUpper(hexFP[i:i+2]))
	}
	for _, tc := range []struct{ era, url, fp string }{
		{"", p.url, p.fp},
		{"2025-11-25", base, strings.Join(pairs, ":")},
	} {
		cs, _ := laptopSession(t, tc.era, nil, "connect", "https", tc.url, "--fingerprint", tc.fp, "--token-file", p.operate)
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) < 11 {
			t.Fatalf("era %q: tools/list: %v", tc.era, err)
		}
		if _, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "dry_run": true}); m["dry_run"] != true {
			t.Fatalf("era %q: dry run: %v", tc.era, m)
		}
		cs.Close()
	}
	out, _ := p.s.cli(t, "audit", "tail", "-n", "2", "--json")
	if strings.Count(out, `"principal": "token:laptop"`) != 2 {
		t.Fatalf("audit tail:\n%s", out)
	}

	node, cli := inspector(t)
	for _, era := range []string{"modern", "legacy"} {
		// The Inspector, like desktop clients, passes the server only a few
		// variables of its own environment: the token goes in with -e.
		secret, _ := os.ReadFile(p.operate)
		cmd := exec.Command(node, cli, "--cli", "-e", "PI_TOKEN="+strings.TrimSpace(string(secret)), laptopBin(t), "connect", "https", p.url,
			"--fingerprint", p.fp, "--token-env", "PI_TOKEN",
			"--protocol-era", era, "--method", "tools/call", "--tool-name", "system_get_health_snapshot", "--format", "json", "-q")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "cpu_usage_percent") {
			t.Fatalf("inspector (%s) through connect https: %v\n%s", era, err, out)
		}
	}
}

// A certificate that is not the pinned one (nothing is sent, not even the
// token), a token the Pi does not know (401, with the Pi's reason), one
// whose role may not use MCP (403), and a port where nothing listens: each
// time the client completes its handshake with the fallback, which names
// the cause.
func TestLaptopHTTPSFailures(t *testing.T) {
	p := startHTTPSPi(t)
	other := "sha256:" + strings.Repeat("0", 64)
	before, _ := p.s.cli(t, "audit", "tail", "-n", "50", "--json")
	for _, tc := range []struct {
		name, url, fp, token string
		want                 []string
	}{
		{"wrong fingerprint", p.url, other, p.operate, []string{"presented the certificate " + p.fp, "this laptop pins " + other, "not even the token"}},
		{"wrong token", p.url, p.fp, p.wrong, []string{"refused the token (HTTP 401", "raspi-mcp token create"}},
		{"forbidden role", p.url, p.fp, p.metricsOnly, []string{"does not let this token use MCP (HTTP 403", "may only scrape /metrics"}},
		{"nothing listening", fmt.Sprintf("https://127.0.0.1:%d", freePort(t)), p.fp, p.operate, []string{"cannot be reached", "connection refused"}},
	} {
		for _, era := range []string{"", "2025-11-25"} {
			cs, _ := laptopSession(t, era, nil, "connect", "https", tc.url, "--fingerprint", tc.fp, "--token-file", tc.token)
			t.Run(tc.name+"/"+era, func(t *testing.T) { wantFallback(t, cs, tc.want...) })
			cs.Close()
		}
	}
	after, _ := p.s.cli(t, "audit", "tail", "-n", "50", "--json")
	if strings.Count(after, "token:laptop") != strings.Count(before, "token:laptop") {
		t.Errorf("a refused pin still sent the token's requests:\n%s", after)
	}
}

// Pairing end to end: `raspi-mcp pair` on the Pi prints a line, the
// laptop's `pair LINE` stores it (0600), and `connect paired:NAME` (the
// bundle's one-argument form) reaches the Pi with its pinned certificate
// and token. Pairing the same name again on the Pi rotates the token: the
// laptop's stored pairing is then refused, and the client reads that it
// must pair again.
func TestLaptopPaired(t *testing.T) {
	p := startHTTPSPi(t)
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	piPair := func() string {
		cmd := exec.Command(raspi(), "pair", "kitchen", "--role", "operate", "--dir", p.s.dir, "--address", u.Host)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("raspi-mcp pair: %v\n%s", err, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	line := piPair()
	if !strings.HasPrefix(line, "raspi-mcp-pair:v1:") {
		t.Fatalf("the Pi printed %q, not a pairing line", line)
	}
	home := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "HOME=" + home}
	cmd := exec.Command(laptopBin(t), "pair", line)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "connect") {
		t.Fatalf("raspi-mcp-laptop pair: %v\n%s", err, out)
	}
	if strings.Contains(line, "\n") {
		t.Fatal("the line has a newline")
	}
	files, _ := filepath.Glob(filepath.Join(home, "config", "raspi-mcp", "pairs", "*.json"))
	if len(files) != 1 {
		t.Fatalf("stored pairings: %v", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the stored pairing's mode: %v %v", fi.Mode(), err)
	}
	name := strings.TrimSuffix(filepath.Base(files[0]), ".json")

	for _, era := range []string{"", "2025-11-25"} {
		cs, _ := laptopSession(t, era, env, "connect", "paired:"+name)
		if tools, err := cs.ListTools(context.Background(), nil); err != nil || len(tools.Tools) < 11 {
			t.Fatalf("era %q: tools/list through the pairing: %v", era, err)
		}
		cs.Close()
	}

	piPair() // rotates: the stored token is now revoked
	cs, _ := laptopSession(t, "", env, "connect", "paired", name)
	wantFallback(t, cs, "HTTP 401", "revoked or rotated on the Pi: pair again")
}

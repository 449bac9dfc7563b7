package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

var httpURL = regexp.MustCompile(`MCP over HTTP: (https?://\S+/mcp)`)

// waitURL reads the endpoint's URL from what `serve --sim` printed.
func waitURL(t *testing.T, s *sim) string {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if m := httpURL.FindStringSubmatch(s.log.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTP URL printed:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// postStatus is the status of an MCP ping posted without a token.
func postStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// `serve --sim --http 127.0.0.1:0` serves /mcp, prints and reports the
// bound URL, and refuses a request without a token.
func TestServeSimHTTP(t *testing.T) {
	dir := t.TempDir()
	s := startSimIn(t, dir, "--http", "127.0.0.1:0")
	url := waitURL(t, s)
	if code, challenge := postStatus(t, url); code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer") {
		t.Fatalf("no token: %d %q", code, challenge)
	}
	out, code := s.cli(t, "status", "--json")
	var st struct {
		Status struct {
			HTTP struct {
				URL string `json:"url"`
			} `json:"http"`
		} `json:"status"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Status.HTTP.URL != url {
		t.Fatalf("status --json (exit %d) has http.url %q, want %q:\n%s", code, st.Status.HTTP.URL, url, out)
	}
	s.stop(t)
}

// Handed a socket named http by systemd (LISTEN_FDS), the agent serves on
// it without binding anything itself.
func TestServeHTTPSocketActivation(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // f keeps the socket open
	dir := t.TempDir()
	s := &sim{dir: dir, log: &syncBuffer{}}
	// systemd sets LISTEN_PID to the service's pid: the shell's, kept by exec.
	s.cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=http exec "$0" serve --sim --dir "$1"`, raspi(), dir)
	s.cmd.ExtraFiles = []*os.File{f}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", s.log)
		}
	})
	url := waitURL(t, s)
	if want := "http://" + ln.Addr().String() + "/mcp"; url != want {
		t.Fatalf("serves %s, want the handed socket %s", url, want)
	}
	if code, _ := postStatus(t, url); code != http.StatusUnauthorized {
		t.Fatalf("no token on the handed socket: %d", code)
	}
	s.stop(t)
}

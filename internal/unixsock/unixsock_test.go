package unixsock_test

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// shortDir is a temporary directory with a path short enough for a socket
// (sun_path is 104 bytes on macOS, 108 on Linux; t.TempDir can be longer).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "us")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func sockIn(t *testing.T) string { return filepath.Join(shortDir(t), "s.sock") }

func TestListenMode(t *testing.T) {
	sock := sockIn(t)
	ln, err := unixsock.Listen(sock, 0o660, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode = %v, want socket 660", fi.Mode())
	}
	ln.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("closing the listener left %s: %v", sock, err)
	}
}

func TestListenOwner(t *testing.T) {
	sock := sockIn(t)
	ln, err := unixsock.Listen(sock, 0o600, os.Getuid(), os.Getgid())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		t.Fatalf("socket owner = %d:%d, want %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
	ln.Close()

	if os.Geteuid() == 0 {
		return // root may give the socket to anyone
	}
	// Giving the socket away fails, and leaves no socket behind.
	if ln, err := unixsock.Listen(sock, 0o600, os.Getuid()+1, -1); err == nil || !strings.Contains(err.Error(), "chown") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen with a foreign owner = %v", err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("a failed Listen left %s: %v", sock, err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	sock := sockIn(t)
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the stale socket is not there to replace: %v", err)
	}
	ln, err := unixsock.Listen(sock, 0o660, -1, -1)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the new socket does not answer: %v", err)
	}
	c.Close()
}

func TestListenRefusesLiveSocket(t *testing.T) {
	sock := sockIn(t)
	live, err := unixsock.Listen(sock, 0o660, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if ln, err := unixsock.Listen(sock, 0o660, -1, -1); err == nil || !strings.Contains(err.Error(), "in use") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen over a live socket = %v", err)
	}
	// The live server still has its socket.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the live socket was taken away: %v", err)
	}
	c.Close()
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "s.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := unixsock.Listen(path, 0o660, -1, -1); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("regular file was touched")
	}
	link := filepath.Join(dir, "l.sock")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := unixsock.Listen(link, 0o660, -1, -1); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a symlink = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("the symlink's target was touched")
	}
}

// TestPeerOfSelf connects the test to itself: the kernel must name this
// process on both ends.
func TestPeerOfSelf(t *testing.T) {
	sock := sockIn(t)
	ln, err := unixsock.Listen(sock, 0o600, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := unixsock.PeerOf(srv)
	switch runtime.GOOS {
	case "linux", "darwin":
		want := unixsock.Peer{UID: os.Geteuid(), GID: os.Getegid(), PID: os.Getpid()}
		if err != nil || p != want {
			t.Fatalf("PeerOf = %+v, %v; want %+v", p, err, want)
		}
	default:
		if err == nil || !strings.Contains(err.Error(), "not implemented on "+runtime.GOOS) {
			t.Fatalf("PeerOf on %s = %+v, %v; want a refusal", runtime.GOOS, p, err)
		}
	}
}

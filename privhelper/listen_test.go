package privhelper_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/privhelper"
)

func TestListenMode(t *testing.T) {
	sock := sockIn(t)
	ln, err := privhelper.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != privhelper.SocketMode {
		t.Fatalf("socket mode = %v, want socket %o", fi.Mode(), privhelper.SocketMode)
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
	ln, err := privhelper.Listen(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
}

func TestListenRefusesLiveSocket(t *testing.T) {
	sock := sockIn(t)
	live, err := privhelper.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if ln, err := privhelper.Listen(sock); err == nil || !strings.Contains(err.Error(), "in use") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("Listen over a live socket = %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "helper.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := privhelper.Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("regular file was touched")
	}
	link := filepath.Join(dir, "link.sock")
	os.Symlink(path, link)
	if _, err := privhelper.Listen(link); err == nil {
		t.Fatal("Listen over a symlink succeeded")
	}
}

//go:build linux

package apt

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLockHolderRealLocks takes a POSIX lock as apt does and finds this
// process through the real /proc/locks.
func TestLockHolderRealLocks(t *testing.T) {
	dir := t.TempDir()
	front, lock := filepath.Join(dir, "lock-frontend"), filepath.Join(dir, "lock")
	for _, f := range []string{front, lock} {
		if err := os.WriteFile(f, nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	h, err := LockHolder("/proc", []string{front, lock})
	if err != nil || h != nil {
		t.Fatalf("free locks: %+v, %v", h, err)
	}
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0}); err != nil {
		t.Fatal(err)
	}
	h, err = LockHolder("/proc", []string{front, lock})
	if err != nil || h == nil {
		t.Fatalf("held lock not found: %+v, %v", h, err)
	}
	if h.PID != os.Getpid() || h.Lock != lock || !strings.Contains(h.Command, filepath.Base(os.Args[0])) {
		t.Errorf("holder %+v, want pid %d running %s", h, os.Getpid(), os.Args[0])
	}
}

// TestLinuxReadsThisMachine runs the read side against this machine's apt,
// where there is one: whatever the lists say, the answers must parse.
func TestLinuxReadsThisMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs this machine's apt-get -s, which takes seconds")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt here")
	}
	l := Linux{}
	p, err := l.Simulate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Sizes(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	pol, err := l.Policy(t.Context(), "dpkg")
	if err != nil || pol.Installed == "" {
		t.Errorf("policy of dpkg: %+v, %v", pol, err)
	}
	if d, n, err := l.Release(t.Context(), "dpkg", pol.Installed); err != nil || !d.IsZero() || n != "" {
		t.Errorf("Debian's dpkg has no release fields: %v %q %v", d, n, err)
	}
	if _, err := l.Policy(t.Context(), "-o=evil"); err == nil {
		t.Error("an option was taken for a package name")
	}
	if v, err := l.Installed(t.Context(), []string{"dpkg", "raspi-mcp-not-a-package"}); err != nil || v["dpkg"] != pol.Installed || len(v) != 1 {
		t.Errorf("Installed = %v, %v; want dpkg %s only", v, err, pol.Installed)
	}
	if _, err := l.State(t.Context()); err != nil {
		t.Fatal(err)
	}
}

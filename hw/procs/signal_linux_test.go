package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]struct {
		sig  syscall.Signal
		name string
	}{
		"TERM": {syscall.SIGTERM, "TERM"}, "SIGTERM": {syscall.SIGTERM, "TERM"}, "term": {syscall.SIGTERM, "TERM"},
		"15": {syscall.SIGTERM, "TERM"}, " sigkill ": {syscall.SIGKILL, "KILL"}, "9": {syscall.SIGKILL, "KILL"},
		"HUP": {syscall.SIGHUP, "HUP"}, "1": {syscall.SIGHUP, "HUP"}, "usr1": {syscall.SIGUSR1, "USR1"},
		"SigCont": {syscall.SIGCONT, "CONT"}, "STOP": {syscall.SIGSTOP, "STOP"}, "IOT": {syscall.SIGABRT, "ABRT"},
		"SIGCLD": {syscall.SIGCHLD, "CHLD"}, "POLL": {syscall.SIGIO, "IO"}, "INT": {syscall.SIGINT, "INT"},
	} {
		sig, name, err := ParseSignal(in)
		if err != nil || sig != want.sig || name != want.name {
			t.Errorf("%q: %v %q %v, want %v %q", in, sig, name, err, want.sig, want.name)
		}
	}
	for _, in := range []string{"", "0", "-9", "99", "FOO", "SIGSIGTERM", "SIG", "RTMIN", "TERM9", "1.5"} {
		if _, _, err := ParseSignal(in); err == nil || !strings.HasPrefix(err.Error(), "procs: signal ") {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// waitExit waits up to d for the child to be reaped; d is only a hang guard.
func waitExit(cmd *exec.Cmd, d time.Duration) (<-chan error, func() bool) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done, func() bool {
		select {
		case <-done:
			return true
		case <-time.After(d):
			return false
		}
	}
}

func TestSignalLive(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill() })
	done, _ := waitExit(cmd, time.Minute)

	id, err := ReadIdentity(liveFS(), pid)
	if err != nil {
		t.Fatal(err)
	}
	// The live system calls, counted: a refused signal must make none of
	// them, which no wait for the child's death could show.
	s, sends := liveSignaller(), 0
	pidfdSend, kill := s.pidfdSendSignal, s.kill
	s.pidfdSendSignal = func(fd int, sig unix.Signal, info *unix.Siginfo, flags int) error {
		sends++
		return pidfdSend(fd, sig, info, flags)
	}
	s.kill = func(pid int, sig syscall.Signal) error { sends++; return kill(pid, sig) }
	err = s.signal("/", pid, id.StartTicks+1, syscall.SIGTERM)
	if !errors.Is(err, ErrReused) || !strings.Contains(err.Error(), fmt.Sprintf("procs: pid %d (sleep)", pid)) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("wrong start ticks: %v", err)
	}
	if sends != 0 {
		t.Fatalf("%d signals sent although the identity check failed", sends)
	}

	if err := Signal("/", pid, id.StartTicks, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("sleep did not exit after SIGTERM")
	}
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("sleep ended with %v", cmd.ProcessState)
	}
	if err := Signal("/", pid, id.StartTicks, syscall.SIGTERM); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reaped pid: %v", err)
	}
}

func TestSignalRefusals(t *testing.T) {
	for _, pid := range []int{0, -1, -os.Getpid()} {
		if err := Signal("/", pid, 0, syscall.SIGTERM); err == nil || !strings.Contains(err.Error(), "not a single process") {
			t.Errorf("pid %d: %v", pid, err)
		}
	}
	if err := Signal("/", os.Getpid(), 0, 0); err == nil || !strings.Contains(err.Error(), "not a known signal") {
		t.Errorf("signal 0: %v", err)
	}
	if err := Signal("/", os.Getpid(), 0, 200); err == nil {
		t.Error("signal 200 sent")
	}
}

// TestSignalFallback runs Signal as on a kernel without pidfds: kill(2)
// after the identity check, and no kill at all when the check fails.
func TestSignalFallback(t *testing.T) {
	var kills []int
	s := signaller{
		pidfdOpen: func(int, int) (int, error) { return -1, syscall.ENOSYS },
		pidfdSendSignal: func(int, unix.Signal, *unix.Siginfo, int) error {
			t.Fatal("pidfd_send_signal without a pidfd")
			return nil
		},
		kill: func(pid int, sig syscall.Signal) error { kills = append(kills, pid); return syscall.Kill(pid, sig) },
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	_, exited := waitExit(cmd, time.Minute)
	id, err := ReadIdentity(liveFS(), cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.signal("/", id.PID, id.StartTicks-1, syscall.SIGTERM); !errors.Is(err, ErrReused) || len(kills) != 0 {
		t.Fatalf("wrong ticks: %v, kills %v", err, kills)
	}
	if err := s.signal("/", id.PID, id.StartTicks, syscall.SIGTERM); err != nil || len(kills) != 1 {
		t.Fatalf("%v, kills %v", err, kills)
	}
	if !exited() {
		t.Fatal("sleep did not exit after kill(2)")
	}
}

// TestSignalRecheck replaces the process between the first identity check
// and pidfd_open (a PID reused in that window): the check made while the
// pidfd pins the process must catch it, and nothing is sent.
func TestSignalRecheck(t *testing.T) {
	root := t.TempDir()
	const pid = 4242
	write := func(start int) {
		dir := filepath.Join(root, "proc", "4242")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("4242 (victim) S 1 4242 4242 0 -1 4194304 0 0 0 0 1 1 0 0 20 0 1 0 %d 1000 10 0\n", start)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(dir, "status"), []byte("Name:\tvictim\nTgid:\t4242\nUid:\t1000\t1000\t1000\t1000\n"), 0o644)
	}
	write(500)
	sent := false
	s := signaller{
		pidfdOpen: func(int, int) (int, error) {
			write(900) // the process exits and its PID is reused
			return unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		},
		pidfdSendSignal: func(int, unix.Signal, *unix.Siginfo, int) error { sent = true; return nil },
		kill:            func(int, syscall.Signal) error { sent = true; return nil },
	}
	err := s.signal(root, pid, 500, syscall.SIGKILL)
	if !errors.Is(err, ErrReused) || sent || !strings.Contains(err.Error(), "started at tick 900, not 500") {
		t.Fatalf("%v, sent %v", err, sent)
	}
	// Unchanged: sent through the pidfd.
	write(500)
	s.pidfdOpen = func(int, int) (int, error) { return unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0) }
	if err := s.signal(root, pid, 500, syscall.SIGKILL); err != nil || !sent {
		t.Fatalf("%v, sent %v", err, sent)
	}
}

package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ParseSignal accepts "TERM", "SIGTERM", "term", or "15" and returns the
// signal and its canonical name without SIG ("TERM"). The aliases IOT,
// POLL and CLD give ABRT, IO and CHLD. Signal 0 and real-time signals are
// refused: neither is something an operator means to send.
func ParseSignal(s string) (syscall.Signal, string, error) {
	t := strings.TrimSpace(s)
	if n, ok := atoi(t); ok {
		if name := unix.SignalName(syscall.Signal(n)); n > 0 && name != "" {
			return syscall.Signal(n), strings.TrimPrefix(name, "SIG"), nil
		}
		return 0, "", fmt.Errorf("procs: signal %q: no such signal", s)
	}
	u := strings.TrimPrefix(strings.ToUpper(t), "SIG")
	switch u {
	case "IOT":
		u = "ABRT"
	case "POLL":
		u = "IO"
	case "CLD":
		u = "CHLD"
	}
	if n := unix.SignalNum("SIG" + u); n > 0 {
		return n, u, nil
	}
	return 0, "", fmt.Errorf("procs: signal %q: no such signal", s)
}

// signaller is the system calls Signal uses, a value so that the kill(2)
// fallback can be tested on a kernel that has pidfds.
type signaller struct {
	pidfdOpen       func(pid, flags int) (int, error)
	pidfdSendSignal func(fd int, sig unix.Signal, info *unix.Siginfo, flags int) error
	kill            func(pid int, sig syscall.Signal) error
}

func liveSignaller() signaller {
	return signaller{pidfdOpen: unix.PidfdOpen, pidfdSendSignal: unix.PidfdSendSignal, kill: syscall.Kill}
}

// Signal sends sig to pid only if /proc under root ("/" live; it must
// describe this kernel's processes) still shows the same process: same
// StartTicks, not a thread. That guards against the PID being reused
// between the caller's check and the kill.
//
// On Linux ≥ 5.3 the check and the kill refer to the same process: a pidfd
// is opened first, identity is checked (again) while the pidfd pins the
// process, and the signal goes through the pidfd, so a PID recycled after
// the check cannot receive it. Where pidfds are unavailable (ENOSYS, or
// EPERM from a seccomp filter that predates them) it falls back to
// kill(2) right after the check, which leaves a window of microseconds.
//
// The error wraps [ErrReused] when the process changed and fs.ErrNotExist
// when it is gone; in both cases nothing was sent.
func Signal(root string, pid int, startTicks uint64, sig syscall.Signal) error {
	return liveSignaller().signal(root, pid, startTicks, sig)
}

func (s signaller) signal(root string, pid int, startTicks uint64, sig syscall.Signal) error {
	// kill(0) and kill(-1) would signal a process group or everything.
	if pid <= 0 {
		return fmt.Errorf("procs: pid %d: refusing to signal: not a single process", pid)
	}
	if sig <= 0 || unix.SignalName(sig) == "" {
		return fmt.Errorf("procs: pid %d: refusing to send signal %d: not a known signal", pid, int(sig))
	}
	fsys := os.DirFS(root)
	if err := check(fsys, pid, startTicks, sig); err != nil {
		return err
	}
	fd, err := s.pidfdOpen(pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("procs: pid %d: no such process (not signalled): %w", pid, fs.ErrNotExist)
	case errors.Is(err, syscall.ENOSYS), errors.Is(err, syscall.EPERM):
		return s.killed(pid, sig)
	default:
		return fmt.Errorf("procs: pid %d: pidfd_open: %w", pid, err)
	}
	// The pidfd now names one process for good; if /proc still agrees, it
	// is the one the caller identified.
	if err := check(fsys, pid, startTicks, sig); err != nil {
		return err
	}
	err = s.pidfdSendSignal(fd, sig, nil, 0)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ESRCH):
		return fmt.Errorf("procs: pid %d: exited before SIG%s reached it: %w", pid, sigName(sig), fs.ErrNotExist)
	case errors.Is(err, syscall.ENOSYS):
		if err := check(fsys, pid, startTicks, sig); err != nil {
			return err
		}
		return s.killed(pid, sig)
	default:
		return fmt.Errorf("procs: pid %d: sending SIG%s: %w", pid, sigName(sig), err)
	}
}

// check compares pid's identity with startTicks.
func check(fsys fs.FS, pid int, startTicks uint64, sig syscall.Signal) error {
	id, err := ReadIdentity(fsys, pid)
	if err != nil {
		return fmt.Errorf("%w (SIG%s not sent)", err, sigName(sig))
	}
	if id.StartTicks != startTicks {
		return fmt.Errorf("procs: pid %d (%s) started at tick %d, not %d: %w; SIG%s not sent",
			pid, id.Name, id.StartTicks, startTicks, ErrReused, sigName(sig))
	}
	return nil
}

func (s signaller) killed(pid int, sig syscall.Signal) error {
	if err := s.kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("procs: pid %d: exited before SIG%s reached it: %w", pid, sigName(sig), fs.ErrNotExist)
		}
		return fmt.Errorf("procs: pid %d: kill SIG%s: %w", pid, sigName(sig), err)
	}
	return nil
}

func sigName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return strconv.Itoa(int(sig))
}

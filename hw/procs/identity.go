package procs

import (
	"errors"
	"fmt"
	"io/fs"
)

// ErrReused is wrapped by [Signal]'s refusal when the PID now names a
// process other than the one the caller identified.
var ErrReused = errors.New("PID reused by another process")

// Identity is what the root helper checks before it signals a process.
type Identity struct {
	PID, UID, PPID int
	StartTicks     uint64
	// Kernel is true for kernel threads, which must never be signalled:
	// PF_KTHREAD in stat's flags (pid 2 and its children when the flags
	// are zero, as in hand-written trees).
	Kernel bool
	Name   string
	// State is as in [Proc.State]: after a signal, "zombie" means the
	// process has exited and only waits for its parent to reap it.
	State string
}

// ReadIdentity reads the identity of pid from stat and status only (two
// small reads: it runs on every signal request). The error wraps
// fs.ErrNotExist when the PID is gone or names a thread rather than a
// process.
func ReadIdentity(fsys fs.FS, pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("procs: pid %d: not a process ID", pid)
	}
	st, name, uid, err := newReader(fsys, Options{}).core(pid, procDir(pid))
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, UID: uid, PPID: st.ppid, StartTicks: st.start, Kernel: st.kernel(pid), Name: name, State: StateName(st.state)}, nil
}

package vmtest

import "syscall"

// qemuAttr puts qemu in its own process group, so killing the group takes
// every qemu thread and helper with it even when qemu hangs paused after a
// KVM internal error, and has the kernel kill qemu when vmtest dies (even by
// SIGKILL) instead of leaving a guest running.
func qemuAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

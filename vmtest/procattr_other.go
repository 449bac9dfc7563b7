//go:build !linux

package vmtest

import "syscall"

// qemuAttr puts qemu in its own process group. Only Linux can have the
// kernel kill it when vmtest dies; the VM tests run on Linux hosts, this file
// only keeps the tree building elsewhere.
func qemuAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

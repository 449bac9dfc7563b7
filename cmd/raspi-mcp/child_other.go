//go:build !linux

package main

import "syscall"

// helperAttr puts the laptop-mode helper in its own process group, so a
// terminal's ^C reaches only the agent, which then stops the helper in
// order. There is no Pdeathsig off Linux: a helper started with --sim stops
// by itself when it sees its agent gone (privhelper/daemon's stopWithParent).
func helperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

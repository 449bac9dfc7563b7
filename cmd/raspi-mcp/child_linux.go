package main

import "syscall"

// helperAttr puts the laptop-mode helper in its own process group, so a
// terminal's ^C reaches only the agent, which then stops the helper in
// order; and has the kernel send it SIGTERM if the agent is killed.
func helperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

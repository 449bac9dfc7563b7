package chart

import "syscall"

// childAttr puts the chart program in its own process group, so a
// terminal's ^C reaches only the agent, and has the kernel kill it should
// the agent die first.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

package scrape

import "syscall"

// childAttr puts the exporter in its own process group, so a terminal's ^C
// reaches only the agent (which then closes it), and has the kernel kill it
// should the agent die without closing it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

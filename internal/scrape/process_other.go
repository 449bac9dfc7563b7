//go:build !linux

package scrape

import "syscall"

// childAttr puts the exporter in its own process group, so a terminal's ^C
// reaches only the agent, which then closes it. There is no Pdeathsig off
// Linux; the exporter exits when the agent's end of its stdin closes,
// which a dying agent's kernel does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

//go:build !linux

package chart

import "syscall"

// childAttr puts the chart program in its own process group, so a
// terminal's ^C reaches only the agent. There is no Pdeathsig off Linux;
// the agent's timeout ends a chart that runs too long.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

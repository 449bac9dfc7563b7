//go:build unix

package camera

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a new process group and makes cancellation
// kill the whole group. rpicam-still (and the shell wrappers some distros
// ship) can leave children holding the camera; killing only the leader
// would leave the device busy for the next capture.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

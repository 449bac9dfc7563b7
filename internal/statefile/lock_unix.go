//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package statefile

import (
	"os"
	"syscall"
)

// lockFile takes an flock on f, exclusive or shared, waiting for it. flock
// locks belong to the open file description, so two users in one process
// exclude each other just as two processes do.
func lockFile(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

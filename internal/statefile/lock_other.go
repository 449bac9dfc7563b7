//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package statefile

import "os"

// lockFile is a no-op where flock does not exist: the sim still works for
// one process at a time, which is all a demo there needs.
func lockFile(f *os.File, exclusive bool) error { return nil }

func unlockFile(f *os.File) {}

//go:build linux

package sysinfo

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statfs reports the file system like df: fragment size (falling back to
// block size) times the block counts.
func statfs(path string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err // Health adds the context
	}
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	return st.Blocks * bs, st.Bfree * bs, nil
}

// unameMachine is `uname -m`.
func unameMachine() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("sysinfo: uname: %w", err)
	}
	return unix.ByteSliceToString(u.Machine[:]), nil
}

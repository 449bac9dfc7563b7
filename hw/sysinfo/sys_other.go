//go:build !linux

package sysinfo

import (
	"errors"
	"fmt"
)

// The live defaults only exist on Linux; elsewhere (a developer's Mac)
// NewLinux is still usable over a fixture with injected functions.

func statfs(path string) (total, free uint64, err error) {
	return 0, 0, fmt.Errorf("sysinfo: statfs %q: %w", path, errors.ErrUnsupported)
}

func unameMachine() (string, error) {
	return "", fmt.Errorf("sysinfo: uname: %w", errors.ErrUnsupported)
}

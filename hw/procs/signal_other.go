//go:build !linux

package procs

import (
	"errors"
	"fmt"
	"syscall"
)

// ParseSignal needs Linux's signal numbers: elsewhere it refuses, so that
// the package still builds for a developer's laptop.
func ParseSignal(s string) (syscall.Signal, string, error) {
	return 0, "", fmt.Errorf("procs: signal %q: signals are Linux-only: %w", s, errors.ErrUnsupported)
}

// Signal refuses outside Linux: the identity check it relies on reads /proc.
func Signal(root string, pid int, startTicks uint64, sig syscall.Signal) error {
	return fmt.Errorf("procs: pid %d: signalling is Linux-only: %w", pid, errors.ErrUnsupported)
}

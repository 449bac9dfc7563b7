// Package statefile shares one small state file between processes. Every use
// opens the file, takes an flock (shared to read, exclusive to change) and
// hands the open file to the caller, who decodes it and, to change it,
// rewrites its content in place: the lock is on the inode, so the file must
// never be replaced by a rename. The simulated board's systemd, process
// table and package manager use it (through JSON), because the agent and
// the helper child are separate processes that must see one board.
package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// File is one state file. What prefixes its errors ("units: sim").
type File struct {
	Path string
	What string
}

// Create opens the file for writing, creating it when missing, and runs fn
// under an exclusive lock, for seeding an empty file or checking an old one.
// readOnly reports a file this process may not write (the agent's view of a
// file the helper owns); fn is not run then.
func (s File) Create(fn func(f *os.File) error) (readOnly bool, err error) {
	f, err := os.OpenFile(s.Path, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: open %s: %w", s.What, s.Path, err)
	}
	return false, s.locked(f, true, fn)
}

// View runs fn on the file under a shared lock.
func (s File) View(fn func(f *os.File) error) error {
	f, err := os.Open(s.Path)
	if err != nil {
		return fmt.Errorf("%s: %w", s.What, err)
	}
	return s.locked(f, false, fn)
}

// Update runs fn on the file, opened for writing, under an exclusive lock.
func (s File) Update(fn func(f *os.File) error) error {
	f, err := os.OpenFile(s.Path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", s.What, err)
	}
	return s.locked(f, true, fn)
}

// locked runs fn with f locked and closes f; fn's error is returned as it
// came.
func (s File) locked(f *os.File, exclusive bool, fn func(f *os.File) error) error {
	defer f.Close()
	if err := lockFile(f, exclusive); err != nil {
		return fmt.Errorf("%s: lock %s: %w", s.What, s.Path, err)
	}
	defer unlockFile(f)
	return fn(f)
}

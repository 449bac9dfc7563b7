//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// termWidth is f's terminal's width in columns (0 when it does not say),
// and whether f is a terminal at all.
func termWidth(f *os.File) (int, bool) {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}

//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// callTermWidth is the terminal's width in columns, 0 when f is not a
// terminal or does not say.
func callTermWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

//go:build !unix

package main

import "os"

// termWidth knows a terminal only by its character device here, not its width.
func termWidth(f *os.File) (int, bool) {
	st, err := f.Stat()
	return 0, err == nil && st.Mode()&os.ModeCharDevice != 0
}

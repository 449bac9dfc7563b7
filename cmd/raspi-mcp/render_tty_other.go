//go:build !unix

package main

import "os"

// callTermWidth is unknown here: the caller's default applies.
func callTermWidth(*os.File) int { return 0 }

package main

import (
	"os"
	"path/filepath"
)

// libBinary is where raspi-mcp's companion binary name (raspi-mcp-stdio,
// raspi-mcp-exporter, raspi-mcp-simhelper) is looked for: beside this
// executable (a build tree's bin/), then in ../lib/raspi-mcp/ from it (the
// package's /usr/bin and /usr/lib/raspi-mcp). Never on $PATH: the agent and
// a session must not run whatever a PATH entry offers under that name. ""
// when neither place has an executable file of that name.
func libBinary(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return libBinaryOf(exe, name)
}

// libBinaryOf is libBinary for the executable exe, followed through
// symlinks (a ~/.local/bin link into a build tree finds the tree's bin/).
func libBinaryOf(exe, name string) string {
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, "..", "lib", "raspi-mcp", name)} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Companion binaries are found beside raspi-mcp first, then in
// ../lib/raspi-mcp/ as the package installs them; only an executable
// regular file counts, and a symlinked raspi-mcp looks beside its target.
func TestLibBinaryOf(t *testing.T) {
	// Resolved, as libBinaryOf resolves exe (macOS's temporary directory
	// is behind a symlink).
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bin, lib := filepath.Join(root, "usr", "bin"), filepath.Join(root, "usr", "lib", "raspi-mcp")
	for _, d := range []string{bin, lib} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(bin, "raspi-mcp")
	write(exe, 0o755)

	if got := libBinaryOf(exe, simHelper); got != "" {
		t.Errorf("nothing installed: found %q", got)
	}
	write(filepath.Join(lib, simHelper), 0o644) // not executable
	if got := libBinaryOf(exe, simHelper); got != "" {
		t.Errorf("a file without execute permission was taken: %q", got)
	}
	if err := os.Mkdir(filepath.Join(bin, "raspi-mcp-stdio"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := libBinaryOf(exe, "raspi-mcp-stdio"); got != "" {
		t.Errorf("a directory was taken: %q", got)
	}
	write(filepath.Join(lib, "raspi-mcp-exporter"), 0o755)
	if got, want := libBinaryOf(exe, "raspi-mcp-exporter"), filepath.Join(bin, "..", "lib", "raspi-mcp", "raspi-mcp-exporter"); got != want {
		t.Errorf("in ../lib/raspi-mcp: got %q, want %q", got, want)
	}
	write(filepath.Join(bin, "raspi-mcp-exporter"), 0o755)
	if got, want := libBinaryOf(exe, "raspi-mcp-exporter"), filepath.Join(bin, "raspi-mcp-exporter"); got != want {
		t.Errorf("beside raspi-mcp wins: got %q, want %q", got, want)
	}

	// ~/.local/bin/raspi-mcp -> the tree's bin/raspi-mcp.
	link := filepath.Join(root, "elsewhere", "raspi-mcp")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	if got, want := libBinaryOf(link, "raspi-mcp-exporter"), filepath.Join(bin, "raspi-mcp-exporter"); got != want {
		t.Errorf("through a symlink: got %q, want %q", got, want)
	}
}

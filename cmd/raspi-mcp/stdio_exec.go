//go:build unix

package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// stdioBinary is where the small bridge binary is looked for: beside this
// executable (a build tree's bin/), then in ../lib/raspi-mcp/ from it (the
// package's /usr/bin and /usr/lib/raspi-mcp). Never on $PATH: a session
// must not run whatever a PATH entry offers under that name.
func stdioBinary() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	for _, p := range []string{filepath.Join(dir, "raspi-mcp-stdio"), filepath.Join(dir, "..", "lib", "raspi-mcp", "raspi-mcp-stdio")} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// execBridge replaces this process with raspi-mcp-stdio, handing it conn,
// so the session's process maps only the small binary. It returns only if
// that could not be done (no such binary, or exec failed), and then conn is
// still open and the caller bridges in this process.
func execBridge(conn *net.UnixConn) {
	bin := stdioBinary()
	if bin == "" {
		return
	}
	f, err := conn.File() // a duplicate, close-on-exec like every fd Go opens
	if err != nil {
		return
	}
	defer f.Close()
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return
	}
	// On success this does not return. stdin and stdout are inherited
	// as they are; conn's own descriptor is close-on-exec and goes away.
	_ = syscall.Exec(bin, []string{bin, strconv.Itoa(fd)}, os.Environ())
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
}

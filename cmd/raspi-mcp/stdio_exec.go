//go:build unix

package main

import (
	"net"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// execBridge replaces this process with raspi-mcp-stdio, handing it conn,
// so the session's process maps only the small binary. It returns only if
// that could not be done (no such binary, or exec failed), and then conn is
// still open and the caller bridges in this process.
func execBridge(conn *net.UnixConn) {
	bin := libBinary("raspi-mcp-stdio")
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

//go:build !linux

package rawio

import (
	"io"
	"net"
	"os"
)

// Elsewhere (a macOS laptop) descriptors are read and written the ordinary
// way; rawio_linux.go says what it saves on Linux.

// Conn is a connected socket as rawio's users need it.
type Conn interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// TakeUnix returns conn.
func TakeUnix(conn *net.UnixConn) Conn { return conn }

// Stdio returns f and functions that do nothing.
func Stdio(f *os.File) (rw io.ReadWriter, close, restore func()) {
	return f, func() {}, func() {}
}

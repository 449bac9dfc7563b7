//go:build !linux

package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
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

// Take takes fd, a pipe or a socket, over as a Conn, read and written
// through the runtime's poller.
func Take(fd int) (Conn, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	return fileConn{os.NewFile(uintptr(fd), "session")}, nil
}

type fileConn struct{ *os.File }

func (f fileConn) CloseWrite() error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := sc.Control(func(fd uintptr) { serr = syscall.Shutdown(int(fd), syscall.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}

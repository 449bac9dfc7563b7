//go:build !linux

package bridge

import (
	"io"
	"net"
	"os"
)

// Elsewhere (a macOS laptop) the bridge reads and writes the ordinary way;
// rawio_linux.go says what it saves on Linux.

func rawConn(conn *net.UnixConn) io.ReadWriter { return conn }

func pollStdio(f *os.File) (io.ReadWriter, func()) { return f, func() {} }

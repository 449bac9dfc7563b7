//go:build !linux

package bridge

import (
	"io"
	"net"
	"os"
)

// Elsewhere (a macOS laptop) the bridge reads and writes the ordinary way;
// rawio_linux.go says what it saves on Linux.

func agentConn(conn *net.UnixConn) sessionConn { return conn }

func pollStdio(f *os.File) (rw io.ReadWriter, close, restore func()) {
	return f, func() {}, func() {}
}

package privhelper

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// SocketMode is the mode Listen gives the socket: owner (root) and the group
// the caller chowns it to. It is defence in depth; SO_PEERCRED is the gate.
const SocketMode = 0o660

// Listen creates the helper's Unix socket at path and chmods it to
// SocketMode; the caller sets its group. A stale socket left by a crashed
// helper is removed, but only after a connect to it is refused: a live
// helper's socket, or anything that is not a socket, is an error rather than
// something to delete. Closing the listener unlinks the socket.
func Listen(path string) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("privhelper: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("privhelper: chmod %s: %w", path, err)
	}
	return ln, nil
}

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("privhelper: stat %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("privhelper: %s exists and is not a socket (%s); refusing to replace it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err == nil {
		c.Close()
		return fmt.Errorf("privhelper: %s is in use by a running helper", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("privhelper: cannot tell whether %s is stale: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("privhelper: remove stale socket %s: %w", path, err)
	}
	return nil
}

// Package unixsock is the one place raspi-mcp makes, guards and serves a Unix
// socket: the agent's MCP socket and the root helper's socket both come from
// here, so stale-socket handling, file modes, peer credentials and the
// accept loop's reaction to running out of file descriptors are the same for
// both.
//
// The socket file's mode is defence in depth; the gate is the kernel's word
// on who connected (PeerOf), read once per connection. Peer credentials are
// implemented on Linux (SO_PEERCRED) and macOS (LOCAL_PEERCRED and
// LOCAL_PEERPID); elsewhere PeerOf refuses, so a server there lets nobody in
// rather than guessing.
//
// This package is linked into the root helper: it imports only the standard
// library and golang.org/x/sys.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"
)

// Peer is the kernel's word on who is at the other end of a connection, as
// recorded when it connected: a peer cannot change it afterwards by passing
// the descriptor to another process.
type Peer struct {
	UID int
	GID int // the peer's primary (effective) group
	PID int
}

// Listen creates a Unix socket at path, gives it mode and, where uid or gid
// is not -1, that owner or group (as os.Chown). A socket file left by a
// crashed server is replaced, but only after a connect to it is refused: a
// live server's socket, or anything that is not a socket (a regular file, a
// symlink), is an error rather than something to delete. Closing the
// listener unlinks the socket.
func Listen(path string, mode fs.FileMode, uid, gid int) (*net.UnixListener, error) {
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("unixsock: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("unixsock: chmod %s to %o: %w", path, mode, err)
	}
	if uid != -1 || gid != -1 {
		if err := os.Chown(path, uid, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("unixsock: chown %s to %d:%d: %w", path, uid, gid, err)
		}
	}
	return ln, nil
}

// staleProbe bounds the connect that tells a stale socket from a live one. A
// live server's kernel backlog answers at once even when the server is busy.
const staleProbe = 2 * time.Second

func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unixsock: stat %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("unixsock: %s exists and is not a socket (%s); refusing to replace it", path, fi.Mode().Type())
	}
	c, err := net.DialTimeout("unix", path, staleProbe)
	if err == nil {
		c.Close()
		return fmt.Errorf("unixsock: %s is in use by a running server", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("unixsock: cannot tell whether %s is stale: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unixsock: remove stale socket %s: %w", path, err)
	}
	return nil
}

package unixsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerOf asks the kernel who connected. SO_PEERCRED holds the credentials
// the peer had at connect().
func PeerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	if cerr != nil {
		return Peer{}, fmt.Errorf("unixsock: SO_PEERCRED: %w", cerr)
	}
	return Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}

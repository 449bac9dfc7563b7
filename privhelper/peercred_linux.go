package privhelper

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerCred asks the kernel who connected, once per connection. SO_PEERCRED
// records the credentials at connect() time, so a peer cannot change them
// afterwards by passing the fd to another process.
func peerCred(c *net.UnixConn) (peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return peer{}, fmt.Errorf("privhelper: peer credentials: %w", err)
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, fmt.Errorf("privhelper: peer credentials: %w", err)
	}
	if cerr != nil {
		return peer{}, fmt.Errorf("privhelper: SO_PEERCRED: %w", cerr)
	}
	return peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}

package unixsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION of <sys/ucred.h>; x/sys/unix lacks it.
const xucredVersion = 0

// PeerOf asks the kernel who connected. LOCAL_PEERCRED gives the uid and
// groups the peer had at connect() (what getpeereid(3) reads); the first
// group is the effective one. LOCAL_PEERPID gives the process.
func PeerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	var (
		cred *unix.Xucred
		pid  int
		cerr error
		perr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return Peer{}, fmt.Errorf("unixsock: peer credentials: %w", err)
	}
	if cerr != nil {
		return Peer{}, fmt.Errorf("unixsock: LOCAL_PEERCRED: %w", cerr)
	}
	if perr != nil {
		return Peer{}, fmt.Errorf("unixsock: LOCAL_PEERPID: %w", perr)
	}
	if cred.Version != xucredVersion || cred.Ngroups < 1 {
		return Peer{}, fmt.Errorf("unixsock: LOCAL_PEERCRED: unexpected xucred (version %d, %d groups)", cred.Version, cred.Ngroups)
	}
	return Peer{UID: int(cred.Uid), GID: int(cred.Groups[0]), PID: pid}, nil
}

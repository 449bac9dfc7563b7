//go:build unix

package client

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerGone peeks at an idle connection without blocking. EOF or an error
// means the helper hung up; unsolicited bytes mean the stream is out of
// step. Either way the connection is useless and nothing has been sent on
// it for the coming call, so it can be replaced transparently.
func peerGone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		// Only "nothing to read yet" means open and quiet; EOF (no error,
		// zero bytes), any error and unsolicited data all mean gone.
		gone = rerr != unix.EAGAIN && rerr != unix.EWOULDBLOCK
		return true // never wait for readability
	})
	return err != nil || gone
}

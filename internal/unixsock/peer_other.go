//go:build !linux && !darwin

package unixsock

import (
	"fmt"
	"net"
	"runtime"
)

// PeerOf fails closed where the kernel's peer credentials are not wired up:
// a server that cannot tell who connected lets nobody in.
func PeerOf(*net.UnixConn) (Peer, error) {
	return Peer{}, fmt.Errorf("unixsock: peer credentials are not implemented on %s (only linux and darwin)", runtime.GOOS)
}

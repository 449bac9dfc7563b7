//go:build !linux

package privhelper

import (
	"errors"
	"net"
)

// peerCred fails closed off Linux: without SO_PEERCRED the helper cannot
// tell the agent from anyone else, so it lets nobody in.
func peerCred(*net.UnixConn) (peer, error) {
	return peer{}, errors.New("privhelper: peer credentials are only implemented on Linux")
}

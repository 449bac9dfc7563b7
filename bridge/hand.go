//go:build unix

package bridge

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"

	"github.com/raspi-mcp/raspi-mcp/internal/handover"
)

// Hand gives stdin and stdout to the agent over conn (internal/handover),
// which then serves the session on them itself, and waits until the agent
// closes conn: the session is over. handed is false, and nothing was sent,
// when stdin or stdout is not a pipe or a socket (a terminal, a file): the
// caller copies with Run instead. Hand takes conn over and closes it.
//
// The agent makes the descriptors non-blocking, a mode that belongs to the
// open file and so reaches this process's stdin and stdout too; Hand puts
// the modes back before it returns.
func Hand(stdin, stdout *os.File, conn *net.UnixConn) (handed bool, err error) {
	if !handover.Fits(stdin) || !handover.Fits(stdout) {
		return false, nil
	}
	defer conn.Close()
	defer handover.KeepMode(stdout)()
	defer handover.KeepMode(stdin)()
	if err := handover.Send(conn, stdin, stdout); err != nil {
		return true, err
	}
	// The agent writes nothing here unless it refuses the handover, and
	// then one line saying why.
	msg, err := io.ReadAll(io.LimitReader(conn, 4096))
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return true, err
	}
	if msg = bytes.TrimSpace(msg); len(msg) > 0 {
		return true, errors.New(string(msg))
	}
	return true, nil
}

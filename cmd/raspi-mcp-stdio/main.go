// Command raspi-mcp-stdio is the session bridge of `raspi-mcp stdio` on its
// own. `raspi-mcp stdio` finds the agent (or says why it cannot), connects,
// and then replaces itself with this program, handing over the connection,
// so each SSH session's process maps a binary of about a megabyte instead
// of the whole agent's: the pages of the big binary are only shared with
// the agent while both map the same file, which an upgrade or a second
// install breaks, and the session's private pages grow with what it maps.
//
// It is not meant to be run by hand: its one argument is the number of an
// inherited file descriptor holding the connected agent socket.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/raspi-mcp/raspi-mcp/bridge"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp stdio:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: raspi-mcp-stdio FD (run by `raspi-mcp stdio`, which connects to the agent first)")
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		return fmt.Errorf("file descriptor %q: want a number of 3 or more", args[0])
	}
	f := os.NewFile(uintptr(fd), "agent socket")
	c, err := net.FileConn(f)
	_ = f.Close() // FileConn holds its own copy
	if err != nil {
		return fmt.Errorf("file descriptor %d: %w", fd, err)
	}
	conn, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return fmt.Errorf("file descriptor %d is a %T, not a Unix socket", fd, c)
	}
	defer conn.Close()
	return bridge.Session(os.Stdin, os.Stdout, conn)
}

// Package laptop is the laptop side of raspi-mcp: the local stdio MCP server
// an MCP client starts, which reaches the Pi over SSH (SSH) or over HTTPS
// with the Pi's certificate pinned by fingerprint (Remote). When the Pi
// cannot be reached, or refuses the key or the token, it answers the
// client's handshake itself with the reason and the fix (internal/fallback),
// because a client shows only "connection closed" for a stdio server that
// exits, and nothing at all of its stderr.
//
// It builds for Linux, macOS and Windows with cgo off, and imports nothing
// unix-only: the Windows build is the one most people need it for.
package laptop

import (
	"fmt"
	"io"

	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
)

// Failed is a connection that never reached the Pi's MCP server: the
// client was answered by the fallback (with Down) instead.
type Failed struct {
	Down fallback.Down
}

func (f *Failed) Error() string {
	return fmt.Sprintf("laptop: %s; fix: %s", f.Down.Reason, f.Down.FixHint)
}

// Where is what the fallback says of where raspi-mcp is unavailable.
const Where = "from this laptop"

// serveDown tells a person at a terminal (stderr) and the client (the
// fallback, on the client's input from its first message on) why the Pi is
// not there, until the client closes its input.
func serveDown(stdin io.Reader, stdout, stderr io.Writer, d fallback.Down) error {
	fmt.Fprintf(stderr, "raspi-mcp-laptop: %s.\n  fix: %s\n", d.Reason, d.FixHint)
	d.Where = Where
	if err := fallback.Serve(stdin, stdout, d); err != nil {
		return fmt.Errorf("laptop: fallback: %w", err)
	}
	return &Failed{Down: d}
}

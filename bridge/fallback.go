package bridge

import (
	"io"

	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
)

// Down says why the agent cannot be reached and what the person should do.
type Down = fallback.Down

// UnavailableTool is the one tool the fallback lists (fallback.UnavailableTool).
const UnavailableTool = fallback.UnavailableTool

// Unavailable answers the client's handshake with the reason and the fix
// until stdin ends (fallback.Serve). It lives in internal/fallback so the
// laptop side, which cannot build this package on Windows, serves the same.
func Unavailable(stdin io.Reader, stdout io.Writer, d Down) error {
	return fallback.Serve(stdin, stdout, d)
}

package fallback

import (
	"bytes"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// Every request gets its answer, the last even without a newline; a
// notification gets none; a line past rpcid.MaxLine ends the session with
// an error, after the answers before it are out. (bridge's tests drive the
// whole handshake with go-sdk clients of both eras.)
func TestServeLines(t *testing.T) {
	d := Down{Reason: "the Pi cannot be reached", FixHint: "turn it on", Where: "from this laptop"}
	var out bytes.Buffer
	in := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`
	if err := Serve(strings.NewReader(in), &out, d); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"id":1`) || !strings.Contains(lines[1], `"protocolVersion":"2025-06-18"`) ||
		!strings.Contains(lines[1], "raspi-mcp is unavailable from this laptop: the Pi cannot be reached. Fix: turn it on") {
		t.Fatalf("answers:\n%s", out.String())
	}
	out.Reset()
	long := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + strings.Repeat("x", rpcid.MaxLine+10)
	if err := Serve(strings.NewReader(long), &out, d); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("a line past MaxLine: %v", err)
	}
	if !strings.Contains(out.String(), `"id":1`) {
		t.Fatalf("the answer before the long line is lost: %q", out.String())
	}
}

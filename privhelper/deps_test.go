package privhelper_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// helperForbidden are what the code running as root must never link.
var helperForbidden = map[string]string{
	"github.com/modelcontextprotocol/go-sdk/...": "the MCP SDK parses the model's free text; the helper speaks only its own typed protocol",
	"github.com/google/jsonschema-go/...":        "tool schemas are the agent's business",
	"go.etcd.io/bbolt/...":                       "bbolt is the agent's state store; the helper keeps no state",
	"github.com/raspi-mcp/raspi-mcp/agent/...":   "the agent is the untrusted side the helper checks",
	"github.com/raspi-mcp/raspi-mcp/bridge":      "the stdio bridge is a client of the agent",
	"net/http":                                   "root serves one Unix socket: no HTTP client or server",
}

// TestHelperDependencies keeps the root helper small and auditable: its
// binary, this package (and its client, which the agent links) and the
// power backend.
func TestHelperDependencies(t *testing.T) {
	deptest.Fence{
		Packages:  []string{"./cmd/raspi-mcp-helper", "./cmd/raspi-mcp-simhelper", "./privhelper/...", "./hw/power"},
		Forbidden: helperForbidden,
	}.Check(t)
}

// TestRootHelperSimulatesNothing: the simulated board is
// raspi-mcp-simhelper's. The root helper links neither the simulated camera
// nor the image codecs it needs (which register at start-up in any binary
// that imports them), so no flag or config can make it pretend.
func TestRootHelperSimulatesNothing(t *testing.T) {
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp-helper"}, Forbidden: map[string]string{
		"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim": "the simulated camera is raspi-mcp-simhelper's",
		"image/...": "the root helper encodes no image: rpicam writes the photos",
	}}.Check(t)
}

// TestProtoStdlibOnly: the wire types are shared by the agent and the
// helper, and must stay readable without chasing another module.
func TestProtoStdlibOnly(t *testing.T) {
	deptest.Fence{Packages: []string{"./privhelper/proto"}, StdlibOnly: true}.Check(t)
}

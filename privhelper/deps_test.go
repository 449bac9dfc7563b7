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
		Packages:  []string{"./cmd/raspi-mcp-helper", "./privhelper/...", "./hw/power"},
		Forbidden: helperForbidden,
	}.Check(t)
}

// TestProtoStdlibOnly: the wire types are shared by the agent and the
// helper, and must stay readable without chasing another module.
func TestProtoStdlibOnly(t *testing.T) {
	deptest.Fence{Packages: []string{"./privhelper/proto"}, StdlibOnly: true}.Check(t)
}

package transport_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// TestDependencies: the doors know no tool (issue 29). They serve whatever
// *mcp.Server the agent hands them and learn principals from peer
// credentials and bearer tokens; the tools, their store, the helper and the
// devices stay on the agent's side, so a change to a tool cannot reach how
// a client gets in, nor a change at the door reach privilege.
func TestDependencies(t *testing.T) {
	deptest.Fence{
		Packages: []string{"./agent/transport"},
		Forbidden: map[string]string{
			"github.com/raspi-mcp/raspi-mcp/agent":          "the agent wires the doors, not the other way round",
			"github.com/raspi-mcp/raspi-mcp/agent/store":    "the doors audit through the agent's hook, not the store",
			"github.com/raspi-mcp/raspi-mcp/privhelper/...": "the doors need no privilege nor the helper's protocol",
			"github.com/raspi-mcp/raspi-mcp/hw/...":         "the doors read no device",
			"go.etcd.io/bbolt":                              "the doors keep no records of their own",
		},
	}.Check(t)
}

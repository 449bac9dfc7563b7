package tool_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// TestDependencies: the call pipeline knows no namespace and no device
// (issue 29). It validates, decides and shapes whatever tools the agent
// registers; the catalog, the audit store, the helper and the devices stay
// on the agent's side, so the pipeline's own tests need no bbolt and no
// helper, and a change to a tool cannot reach how every call is guarded.
func TestDependencies(t *testing.T) {
	deptest.Fence{
		Packages: []string{"./agent/tool"},
		Forbidden: map[string]string{
			"github.com/raspi-mcp/raspi-mcp/agent":           "the agent wires the pipeline and keeps the catalog, not the other way round",
			"github.com/raspi-mcp/raspi-mcp/agent/transport": "the pipeline takes calls from the server, whatever door they came in by",
			"github.com/raspi-mcp/raspi-mcp/agent/store":     "the pipeline audits through the agent, not the store",
			"github.com/raspi-mcp/raspi-mcp/privhelper/...":  "the pipeline needs no privilege nor the helper's protocol (the agent maps helper errors)",
			"github.com/raspi-mcp/raspi-mcp/hw/...":          "the pipeline reads no device",
			"go.etcd.io/bbolt":                               "the pipeline keeps no records of its own",
		},
	}.Check(t)
}

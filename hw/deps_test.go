// Package hw_test fences the device packages under hw/: one small interface
// per device family, with a Linux and a simulated backend, and nothing of
// how they are reached.
package hw_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

func TestDeviceDependencies(t *testing.T) {
	deptest.Fence{
		Packages: []string{"./hw/..."},
		Forbidden: map[string]string{
			"github.com/modelcontextprotocol/go-sdk/...":    "devices know no transport: MCP is the agent's",
			"go.etcd.io/bbolt/...":                          "devices keep no state; the agent's store does",
			"github.com/raspi-mcp/raspi-mcp/agent/...":      "the agent uses devices, not the other way round",
			"github.com/raspi-mcp/raspi-mcp/privhelper/...": "the helper wraps devices; a device calling the helper would loop through root",
			"github.com/raspi-mcp/raspi-mcp/bridge":         "devices know no transport",
			"github.com/raspi-mcp/raspi-mcp/config":         "a device takes its settings as arguments, so it is tested without a config file",
			"net/http":                                      "devices know no transport",
		},
	}.Check(t)
}

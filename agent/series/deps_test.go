package series_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// TestDependencies: series is pure functions over stored samples, tested
// against hand-computed series; it must stay free of I/O beyond the store's
// types.
func TestDependencies(t *testing.T) {
	deptest.Fence{
		Packages: []string{"./agent/series"},
		Forbidden: map[string]string{
			"github.com/modelcontextprotocol/go-sdk/...":    "series computes; the agent's tools speak MCP",
			"github.com/raspi-mcp/raspi-mcp/agent":          "the agent uses series, not the other way round",
			"github.com/raspi-mcp/raspi-mcp/hw/...":         "series reads stored samples, not devices",
			"github.com/raspi-mcp/raspi-mcp/privhelper/...": "series needs no privilege",
			"net/http": "series does no network I/O",
			"os/exec":  "series runs no programs",
		},
	}.Check(t)
}

package laptop_test

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// TestDependencies: the laptop side is a small binary for macOS, Windows and
// Linux; it links none of the Pi's parts, whose unix-only pieces (descriptor
// handover, peer credentials) would not build on Windows, and none of their
// size.
func TestDependencies(t *testing.T) {
	deptest.Fence{
		Packages: []string{"./laptop", "./cmd/raspi-mcp-laptop"},
		GOOS:     []string{"linux", "darwin", "windows"},
		Forbidden: map[string]string{
			"github.com/raspi-mcp/raspi-mcp/agent/...":      "the agent runs on the Pi",
			"github.com/raspi-mcp/raspi-mcp/bridge":         "the Pi's bridge hands descriptors over, which Windows cannot",
			"github.com/raspi-mcp/raspi-mcp/privhelper/...": "the root helper runs on the Pi",
			"github.com/raspi-mcp/raspi-mcp/hw/...":         "the laptop reads no device",
			"github.com/raspi-mcp/raspi-mcp/config":         "the laptop has no Pi config",
			"go.etcd.io/bbolt":                              "the laptop keeps no store",
		},
	}.Check(t)
}

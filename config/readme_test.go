package config

import (
	"os"
	"strings"
	"testing"
)

// The README's [[upstream]] example is a valid drop-in.
func TestReadmeUpstreamExample(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```toml\n# /etc/raspi-mcp/config.d/lan.toml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no lan.toml example")
	}
	c, err := Parse([]byte(block))
	if err != nil {
		t.Fatalf("README's lan.toml: %v", err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "hs4" || c.Upstreams[0].TokenRef() != "file:/etc/raspi-mcp/hs4.token" {
		t.Fatalf("upstreams: %+v", c.Upstreams)
	}
}

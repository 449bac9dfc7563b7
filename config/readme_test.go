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

// readmeBlock returns the README's TOML block that starts with the comment line first.
func readmeBlock(t *testing.T, first string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```toml\n"+first+"\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("README has no TOML block starting %q", first)
	}
	return block
}

// The README's HTTP drop-in and its Pi-behind-Pi upstream are valid drop-ins
// that say what the text around them says.
func TestReadmeHTTPExamples(t *testing.T) {
	c, err := Parse([]byte(readmeBlock(t, "# /etc/raspi-mcp/config.d/http.toml")))
	if err != nil {
		t.Fatalf("README's http.toml: %v", err)
	}
	if c.HTTP.Listen != "0.0.0.0:8443" || !c.HTTP.TLS || c.HTTP.Tokens != Default().HTTP.Tokens {
		t.Errorf("http: %+v", c.HTTP)
	}
	c, err = Parse([]byte(readmeBlock(t, "# /etc/raspi-mcp/config.d/fleet.toml (on the hallway Pi)")))
	if err != nil {
		t.Fatalf("README's fleet.toml: %v", err)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "garage" || c.Upstreams[0].TokenRef() != "file:/etc/raspi-mcp/garage.token" ||
		!strings.HasSuffix(c.Upstreams[0].URL, ":8443/mcp") {
		t.Errorf("upstreams: %+v", c.Upstreams)
	}
}

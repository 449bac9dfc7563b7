package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// sessionIn is a real MCP client session as principal p in protocol era
// era (""; the client's choice), over in-memory transports as r.session
// is, with the client's options (list_changed handlers).
func (r *rig) sessionIn(t testing.TB, p Principal, era string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := r.a.server.Connect(identity.NewContext(ctx, p), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var so *mcp.ClientSessionOptions
	if era != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: era}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, so)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; era != "" && got != era {
		t.Fatalf("negotiated %s, want %s", got, era)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// defaultSwitches sets every switch of the table to its value in a fresh
// install (config.Default()), leaving the rig's paths and allowlists.
func defaultSwitches(c *config.Config) {
	def := config.Default()
	for _, s := range config.Switches() {
		s.Set(c, s.On(&def))
	}
}

// TestMeasureToolsList prints what tools/list costs each principal: the
// number of tools and the bytes of the result, for the laptop config
// (every switch on) and the default one. It asserts nothing; -v shows the
// MEASURE lines.
func TestMeasureToolsList(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*config.Config)
		who  []Principal
	}{
		{"laptop", nil, []Principal{admin, operator, reader}},
		{"default", defaultSwitches, []Principal{admin, operator, reader}},
	} {
		r := newRig(t, c.mod)
		for _, p := range c.who {
			res, err := r.sessionIn(t, p, "2025-11-25", nil).ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("MEASURE config=%s role=%s tools=%d bytes=%d", c.name, p.Role, len(res.Tools), len(b))
		}
	}
}

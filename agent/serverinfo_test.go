package agent

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// In the 2026-07-28 era every result names the server; only the
// handshake's (server/discover's) carries its icon.
func TestServerInfoPerResultIsSlim(t *testing.T) {
	r := newSimRig(t, nil)
	dial := r.serveMany()
	ctx := context.Background()
	for _, era := range schemaEras {
		s := dial(nil, era)
		if info := s.InitializeResult().ServerInfo; info == nil || len(info.Icons) != 1 || info.Version != "test" {
			t.Errorf("era %s: handshake serverInfo %+v", era, info)
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "system_get_basic_info"})
		if err != nil {
			t.Fatal(err)
		}
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for what, meta := range map[string]mcp.Meta{"tools/call": res.Meta, "tools/list": tools.Meta} {
			info, ok := meta[mcp.MetaKeyServerInfo].(map[string]any)
			switch {
			case era < "2026-07-28" && meta[mcp.MetaKeyServerInfo] != nil:
				t.Errorf("era %s: %s has serverInfo %v", era, what, meta[mcp.MetaKeyServerInfo])
			case era < "2026-07-28":
			case !ok || info["name"] != "raspi-mcp" || info["version"] != "test" || info["icons"] != nil:
				t.Errorf("era %s: %s serverInfo %v", era, what, meta[mcp.MetaKeyServerInfo])
			}
		}
	}
}

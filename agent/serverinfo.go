package agent

import (
	"context"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// In the 2026-07-28 era go-sdk puts the server's Implementation in the
// _meta of every result (io.modelcontextprotocol/serverInfo, SEP-2575:
// a server identifies itself in each result), unless the result already
// has one. Ours holds the raspberry icon, so that was 590 bytes on every
// answer, an icon no client shows there. slimServerInfo gives the results
// of the methods that carry our content (tools, resources, prompts,
// completions) the server's name, title and version alone, which is the
// identity the SEP asks for; server/discover, initialize and the rest keep
// the SDK's full Implementation, icon included, which is where clients
// read it. docs/go-sdk-serverinfo-per-result.md is the upstream report.
func slimServerInfo(impl *mcp.Implementation) mcp.Middleware {
	slim := &mcp.Implementation{Name: impl.Name, Title: impl.Title, Version: impl.Version}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil || !modernRequest(req) {
				return res, err
			}
			switch res.(type) {
			case *mcp.CallToolResult, *mcp.ListToolsResult, *mcp.ListResourcesResult, *mcp.ListResourceTemplatesResult,
				*mcp.ReadResourceResult, *mcp.ListPromptsResult, *mcp.GetPromptResult, *mcp.CompleteResult:
				if reflect.ValueOf(res).IsNil() {
					return res, err
				}
				m := res.GetMeta()
				if m == nil {
					m = map[string]any{}
				}
				if _, ok := m[mcp.MetaKeyServerInfo]; !ok {
					m[mcp.MetaKeyServerInfo] = slim
					res.SetMeta(m)
				}
			}
			return res, err
		}
	}
}

// modernRequest is whether go-sdk serves req in the 2026-07-28 era, as it
// decides it: the request's _meta names a protocol version of 2026-07-28
// or later (it has refused the request already if the rest of the triple
// is missing).
func modernRequest(req mcp.Request) bool {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return false
	}
	v, _ := p.GetMeta()[mcp.MetaKeyProtocolVersion].(string)
	return v >= "2026-07-28"
}

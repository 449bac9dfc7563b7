package agent

import (
	"context"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
)

// Output schemas are served, not listed. tools/list leaves each tool's
// outputSchema out (tool.Tool.OutputSchema says why: more than half of the
// listing's bytes, shown to no model); every result's structuredContent
// still conforms to it, and a client or a person who wants it reads
// raspi://agent/schemas/{tool}, by wire name or canonical id.
const (
	tmplSchema = "raspi://agent/schemas/{tool}"
	mimeSchema = "application/schema+json"
)

// registerOutputSchemas adds the template. Any caller may read it (readBy
// ""): a schema says what a tool would answer, not anything of the device,
// and raspi://agent/contract names every tool already.
func (a *Agent) registerOutputSchemas(readBy map[string]string) {
	a.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tmplSchema, Name: "output_schema", Title: "A tool's output schema", MIMEType: mimeSchema,
		Description: "The JSON Schema of a tool's structuredContent (tools/list leaves it out); {tool} is its wire name or id."},
		resourceHandler(mimeSchema, ttlSchema, a.readOutputSchema))
	readBy[tmplSchema] = ""
}

// readOutputSchema answers raspi://agent/schemas/{tool}.
func (a *Agent) readOutputSchema(_ context.Context, req *mcp.ReadResourceRequest) (string, error) {
	u, err := url.Parse(req.Params.URI)
	if err != nil {
		return "", resourceError(tool.Errf(CodeInvalidArgument, "resource URI %q does not parse: %v", clip(req.Params.URI), err))
	}
	name, _ := strings.CutPrefix(u.Path, "/schemas/")
	t, ok := a.tools.Lookup(name)
	if !ok || t.OutputSchema() == nil {
		return "", resourceError(tool.Errf(CodeNotFound, "no tool %q with an output schema of ours", clip(name)).
			With("tool", clip(name)).Hint("name a tool as tools/list does, e.g. raspi://agent/schemas/system_get_health_snapshot"))
	}
	return string(t.OutputSchema()), nil
}

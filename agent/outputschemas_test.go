package agent

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tool lists no outputSchema; raspi://agent/schemas/{tool} serves the
// registry's, by wire name and by id, to a reader as to an admin, in both
// eras, and a real result conforms to the schema read from it.
func TestOutputSchemasServedNotListed(t *testing.T) {
	r := newSimRig(t, nil)
	ctx := context.Background()
	for _, era := range schemaEras {
		s := r.sessionIn(t, reader, era, nil)
		lt, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, listed := range lt.Tools {
			if listed.OutputSchema != nil {
				t.Errorf("era %s: %s lists an outputSchema", era, listed.Name)
			}
		}
		lrt, err := s.ListResourceTemplates(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, rt := range lrt.ResourceTemplates {
			found = found || rt.URITemplate == tmplSchema
		}
		if !found {
			t.Errorf("era %s: %s not listed to a reader", era, tmplSchema)
		}
		for _, tl := range r.a.tools.All() {
			for _, name := range []string{tl.Name(), tl.ID()} {
				res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://agent/schemas/" + name})
				if err != nil {
					t.Fatalf("era %s: read the schema of %s: %v", era, name, err)
				}
				if c := res.Contents[0]; c.MIMEType != mimeSchema || c.Text != string(tl.OutputSchema()) {
					t.Errorf("era %s: %s served %s %q, want the registry's %s", era, name, c.MIMEType, c.Text, tl.OutputSchema())
				}
			}
		}
		_, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "raspi://agent/schemas/no_such_tool"})
		if e := resErr(t, err); e.Code != CodeNotFound || e.FixHint == "" {
			t.Errorf("era %s: unknown tool: %+v", era, e)
		}
	}

	// What a client that wants to check a result does: the schema from the
	// resource, the result from a call.
	s := r.sessionIn(t, admin, "", nil)
	var schema jsonschema.Schema
	if err := json.Unmarshal([]byte(readText(t, s, "raspi://agent/schemas/system_get_health_snapshot")), &schema); err != nil {
		t.Fatal(err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "system_get_health_snapshot", Arguments: map[string]any{}})
	if err != nil || res.IsError || res.StructuredContent == nil {
		t.Fatalf("health: %v %+v", err, res)
	}
	var sc any
	js, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(js, &sc); err != nil {
		t.Fatal(err)
	}
	if err := resolved.Validate(sc); err != nil {
		t.Errorf("structuredContent does not conform to the served schema: %v", err)
	}
}

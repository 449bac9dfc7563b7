package agent

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// checkIcon decodes the data URI and parses the SVG: a client that renders
// it must not meet broken XML.
func checkIcon(t *testing.T, what string, icons []mcp.Icon) {
	t.Helper()
	if len(icons) != 1 || icons[0].MIMEType != "image/svg+xml" {
		t.Fatalf("%s: icons %+v", what, icons)
	}
	b64, ok := strings.CutPrefix(icons[0].Source, "data:image/svg+xml;base64,")
	if !ok {
		t.Fatalf("%s: src %.40q is not a base64 SVG data URI", what, icons[0].Source)
	}
	svg, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var root struct {
		XMLName xml.Name
		ViewBox string `xml:"viewBox,attr"`
	}
	if err := xml.Unmarshal(svg, &root); err != nil || root.XMLName.Local != "svg" || root.ViewBox != "0 0 24 24" {
		t.Errorf("%s: svg %s: %v", what, svg, err)
	}
	if len(icons[0].Source) > 700 {
		t.Errorf("%s: icon is %d bytes; every tools/list carries it", what, len(icons[0].Source))
	}
}

// A client sees the server's title and icon in the handshake, and each
// tool with its title and no icon: the server's icon is the one clients
// show, and per-tool icons were a sixth of every tools/list.
func TestIconsAndTitlesOnTheWire(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	info := s.InitializeResult().ServerInfo
	if info.Title != "Raspberry Pi" {
		t.Errorf("server title %q", info.Title)
	}
	checkIcon(t, "server", info.Icons)
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if tl.Title == "" || len(tl.Icons) != 0 || tl.Meta["namespace_title"] != nil {
			t.Errorf("%s: title %q, icons %d, namespace title %v", tl.Name, tl.Title, len(tl.Icons), tl.Meta["namespace_title"])
		}
	}
}

// Codex keeps only the first line of the instructions: that line alone
// carries the rule, and the rest points to the contract.
func TestInstructionsSurviveTruncation(t *testing.T) {
	r := newSimRig(t, nil)
	got := r.serve().InitializeResult().Instructions
	first, rest, _ := strings.Cut(got, "\n")
	for _, want := range []string{"real Raspberry Pi", "dry_run: true", "the person", "confirm: true"} {
		if !strings.Contains(first, want) {
			t.Errorf("first line lacks %q: %q", want, first)
		}
	}
	if !strings.Contains(rest, "raspi://agent/contract") || !strings.Contains(rest, "system_get_capabilities") {
		t.Errorf("rest does not point to the contract and the start: %q", rest)
	}
	if len(got) > 600 {
		t.Errorf("instructions are %d bytes; the contract resource holds the detail", len(got))
	}
}

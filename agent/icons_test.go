package agent

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Every namespace of ours has a title and an icon, so a new namespace
// cannot ship without one.
func TestEveryNamespaceHasALook(t *testing.T) {
	for _, ns := range config.Namespaces() {
		l, ok := namespaceLook(ns.Name)
		if !ok || l.title == "" {
			t.Errorf("namespace %q has no title or icon", ns.Name)
			continue
		}
		checkIcon(t, ns.Name, l.icons())
	}
	if _, ok := namespaceLook("lan-nas"); ok {
		t.Error("an upstream's namespace got one of our icons")
	}
}

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
// tool with its namespace's icon and title.
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
		ns, _, _ := strings.Cut(tl.Meta["id"].(string), ".")
		l, _ := namespaceLook(ns)
		if tl.Title == "" || tl.Meta["namespace_title"] != l.title {
			t.Errorf("%s: title %q, namespace title %v", tl.Name, tl.Title, tl.Meta["namespace_title"])
		}
		checkIcon(t, tl.Name, tl.Icons)
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

package agent

import (
	"encoding/base64"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Icons and titles let a client's tool picker show raspi-mcp and each of
// its namespaces at a glance. They are tiny 24×24 line drawings in one
// raspberry colour that reads on light and dark backgrounds, sent as
// base64 SVG data URIs (every tool carries its namespace's, so each costs
// a few hundred bytes of tools/list, never a fetch: the device may have no
// route to anything).

// look is how a namespace shows in a client.
type look struct {
	title string
	svg   string // the drawing inside the common <svg> element
}

// namespaceLook is the title and drawing of a namespace; ok is false for a
// name that is not one of ours (an upstream's tools keep their own).
func namespaceLook(ns string) (look, bool) {
	switch ns {
	case "system":
		return look{"System", "<rect x='5' y='5' width='14' height='14' rx='2'/><path d='M9 1v4M15 1v4M9 19v4M15 19v4M1 9h4M1 15h4M19 9h4M19 15h4'/>"}, true
	case "metrics":
		return look{"Metrics", "<path d='M3 3v18h18'/><path d='M7 15l4-5 3 3 5-7'/>"}, true
	case "logs":
		return look{"Logs and audit", "<path d='M6 2h9l4 4v16H6z'/><path d='M9 10h7M9 14h7M9 18h4'/>"}, true
	case "manage":
		return look{"Server management", "<path d='M4 6h16M4 12h16M4 18h16'/><circle cx='9' cy='6' r='2'/><circle cx='15' cy='12' r='2'/><circle cx='7' cy='18' r='2'/>"}, true
	case "network":
		return look{"Network", "<circle cx='12' cy='4' r='2'/><circle cx='4' cy='20' r='2'/><circle cx='20' cy='20' r='2'/><path d='M12 6v6M12 12l-7 6M12 12l7 6'/>"}, true
	case "service":
		return look{"Services", "<circle cx='12' cy='12' r='10'/><path d='M10 8l6 4-6 4z'/>"}, true
	case "process":
		return look{"Processes", "<rect x='3' y='4' width='18' height='16' rx='2'/><path d='M7 9l3 3-3 3M12 15h5'/>"}, true
	case "gpio":
		return look{"GPIO pins", "<rect x='2' y='7' width='20' height='10' rx='1'/><path d='M6 10v0M10 10v0M14 10v0M18 10v0M6 14v0M10 14v0M14 14v0M18 14v0' stroke-linecap='round' stroke-width='3'/>"}, true
	case "i2c":
		return look{"I2C bus", "<path d='M2 8h20M2 16h20M7 8v8M17 8v8'/><circle cx='7' cy='12' r='1'/><circle cx='17' cy='12' r='1'/>"}, true
	case "sensors":
		return look{"Sensors", "<path d='M10 4a2 2 0 0 1 4 0v10a4 4 0 1 1-4 0z'/><path d='M12 10v7'/>"}, true
	case "camera":
		return look{"Camera", "<path d='M3 7h4l2-3h6l2 3h4v13H3z'/><circle cx='12' cy='13' r='4'/>"}, true
	case "change":
		return look{"Prepared changes", "<path d='M4 12a8 8 0 0 1 14-5l2 2M20 12a8 8 0 0 1-14 5l-2-2'/><path d='M20 4v5h-5M4 20v-5h5'/>"}, true
	case "jobs":
		return look{"Jobs", "<circle cx='12' cy='12' r='10'/><path d='M12 6v6l4 2'/>"}, true
	case "selftest":
		return look{"Self-test", "<circle cx='12' cy='12' r='10'/><path d='M7 12l3 3 7-7'/>"}, true
	}
	return look{}, false
}

// serverLook is raspi-mcp's own: a raspberry.
func serverLook() look {
	return look{"Raspberry Pi", "<path d='M12 7c-1-3-4-4-6-3 1 2 3 3 6 3 3 0 5-1 6-3-2-1-5 0-6 3z'/><circle cx='12' cy='12' r='3'/><circle cx='7.5' cy='15' r='3'/><circle cx='16.5' cy='15' r='3'/><circle cx='12' cy='19' r='3'/>"}
}

// icons is the look's drawing as the one icon a client needs: SVG scales,
// so one "any" size serves every picker.
func (l look) icons() []mcp.Icon {
	svg := "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 24 24' fill='none' stroke='#c51a4a' stroke-width='2' stroke-linejoin='round'>" + l.svg + "</svg>"
	return []mcp.Icon{{Source: "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(svg)), MIMEType: "image/svg+xml", Sizes: []string{"any"}}}
}

// toolLook is the look of a local tool: its id's namespace.
func toolLook(id string) (look, bool) {
	ns, _, _ := strings.Cut(id, ".")
	return namespaceLook(ns)
}

// decorate gives a local tool's listing its namespace's look: icons and
// the namespace's title (tool.Options.Decorate).
func decorate(id string, t *mcp.Tool) {
	if l, ok := toolLook(id); ok {
		t.Icons = l.icons()
		t.Meta["namespace_title"] = l.title
	}
}

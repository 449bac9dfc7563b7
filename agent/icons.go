package agent

import (
	"encoding/base64"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The server's title and icon let a client's server list show raspi-mcp
// at a glance: a tiny 24×24 line drawing in one raspberry colour that
// reads on light and dark backgrounds, sent as a base64 SVG data URI
// (never a fetch: the device may have no route to anything).
//
// Tools carry no icons. Each tool once carried its namespace's (13
// drawings, about 400 bytes each): 22 KB of every tools/list, a sixth of
// it, for pickers that showed them on few clients; the server's icon in
// the handshake is the one clients show. A tool's namespace is the first
// part of its _meta.id, and its title says what it does.

// look is how the server shows in a client.
type look struct {
	title string
	svg   string // the drawing inside the common <svg> element
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

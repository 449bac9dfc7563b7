package agent

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Every registered tool sits in a namespace of config's switches table and
// names its write switch from that table, under that namespace; every
// namespace and switch of the table is named by some tool or says why it is
// reserved. A namespace or switch added on one side only fails here.
func TestToolsUseSwitchTable(t *testing.T) {
	r := newRig(t, nil)
	usedNS := map[string]bool{}
	usedSwitch := map[config.Switch]bool{}
	for _, tl := range r.a.tools.All() {
		if tl.LAN() {
			continue
		}
		ns, ok := config.NamespaceSwitch(tl.Rule().Domain)
		if !ok {
			t.Errorf("%s: namespace %q is not in config's switches table", tl.ID(), tl.Rule().Domain)
			continue
		}
		usedNS[tl.Rule().Domain] = true
		usedSwitch[ns] = true
		g := tl.Rule().Gate
		switch {
		case g == config.NoSwitch:
		case !g.Valid():
			t.Errorf("%s: gate %d is not a switch of the table", tl.ID(), g)
		case g.Within() != ns || !g.Write():
			t.Errorf("%s: gate %s is not a write switch of [%s] (namespace switch %s)", tl.ID(), g, tl.Rule().Domain, ns)
		default:
			usedSwitch[g] = true
		}
	}
	for _, n := range config.Namespaces() {
		if !usedNS[n.Name] && n.Reserved == "" {
			t.Errorf("namespace %q: no tool uses it and it is not marked reserved", n.Name)
		}
		if usedNS[n.Name] && n.Reserved != "" {
			t.Errorf("namespace %q: marked reserved but used", n.Name)
		}
	}
	for _, s := range config.Switches() {
		if !usedSwitch[s] && s.Reserved() == "" {
			t.Errorf("%s: no tool names it and it is not marked reserved", s.Key())
		}
	}
}

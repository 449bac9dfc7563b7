package privhelper

import (
	"fmt"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Policy is the helper's own view of what is allowed, built once per reading
// of the root-owned config (OptionsFromConfig, at start and at each reload)
// and re-checked on every request: who may connect, the switches and the
// allowlists. The helper never takes the agent's word on any of it.
//
// Switches are read in one way only: through Allows and Server.require, by
// their config.Switch (config/switches.go), which names the key, the field
// and the table's enabled switch. No handler reads a switch's field of
// Config itself, so every switch is enforced alike, a write switch counts
// only with its table's enabled switch on (config.Switch.Effective), and
// every refusal has the same shape; switches_test.go checks all of it for
// every write switch and every method of the protocol.
type Policy struct {
	AgentUID int // the only non-root uid allowed to connect
	// Config is the owner's config as the helper read it: its switches
	// (read through Allows) and its allowlists: [gpio] pins, [i2c] read,
	// write and sensors, [service] allow, [process] allowed_signals, and
	// [manage] update_health_timeout.
	Config config.Config
	// ProtectedUIDs are the uids of [process] protected_users, resolved
	// once when the config is read.
	ProtectedUIDs []int
}

// allowsPeer reports whether a peer with this uid may talk to the helper.
func (p *Policy) allowsPeer(uid int) bool { return uid == 0 || uid == p.AgentUID }

// Allows reports whether sw lets its methods run: its own key and, for a
// write switch, its table's enabled switch.
func (p *Policy) Allows(sw config.Switch) bool { return sw.Effective(&p.Config) }

// off is the switch that keeps sw from letting its methods run (its
// table's enabled switch when that is off, else sw), or NoSwitch.
func (p *Policy) off(sw config.Switch) config.Switch {
	switch {
	case !sw.Within().On(&p.Config):
		return sw.Within()
	case !sw.On(&p.Config):
		return sw
	}
	return config.NoSwitch
}

// powerSwitch is the switch of a power action; NoSwitch for an action the
// helper does not know (the request's Validate refuses those first).
func powerSwitch(action string) config.Switch {
	switch action {
	case proto.ActionReboot:
		return config.SwitchSystemReboot
	case proto.ActionPoweroff:
		return config.SwitchSystemShutdown
	}
	return config.NoSwitch
}

// require is nil when sw lets its methods run. Otherwise it is the helper's
// one refusal of a request a switch gates: permission_denied, saying what
// was refused (what, as "gpio writes are disabled"), naming the switch that
// is off (details "switch", "gpio.writes", and "config_key", "[gpio]
// writes", as the agent's refusals name it) and how the owner turns it on.
func (s *Server) require(sw config.Switch, what string, args ...any) error {
	off := s.rules().policy.off(sw)
	if off == config.NoSwitch {
		return nil
	}
	file := s.cfgPath
	if file == "" {
		file = config.DefaultPath
	}
	return proto.Errorf(proto.CodePermissionDenied,
		"privhelper: %s by the helper's config: switch %s is off (the owner sets %s = true in %s, then systemctl reload raspi-mcp)",
		fmt.Sprintf(what, args...), off.Path(), off.Key(), file).
		With("switch", off.Path()).With("config_key", off.Key())
}

package agent

import (
	"fmt"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// parseRisk reads a risk name from config; config.Validate has vetted it.
func parseRisk(s string) Risk {
	switch s {
	case "low":
		return RiskLow
	case "high":
		return RiskHigh
	case "critical":
		return RiskCritical
	}
	return RiskRead
}

// Risk says how much guarding a tool needs before it runs.
type Risk int

// Risks: read changes nothing; low is a reversible write (GPIO, PWM);
// high disrupts (reboot, service control) and needs confirm + reason;
// critical loses something (shutdown, OS upgrade) and needs a change token.
const (
	RiskRead Risk = iota
	RiskLow
	RiskHigh
	RiskCritical
)

func (r Risk) String() string {
	return [...]string{"read", "low", "high", "critical"}[r]
}

// Rule is what the policy knows about a tool.
type Rule struct {
	Tool    string // canonical id, "system.reboot"
	Domain  string // "system"; filled from Tool unless the tool sits under another switch
	MinRole identity.Role
	Risk    Risk
	Gate    config.Switch // config.NoSwitch: no write switch beyond the domain's
}

// Guard is the caller's guard arguments.
type Guard struct {
	DryRun  bool
	Confirm bool
	Reason  string
	Intent  string // the caller's larger goal: audited, never decides anything
}

// domainEnabled reports a namespace's enable switch and its config key,
// from config's switches table. change.* and the LAN domains have no switch
// of their own: change follows the tool it acts on, an upstream has enabled
// in its [[upstream]] entry.
func domainEnabled(c *config.Config, domain string) (bool, string) {
	s, _ := config.NamespaceSwitch(domain)
	return s.On(c), s.Key()
}

// Decide is the policy decision for one call: nil means go ahead. It is a pure
// function of config, principal, rule and guard so the whole table is tested.
// committed is true when the call comes through change_commit with a valid
// token. A dry run passes the same role and switch checks as the real call (so
// a passing dry run means the real one would pass) but needs no confirm or token.
func Decide(c *config.Config, p identity.Principal, r Rule, g Guard, committed bool) *ToolError {
	if p.Role == identity.RoleNone {
		return errf(CodePermissionDenied, "%s has no role on this device", p.Name).
			with("principal", p.Name).
			hint(fmt.Sprintf("an admin maps the user in %s: [roles] users = { %s = \"read\" }", config.DefaultPath, p.Name))
	}
	if p.Role < r.MinRole {
		return errf(CodePermissionDenied, "%s needs role %s; %s has role %s", r.Tool, r.MinRole, p.Name, p.Role).
			with("tool", r.Tool).with("required_role", r.MinRole.String()).with("role", p.Role.String()).
			hint("ask the device owner for a higher role in [roles] of " + config.DefaultPath)
	}
	if on, key := domainEnabled(c, r.Domain); !on {
		return errf(CodePermissionDenied, "the %s namespace is disabled on this device", r.Domain).
			with("domain", r.Domain).with("config_key", key).
			hint("the owner enables it with " + key + " = true in " + config.DefaultPath)
	}
	if !r.Gate.On(c) { // NoSwitch is always on
		key := r.Gate.Key()
		return errf(CodePermissionDenied, "%s is switched off on this device (writes are off by default)", r.Tool).
			with("tool", r.Tool).with("config_key", key).
			hint("the owner allows it with " + key + " = true in " + config.DefaultPath + " and restarts raspi-mcp")
	}
	if g.DryRun || committed {
		return nil
	}
	switch r.Risk {
	case RiskHigh:
		if !g.Confirm || g.Reason == "" {
			return errf(CodeFailedPrecondition, "%s is a high-risk action: call it again with confirm: true and a reason", r.Tool).
				with("tool", r.Tool).with("risk", r.Risk.String()).with("missing", missingGuards(g)).
				hint("a dry run (dry_run: true) shows what would happen without doing it")
		}
	case RiskCritical:
		return errf(CodeFailedPrecondition, "%s is critical: prepare it with change_prepare, then run it with change_commit and the token", r.Tool).
			with("tool", r.Tool).with("risk", r.Risk.String()).
			hint("change_prepare returns a single-use token bound to the exact arguments")
	}
	return nil
}

func missingGuards(g Guard) []string {
	m := []string{}
	if !g.Confirm {
		m = append(m, "confirm")
	}
	if g.Reason == "" {
		m = append(m, "reason")
	}
	return m
}

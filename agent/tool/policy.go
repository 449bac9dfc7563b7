package tool

import (
	"fmt"
	"strings"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// ParseRisk reads a risk name from config; config.Validate has vetted it.
func ParseRisk(s string) Risk {
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

// DomainEnabled reports a namespace's enable switch and its config key,
// from config's switches table. change.* and the LAN domains have no switch
// of their own: change follows the tool it acts on, an upstream has enabled
// in its [[upstream]] entry.
func DomainEnabled(c *config.Config, domain string) (bool, string) {
	s, _ := config.NamespaceSwitch(domain)
	return s.On(c), s.Key()
}

// Decide is the policy decision for one call: nil means go ahead. It is a pure
// function of config, principal, rule and guard so the whole table is tested.
// committed is true when the call comes through change_commit with a valid
// token. A dry run passes the same role and switch checks as the real call (so
// a passing dry run means the real one would pass) but needs no confirm or token.
func Decide(c *config.Config, p identity.Principal, r Rule, g Guard, committed bool) *Error {
	if p.Role == identity.RoleNone {
		return Errf(errcode.PermissionDenied, "%s has no role on this device", p.Name).
			With("principal", p.Name).
			Hint(fmt.Sprintf("an admin maps the user in %s: [roles] users = { %s = \"read\" }", config.DefaultPath, p.Name))
	}
	if p.Role < r.MinRole {
		return Errf(errcode.PermissionDenied, "%s needs role %s; %s has role %s", r.Tool, r.MinRole, p.Name, p.Role).
			With("tool", r.Tool).With("required_role", r.MinRole.String()).With("role", p.Role.String()).
			Hint("ask the device owner for a higher role in [roles] of " + config.DefaultPath)
	}
	if perr := decideProfile(c, p, r); perr != nil {
		return perr
	}
	if on, key := DomainEnabled(c, r.Domain); !on {
		return Errf(errcode.PermissionDenied, "the %s namespace is disabled on this device", r.Domain).
			With("domain", r.Domain).With("config_key", key).
			Hint("the owner enables it with " + key + " = true in " + config.DefaultPath)
	}
	if !r.Gate.On(c) { // NoSwitch is always on
		key := r.Gate.Key()
		return Errf(errcode.PermissionDenied, "%s is switched off on this device (writes are off by default)", r.Tool).
			With("tool", r.Tool).With("config_key", key).
			Hint("the owner allows it with " + key + " = true in " + config.DefaultPath + " and restarts raspi-mcp")
	}
	if g.DryRun || committed {
		return nil
	}
	switch r.Risk {
	case RiskHigh:
		if !g.Confirm || g.Reason == "" {
			return Errf(errcode.FailedPrecondition, "%s is a high-risk action: call it again with confirm: true and a reason", r.Tool).
				With("tool", r.Tool).With("risk", r.Risk.String()).With("missing", missingGuards(g)).
				Hint("a dry run (dry_run: true) shows what would happen without doing it")
		}
	case RiskCritical:
		return Errf(errcode.FailedPrecondition, "%s is critical: prepare it with change_prepare, then run it with change_commit and the token", r.Tool).
			With("tool", r.Tool).With("risk", r.Risk.String()).
			Hint("change_prepare returns a single-use token bound to the exact arguments")
	}
	return nil
}

// decideProfile refuses a call outside the principal's profile: a tool of a
// namespace its toolsets leave out, or one that is not a read under
// read_only. It comes after the role, which it can only narrow, and before
// the switches, whose fix (turn it on) would not help. The profile's
// definition is read from c, so a reload that changes it applies to the
// next decision; a profile c does not define refuses everything.
func decideProfile(c *config.Config, p identity.Principal, r Rule) *Error {
	prof, ok := c.LookupProfile(p.Profile)
	if !ok {
		return Errf(errcode.PermissionDenied, "%s is narrowed by profile %q, which this device does not define: it may call nothing", p.Name, p.Profile).
			With("principal", p.Name).With("profile", p.Profile).
			Hint("the device owner defines [profiles." + p.Profile + "] in " + config.DefaultPath + ", or gives " + p.Name + " another profile")
	}
	if !prof.Narrows() {
		return nil
	}
	ns, _, _ := strings.Cut(r.Tool, ".")
	inToolsets, readOK := prof.AllowsNamespace(ns), !prof.ReadOnly || r.Risk == RiskRead
	if inToolsets && readOK {
		return nil
	}
	why := "its namespace " + ns + " is not in the profile's toolsets"
	if inToolsets {
		why = "it is a " + r.Risk.String() + "-risk tool and the profile allows reads only"
	}
	toolsets := prof.Toolsets
	if toolsets == nil {
		toolsets = []string{"*"}
	}
	return Errf(errcode.PermissionDenied, "%s is outside profile %q of %s: %s (the profile allows %s)", r.Tool, p.Profile, p.Name, why, prof.Describe()).
		With("tool", r.Tool).With("profile", p.Profile).With("toolsets", toolsets).With("read_only", prof.ReadOnly).
		Hint("a profile narrows what " + p.Name + " may call whatever its role; the device owner changes it in [roles] or [profiles] of " +
			config.DefaultPath + ", or with raspi-mcp token create --profile")
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

// narrowing is a principal's profile as the audit record keeps it: "" for
// none and for the built-in "all", which narrow nothing.
func narrowing(profile string) string {
	if profile == config.ProfileAll {
		return ""
	}
	return profile
}

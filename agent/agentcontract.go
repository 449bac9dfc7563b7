package agent

import (
	"fmt"
	"strings"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
)

// contract is raspi://agent/contract: how a model should work with this
// server. The tool lists come from the registry at read time, so the text
// cannot drift from what the server serves (LAN tools included).
func (a *Agent) contract() string {
	byRisk := map[tool.Risk][]string{}
	for _, t := range a.tools.All() {
		byRisk[t.Rule().Risk] = append(byRisk[t.Rule().Risk], t.Name())
	}
	list := func(r tool.Risk) string {
		if len(byRisk[r]) == 0 {
			return "(none)"
		}
		return strings.Join(byRisk[r], ", ")
	}
	w := a.wire
	// What a critical call needs follows [guard] critical: the owner at
	// the Pi, or the client's change token.
	criticalGuard := "they wait for the owner's approval on the Pi itself: the button or `sudo raspi-mcp approve`"
	if !a.conf().Guard.DeviceApproves("critical") {
		criticalGuard = fmt.Sprintf("need %s first, then %s with the single-use token", w("change.prepare"), w("change.commit"))
	}
	deviceNote := "A call that waits for the Pi sends a message saying where to press or what to run: relay it to the person word for word and wait; a configuration change that widens a power always waits for the Pi. You cannot approve such a call yourself, and a decline or timeout is final."
	// The same rule the server's instructions open with, for clients that
	// keep only their first line.
	firstRule, _, _ := strings.Cut(instructions, "\n")
	var b strings.Builder
	fmt.Fprintf(&b, `# Working with raspi-mcp

The one rule: %s
Every change is audited with your reason.

## Start
1. Read %s (under 1,500 bytes) or call %s to see what this device has and what your role may do.
2. Prefer resources for context (%s, %s, %s) and tools for actions. Subscribe to %s or %s to hear when throttling, a failed unit, the helper or an upstream changes.
3. A tool's result is its structuredContent; its JSON Schema is raspi://agent/schemas/{tool}, should you need it before calling.

## Guard arguments
Every tool that changes something takes the same four; the tools' own schemas only name them.
- dry_run: true checks policy (role, switches, allowlists) and answers with the plan; nothing changes. A passing dry run means the real call would pass policy.
- confirm: true only once the person has agreed to this very call; required at high risk.
- reason: why, in the person's words (at most 200 characters); recorded in the audit trail; required at high risk.
- intent: the larger goal the call serves, e.g. "free disk space before the update" (at most 200 characters); recorded in the audit trail.

## Guards, by risk
A tool's description ends with its risk and the role it needs.
- read (change nothing, no guard): %s
- low (reversible writes; take dry_run, reason, intent): %s
- high (disruptive; need confirm: true and a reason): %s
- critical (lose something; %s): %s

%s
When the client can ask the person, high and critical calls may be put to them before they run: a decline is final, do not retry it or route around it.

## Errors
A failed call has isError and an error object (in the text block and in _meta.error): code (invalid_argument, not_found, permission_denied, failed_precondition, resource_exhausted, unavailable, internal), message, details, retryable, fix_hint and suggested_next_tool_calls.
Follow fix_hint and the suggested calls; retry only when retryable is true. A refused resource read or prompt is a JSON-RPC error whose data holds the same object.

## Never
- Never retry a permission_denied call with other arguments to get around it, and never ask for a higher role yourself: the owner decides in the config.
- Never type confirm: true or invent a reason the person did not give.
- Never reuse a change token for other arguments, and never schedule a reboot or shutdown the person did not ask for.
- Never read secrets: configuration shows only env: and file: references.
`, firstRule, uriSummary, w("system.get_capabilities"), uriHealth, uriPins, "raspi://metrics/{metric}", uriSummary, uriHealth,
		list(tool.RiskRead), list(tool.RiskLow), list(tool.RiskHigh), criticalGuard, list(tool.RiskCritical), deviceNote)
	return b.String()
}

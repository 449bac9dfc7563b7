package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// Prompts are recipes a person picks in the client ("diagnose throttling").
// Each returns one user message that names the exact tools (wire names from
// the registry) and resources to use, in order; they run nothing themselves,
// so they need no policy beyond the tools they name. prompts/list shows each
// to whoever may call the tool it is for (lists.go).

type promptDef struct {
	p *mcp.Prompt
	// tool is the tool the recipe is for: the prompt is listed to whoever
	// may call it now (lists.go), since to anyone else it leads to a refusal.
	tool string
	text func(args map[string]string) (string, error)
}

// prompts are the agent's prompts: they read the allowlists in force (the
// units a restart is offered for, the pins by label) and name tools by their
// wire names.
type prompts struct {
	conf func() *config.Config
	wire func(string) string
}

func (a *Agent) prompts() prompts { return prompts{conf: a.conf, wire: a.wire} }

// defs are the prompts with their texts.
func (pr prompts) defs() []promptDef {
	w := pr.wire
	return []promptDef{
		{&mcp.Prompt{Name: "diagnose_throttling", Title: "Diagnose throttling",
			Description: "Find out whether and why this Pi throttles: heat or power, now and over the last day.",
			Arguments:   []*mcp.PromptArgument{{Name: "window", Description: "how far back to look, e.g. 24h (default)"}}},
			"metrics.get_summary", func(args map[string]string) (string, error) {
				win := args["window"]
				if win == "" {
					win = "24h"
				}
				return fmt.Sprintf(`Diagnose throttling on this Raspberry Pi over the last %[1]s.
1. Read %[2]s: throttle.now and throttle.since_boot say whether under_voltage, freq_capped, throttled or soft_temp_limit is on now or happened since boot.
2. Call %[3]s with {"window": "%[1]s"} for throttling and under-voltage episodes and temperature peaks.
3. Read raspi://metrics/cpu_temperature_celsius?window=%[1]s and raspi://metrics/throttled?window=%[1]s to line the episodes up with temperature.
4. Under-voltage means the power supply or cable, not the load: say so. Throttling with temperature above 80 °C means cooling.
5. Answer with the cause, the evidence (times and values) and what the person should change. Change nothing on the device.`,
					win, uriSummary, w("metrics.get_summary")), nil
			}},
		{&mcp.Prompt{Name: "why_did_it_reboot", Title: "Why did it reboot?",
			Description: "Explain the last reboot: the previous boot's journal, power actions in the audit trail, under-voltage history."},
			"logs.query_journal", func(map[string]string) (string, error) {
				return fmt.Sprintf(`Find out why this Raspberry Pi last rebooted.
1. Read %[1]s for the uptime (when it booted) and throttle.since_boot (under_voltage there points at power).
2. Call %[2]s with {"tool": "system.*"} to see whether someone scheduled a reboot or shutdown through raspi-mcp, and who, with which reason.
3. Call %[3]s with {"since": "2d", "priority": "warning", "limit": 100} for the kernel's and systemd's warnings before the boot (watchdog, oom-killer, under-voltage detected, panic).
4. Call %[4]s with {"window": "48h"} for under-voltage and temperature episodes before the boot.
5. Answer with the most likely cause and the evidence; say plainly when the evidence does not decide it. Change nothing.`,
					uriSummary, w("logs.get_recent_audit_logs"), w("logs.query_journal"), w("metrics.get_summary")), nil
			}},
		{&mcp.Prompt{Name: "triage_failed_unit", Title: "Triage a failed unit",
			Description: "Work out why a systemd unit failed and what would fix it.",
			Arguments:   []*mcp.PromptArgument{{Name: "unit", Description: "the unit, e.g. nginx.service", Required: true}}},
			"service.get_status", func(args map[string]string) (string, error) {
				unit, err := unitName(args["unit"])
				if err != nil {
					return "", err
				}
				restart := "it is not in [service] allow, so do not try to restart it: tell the person what to change"
				if allowedUnit(pr.conf(), unit) {
					restart = fmt.Sprintf(`if a restart is the fix and the person agrees, call %s with {"service_name": "%s", "action": "restart", "dry_run": true} first, then for real with confirm: true and their reason`, w("service.control_service"), unit)
				}
				return fmt.Sprintf(`Triage the failed unit %[1]s.
1. Call %[2]s with {"service_name": "%[1]s", "log_lines": 50} (or read raspi://service/%[1]s if it is an allowed unit) for its state, exit code and restart count.
2. Call %[3]s with {"unit": "%[1]s", "since": "1h", "limit": 200} (or read raspi://journal/%[1]s?lines=200) for the lines around the failure.
3. Call %[4]s with {"service_name": "%[1]s"} if the unit file itself may be wrong.
4. Read %[5]s: disk full, memory pressure or under-voltage can fail a unit too.
5. Explain the cause; %[6]s.`,
					unit, w("service.get_status"), w("logs.query_journal"), w("service.validate_unit_file"), uriSummary, restart), nil
			}},
		{&mcp.Prompt{Name: "safe_gpio_change", Title: "Change a GPIO pin safely",
			Description: "Change an allowlisted pin with a dry run first and a timed revert, so a mistake undoes itself.",
			Arguments:   []*mcp.PromptArgument{{Name: "pin", Description: "BCM number or name of an allowlisted pin", Required: true}}},
			"gpio.write_pin", func(args map[string]string) (string, error) {
				pin, ok := pr.pinByLabel(args["pin"])
				if !ok {
					return "", tool.Errf(CodeInvalidArgument, "pin %q is not on this device's allowlist ([[gpio.pins]])", args["pin"]).
						With("pin", args["pin"]).Hint("complete the pin argument for the allowed pins, or read " + uriPins)
				}
				return fmt.Sprintf(`Change GPIO%[1]d (%[2]s) safely.
1. Read %[3]s (or call %[4]s with {"pin": %[1]d}) for its mode, value and safe state.
2. Ask the person what the pin drives and what the change should do, if they have not said.
3. Call %[5]s with {"pin": %[1]d, "value": "high" or "low", "duration_ms": 10000, "dry_run": true, "reason": "<their reason>"} and show the plan.
4. Then the same call without dry_run: duration_ms makes it revert by itself, so a wrong change undoes itself; check the effect with %[4]s.
5. Only when the person confirms it works, make it lasting (without duration_ms). Never touch a pin that is not on the allowlist.`,
					pin.Pin, pinLabel(pin), uriPins, w("gpio.read_pin"), w("gpio.write_pin")), nil
			}},
		{&mcp.Prompt{Name: "weekly_health_report", Title: "Weekly health report",
			Description: "A short report on the last seven days: temperature, throttling, failed units, denials, disk."},
			"metrics.get_summary", func(map[string]string) (string, error) {
				return fmt.Sprintf(`Write a short weekly health report for this Raspberry Pi.
1. Read %[1]s for the state now.
2. Call %[2]s with {"window": "7d"} for min/avg/max/p95, throttling and under-voltage episodes and anomalies.
3. Read raspi://metrics/disk_percent?window=168h&resolution=1h for the disk trend.
4. Call %[3]s with {"only_errors": true, "limit": 50} for denied and failed calls this week.
5. Call %[4]s with {"state": "failed"} for failed units.
6. Report in five lines or fewer: what is fine, what needs attention, and one recommendation. Change nothing.`,
					uriSummary, w("metrics.get_summary"), w("logs.get_recent_audit_logs"), w("service.list_services")), nil
			}},
	}
}

// registerPrompts adds the prompts. It returns, for the lists shaped by
// policy (lists.go), the tool each prompt is for keyed by name, and a
// prompt to announce a change of the prompts list with: adding it again,
// unchanged, makes the server tell every session the list changed.
func (a *Agent) registerPrompts() (forTool map[string]string, again func()) {
	defs := a.prompts().defs()
	forTool = make(map[string]string, len(defs))
	for _, d := range defs {
		a.server.AddPrompt(d.p, promptHandler(d))
		forTool[d.p.Name] = d.tool
	}
	first := defs[0]
	return forTool, func() { a.server.AddPrompt(first.p, promptHandler(first)) }
}

func promptHandler(d promptDef) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		for _, arg := range d.p.Arguments {
			if arg.Required && strings.TrimSpace(req.Params.Arguments[arg.Name]) == "" {
				return nil, resourceError(tool.Errf(CodeInvalidArgument, "prompt %s needs the argument %s", d.p.Name, arg.Name).With("argument", arg.Name))
			}
		}
		text, err := d.text(req.Params.Arguments)
		if err != nil {
			te, _ := toToolError(err)
			return nil, resourceError(te)
		}
		return &mcp.GetPromptResult{Description: d.p.Description,
			Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: text}}}}, nil
	}
}

// local reports whether name is one of our prompts, which an upstream's
// prompt must not replace.
func (pr prompts) local(name string) bool {
	for _, d := range pr.defs() {
		if d.p.Name == name {
			return true
		}
	}
	return false
}

// pinByLabel finds an allowlisted pin by BCM number ("17", "GPIO17") or name.
func (pr prompts) pinByLabel(s string) (config.Pin, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(s), "GPIO"))
	for _, p := range pr.conf().GPIO.Pins {
		if (err == nil && p.Pin == n) || (s != "" && strings.EqualFold(p.Name, s)) {
			return p, true
		}
	}
	return config.Pin{}, false
}

func pinLabel(p config.Pin) string {
	if p.Name != "" {
		return p.Name
	}
	return "unnamed"
}

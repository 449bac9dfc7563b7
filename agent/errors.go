package agent

import (
	"context"
	"errors"
	"strings"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Error codes, the whole vocabulary a model sees: the symbolic codes of the
// tool catalog (spec 002 §9.1), whose meaning must stay stable. They live in
// internal/errcode, so the doors (agent/transport) use them without linking
// the tools; they are the helper protocol's codes too, so helper errors pass
// through unchanged (TestErrorCodesAreTheHelpers holds the two together).
const (
	CodeInvalidArgument    = errcode.InvalidArgument
	CodePermissionDenied   = errcode.PermissionDenied
	CodeUnauthenticated    = errcode.Unauthenticated // HTTP tokens only; the helper never says it
	CodeNotFound           = errcode.NotFound
	CodeFailedPrecondition = errcode.FailedPrecondition
	CodeResourceExhausted  = errcode.ResourceExhausted
	CodeUnavailable        = errcode.Unavailable
	CodeInternal           = errcode.Internal
)

// toToolError turns any error from a handler into the public shape. Helper
// errors keep their code; anything unexpected becomes "internal" with a
// generic message, so no internals or stack traces reach a client.
func toToolError(err error) (te *tool.Error, internal bool) {
	if errors.As(err, &te) {
		return te, false
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		te = tool.Errf(pe.Code, "%s", pe.Message).WithDetails(pe.Details)
		te.Retryable = pe.Retryable
		if h, ok := te.Details["fix_hint"].(string); ok {
			te.FixHint = h
			delete(te.Details, "fix_hint")
		}
		if pe.Code == CodeUnavailable {
			te.Retryable = true
			te.FixHint = "the root helper (raspi-mcp-helper) is not reachable: check `raspi-mcp status` or `systemctl status raspi-mcp-helper`, then retry"
		}
		return te, false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return tool.Errf(CodeUnavailable, "the operation timed out").Retry(), false
	}
	if errors.Is(err, context.Canceled) {
		return tool.Errf(CodeUnavailable, "the call was cancelled").Retry(), false
	}
	return tool.Errf(CodeInternal, "internal error; the agent log has the details"), true
}

// catalogLookup is the pipeline's Lookup (tool.PipelineOptions): which of
// the catalog's read tools lists the valid values of a parameter.
//
// It is a table here rather than a field of each tool.Spec because the
// answer is mostly the parameter's, not the tool's: a pin of any tool is
// looked up in gpio.list_pins, a unit in service.list_services, a
// plan_hash in a new preview; some answers take the call's own arguments
// (an I²C address is scanned for on the bus the call named); and the
// domain's list tool is the fallback for its objects. A per-spec field
// would repeat the same id on every tool that takes a pin, and could not
// carry the arguments without a func per tool; tool.Spec has none, and the
// pipeline (agent/tool) stays the catalog's business-free half. The ids are
// resolved in the registry on each use, so a renamed tool yields no
// suggestion rather than a wrong one, and TestCatalogLookupNamesRegisteredTools
// fails when a branch names a tool the catalog no longer has.
type catalogLookup struct{ tools *tool.Registry }

// lookupFor is the read tool that lists the valid values of t's parameter
// param ("" for the objects t works on), with what it needs from args.
func (l catalogLookup) lookupFor(t *tool.Tool, param string, args map[string]any) (tool.SuggestedCall, bool) {
	domain, _, _ := strings.Cut(t.ID(), ".")
	id, why := "", ""
	var with map[string]any
	switch {
	case param == "pin" || domain == "gpio":
		id, why = "gpio.list_pins", "see the allowed pins, their modes and what they drive"
	case param == "service_name" || param == "unit" || param == "units" || domain == "service":
		id, why = "service.list_services", "find the unit's exact name"
		if n, ok := args["service_name"].(string); ok && n != "" {
			with = map[string]any{"pattern": "*" + strings.TrimSuffix(n, ".service") + "*"}
		}
	case param == "pid" || domain == "process":
		id, why = "process.list_processes", "find the process by name or user"
	case param == "job_id" && domain == "metrics":
		id, why = "metrics.list_sampling_jobs", "see the sampling jobs and their ids"
	case param == "plan_hash":
		id, why, with = "manage.preview_os_updates", "see the plan as it is now and its plan_hash", map[string]any{"refresh": false}
	case param == "job_id" || domain == "manage":
		id, why = "manage.list_jobs", "see the queued jobs and their ids"
	case param == "metrics":
		id, why = "metrics.get_realtime_metrics", "see the metric names this device records"
	case domain == "sensors":
		id, why = "sensors.list", "see the configured sensors and their names"
	case param == "address" && domain == "i2c":
		if b, ok := args["bus"]; ok {
			id, why, with = "i2c.scan_bus", "see which addresses answer on this bus", map[string]any{"bus": b}
		} else {
			id, why = "i2c.list_buses", "see the buses and what may be read or written"
		}
	case domain == "i2c":
		id, why = "i2c.list_buses", "see the buses and what may be read or written"
	case param == "tool" || param == "token" || domain == "change":
		id, why = "system.get_capabilities", "list the tools, their risks and what you may call"
	case domain == "metrics":
		id, why = "metrics.list_sampling_jobs", "see the sampling jobs and their ids"
	}
	lt, ok := l.tools.Get(id)
	if !ok || lt == t {
		return tool.SuggestedCall{}, false
	}
	return tool.SuggestedCall{Tool: lt.Name(), Arguments: with, Why: why}, true
}

package tool

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// actionable completes e, an error of a call to t with arguments raw, so a
// model can act on it: a fix hint for every error (the handler's own when it
// wrote one, else one per code), and a suggested next call wherever one
// exists (the corrected call for a bad argument, the list tool for an
// unknown name, a dry run for a missing confirm). Doing it here, once, is
// what makes it true for every tool, the ones added later included.
func (p *Pipeline) actionable(t *Tool, c *Call, raw json.RawMessage, e *Error) {
	var args map[string]any
	_ = json.Unmarshal(RawOrEmpty(raw), &args)
	if args == nil {
		args = map[string]any{}
	}
	param, _ := e.Details["parameter"].(string)
	if len(e.Next) == 0 {
		switch e.Code {
		case errcode.InvalidArgument:
			// A bad name or number of something on the device (a pin, a
			// pid) is looked up, never guessed: the nearest valid pid is
			// some other process.
			if s, ok := p.lookupFor(t, param, args); ok && identifies(param) {
				e.Suggest(s)
			} else if s, ok := correction(t, param, args); ok {
				e.Suggest(s)
			} else if ok {
				e.Suggest(s)
			}
		case errcode.NotFound:
			if s, ok := p.lookupFor(t, param, args); ok {
				e.Suggest(s)
			} else if s, ok := p.lookupFor(t, "", args); ok {
				e.Suggest(s)
			}
		case errcode.PermissionDenied:
			// Someone with no role at all can call nothing, capabilities included.
			if t.ID() != p.o.Capabilities && c.Principal.Role != identity.RoleNone {
				e.Suggest(SuggestedCall{Tool: p.wire(p.o.Capabilities), Why: "see your role, the namespaces that are on and the tools you may use now"})
			}
		case errcode.FailedPrecondition:
			if _, missing := e.Details["missing"]; missing && t.Mutating() {
				dry := maps.Clone(args)
				dry["dry_run"] = true
				delete(dry, "confirm")
				e.Suggest(SuggestedCall{Tool: t.Name(), Arguments: dry, Why: "see what it would do; then call again with confirm: true and a reason"})
			}
		case errcode.Unavailable:
			if t.ID() != p.o.Status {
				e.Suggest(SuggestedCall{Tool: p.wire(p.o.Status), Why: "see whether the root helper and the agent's other parts are up"})
			}
		}
	}
	// A suggestion the caller would be refused is no suggestion.
	e.Next = slices.DeleteFunc(e.Next, func(s SuggestedCall) bool {
		nt, ok := p.tools.Lookup(s.Tool)
		return !ok || Decide(p.conf(), c.Principal, nt.Rule(), Guard{DryRun: true}, false) != nil
	})
	if e.FixHint == "" {
		e.FixHint = defaultHint(t, e, param, c.CorrelationID)
	}
}

// identifies reports whether a parameter names something on the device,
// whose valid values only a list tool knows.
func identifies(param string) bool {
	switch param {
	case "pin", "pid", "bus", "address", "service_name", "unit", "units", "job_id", "name", "tool", "token", "metrics", "plan_hash":
		return true
	}
	return false
}

// defaultHint is the fix hint of an error whose handler wrote none.
func defaultHint(t *Tool, e *Error, param, correlation string) string {
	switch e.Code {
	case errcode.InvalidArgument:
		if param != "" {
			return "correct " + param + " and call " + t.Name() + " again; its inputSchema lists every parameter with its type and bounds"
		}
		return "call " + t.Name() + " again with arguments that match its inputSchema"
	case errcode.NotFound:
		return "nothing of that name or id exists now; list what does (see suggested_next_tool_calls) and use an exact name"
	case errcode.PermissionDenied:
		return "this device's configuration refuses it; retrying will not help: only the device owner can change " + config.DefaultPath
	case errcode.FailedPrecondition:
		return "the device is not in the state this call needs; read its current state, change that first, then call again"
	case errcode.ResourceExhausted:
		return "a limit of this device was reached; wait, or free what holds it, then call again"
	case errcode.Unavailable:
		return "a temporary failure: retry in a few seconds; on the device, `raspi-mcp status` shows what is down"
	case errcode.Unauthenticated:
		return "the client's credentials were refused; fix them in the client's configuration"
	}
	return "retry once; if it fails again, the device owner finds the cause in the agent log under correlation id " + correlation
}

// correction is the call t would accept instead, for a schema error on one
// top-level parameter: an unknown one removed, a value of the wrong type
// converted ("5" for 5), one out of range clamped, a bad enum value replaced
// by the nearest allowed one, a missing one given its default. A changed
// call of a tool that changes something is suggested as a dry run: the
// model sees the plan before it commits to a value it did not choose.
func correction(t *Tool, param string, args map[string]any) (SuggestedCall, bool) {
	if param == "" || strings.Contains(param, ".") {
		return SuggestedCall{}, false
	}
	in := t.Input()
	if in == nil {
		return SuggestedCall{}, false
	}
	fixed := maps.Clone(args)
	why := ""
	ps, known := in.Tree.Properties[param]
	switch v, given := args[param]; {
	case !known:
		delete(fixed, param)
		why = "the same call without " + param
	case !given:
		d, ok := DefaultValue(ps)
		if !ok {
			return SuggestedCall{}, false
		}
		fixed[param] = d
		why = fmt.Sprintf("%s = %s (%s)", param, jsonText(d), Describe(ps))
	case in.Props[param].Validate(v) == nil:
		return SuggestedCall{}, false // the schema takes it: the handler refused it for another reason
	default:
		nv, ok := nearest(ps, v)
		if !ok || in.Props[param].Validate(nv) != nil {
			if !slices.Contains(in.Tree.Required, param) {
				delete(fixed, param)
				return SuggestedCall{Tool: t.Name(), Arguments: fixed, Why: "the same call without " + param + ", which then takes its default"}, true
			}
			return SuggestedCall{}, false
		}
		fixed[param] = nv
		why = fmt.Sprintf("%s = %s (%s)", param, jsonText(nv), Describe(ps))
	}
	if _, guarded := in.Tree.Properties["dry_run"]; guarded {
		fixed["dry_run"] = true
		why += ", as a dry run first"
	}
	return SuggestedCall{Tool: t.Name(), Arguments: fixed, Why: why}, true
}

// DefaultValue is what a missing required parameter could be: its default,
// else its first allowed value.
func DefaultValue(s *jsonschema.Schema) (any, bool) {
	if len(s.Default) > 0 {
		var v any
		if json.Unmarshal(s.Default, &v) == nil {
			return v, true
		}
	}
	if len(s.Enum) > 0 {
		return s.Enum[0], true
	}
	return nil, false
}

// nearest converts v to s's type where the intent is plain ("5" → 5,
// "true" → true, 7 → [7]) and then moves it into s's bounds: clamped to
// the minimum or maximum, cut to the maximum length, or the allowed value
// closest to it.
func nearest(s *jsonschema.Schema, v any) (any, bool) {
	switch SchemaType(s) {
	case "integer", "number":
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case string:
			p, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil, false
			}
			f = p
		default:
			return nil, false
		}
		if SchemaType(s) == "integer" {
			f = math.Round(f)
		}
		if s.Minimum != nil && f < *s.Minimum {
			f = *s.Minimum
		}
		if s.Maximum != nil && f > *s.Maximum {
			f = *s.Maximum
		}
		v = f
	case "boolean":
		switch x := v.(type) {
		case string:
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(x)))
			if err != nil {
				return nil, false
			}
			v = b
		case float64:
			if x != 0 && x != 1 {
				return nil, false
			}
			v = x == 1
		}
	case "string":
		switch x := v.(type) {
		case float64:
			v = strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			v = strconv.FormatBool(x)
		case string:
			if s.MaxLength != nil && utf8.RuneCountInString(x) > *s.MaxLength {
				v = string([]rune(x)[:*s.MaxLength])
			}
		default:
			return nil, false
		}
	case "array":
		if _, ok := v.([]any); !ok {
			if _, obj := v.(map[string]any); obj || v == nil {
				return nil, false
			}
			v = []any{v}
		}
	}
	if len(s.Enum) > 0 {
		v = closestEnum(s.Enum, v)
	}
	return v, true
}

// closestEnum is the allowed value nearest to v: the same number or the
// nearest one, the same word in another case or without a SIG prefix, else
// the fewest edits away.
func closestEnum(allowed []any, v any) any {
	best, bestD := allowed[0], math.Inf(1)
	for _, a := range allowed {
		var d float64
		switch x := a.(type) {
		case float64:
			f, ok := v.(float64)
			if !ok {
				if str, isStr := v.(string); isStr {
					f, _ = strconv.ParseFloat(str, 64)
				}
			}
			d = math.Abs(x - f)
		case int:
			f, _ := v.(float64)
			d = math.Abs(float64(x) - f)
		case string:
			str := strings.ToLower(strings.TrimPrefix(strings.ToUpper(fmt.Sprint(v)), "SIG"))
			d = float64(editDistance(strings.ToLower(x), str))
		default:
			d = math.Inf(1)
		}
		if d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// lookupFor is PipelineOptions.Lookup, or nothing.
func (p *Pipeline) lookupFor(t *Tool, param string, args map[string]any) (SuggestedCall, bool) {
	if p.o.Lookup == nil {
		return SuggestedCall{}, false
	}
	return p.o.Lookup(t, param, args)
}

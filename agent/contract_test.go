package agent

//go:generate go run ../internal/spec002gen -spec ../../shared/spec/002_74f823959d5e8abe.txt -out testdata/spec002

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/spec002"
)

// The contract test compares every tool with spec 002, the tool catalog this
// server implements (its main part and the addendum of detailed network,
// service and process schemas; see package spec002), as extracted into
// testdata/spec002 by internal/spec002gen: each spec parameter must be
// accepted with the spec's type and bounds, each spec result field must be
// declared and present with the spec's type, and each spec example request
// must succeed on the simulated board. What differs on purpose is in spec002.Differences, with
// its reason; anything else that differs fails the test, and so does a row
// that no longer matches a difference.

// specDefinitions says which tool's result (or which list in it) each of the
// addendum's shared schemas (service and process summaries and details)
// describes.
var specDefinitions = map[string]struct{ tool, list string }{
	"ServiceSummary": {"service.list_services", "services"},
	"ServiceDetail":  {"service.get_status", ""},
	"ProcessSummary": {"process.list_processes", "processes"},
	"ProcessDetail":  {"process.get_process_details", ""},
}

// liveArgs are the arguments a tool is run with to compare its real result
// with the spec's, where the spec has no example request for it.
func liveArgs(id string) map[string]any {
	switch id {
	case "system.reboot":
		return map[string]any{"confirm": true, "reason": "contract test", "delay_seconds": 300}
	case "metrics.start_sampling_job":
		return map[string]any{"interval_seconds": 60, "retention_hours": 1}
	case "i2c.scan_bus":
		return map[string]any{"bus": 1}
	case "i2c.read":
		return map[string]any{"bus": 1, "address": 0x76, "register": 0xD0, "length": 1}
	case "service.get_status":
		return map[string]any{"service_name": "nginx"}
	case "process.get_process_details":
		return map[string]any{"pid": os.Getpid()}
	case "manage.update_server":
		// Critical: the plan is what can be compared without a token.
		return map[string]any{"dry_run": true}
	}
	return map[string]any{}
}

// contractDiffs collects what differs, by tool and path.
type contractDiffs map[string][]string

func (d contractDiffs) add(tool, path, kind, format string, args ...any) {
	k := tool + "|" + path + "|" + kind
	d[k] = append(d[k], fmt.Sprintf(format, args...))
}

func TestSpec002Contract(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.I2C.Write = []string{"1:0x50"} })
	r.startSampler()
	// History to query: the examples ask for 2025, which holds nothing; the
	// job is what they need.
	putSeries(t, r, []store.Sample{{Time: time.Now().Add(-time.Minute), CPUPercent: 10, TempC: 40, MemTotal: 100, MemUsed: 50}})
	tools, defs, err := spec002.Load("testdata/spec002")
	if err != nil {
		t.Fatal(err)
	}
	diffs := contractDiffs{}
	ids := make([]string, 0, len(tools))
	for id := range tools {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		st := tools[id]
		ourID := id
		if m, ok := spec002.Renamed[id]; ok {
			ourID = m.ID
			diffs.add(id, "", "served-as", "served as %s", ourID)
		}
		tl, ok := r.a.tools.Get(ourID)
		if !ok {
			diffs.add(id, "", "not-served", "not served")
			continue
		}
		if st.Parameters != nil {
			compareParams(t, diffs, id, tl, st.Parameters)
		}
		if st.Result != nil {
			out := schemaMap(t, tl.OutputSchema())
			compareResult(diffs, id, "result", resolveRefs(st.Result, defs), out)
		}
		for _, add := range st.ResultAdditions {
			compareShape(diffs, id, "result", add, schemaMap(t, tl.OutputSchema()))
		}
		if st.Result != nil && len(st.Examples) == 0 {
			// The result stays a map: it is checked as JSON against the
			// spec's schema, not against our Out type.
			res, sc := r.as(admin, tl.Name(), liveArgs(ourID))
			if res.IsError {
				t.Errorf("%s with %v: %v", tl.Name(), liveArgs(ourID), resultError(t, res))
			} else {
				validateLive(diffs, id, resolveRefs(st.Result, defs), sc)
			}
		}
		for _, ex := range st.Examples {
			runExample(t, r, diffs, id, tl, ex)
		}
	}
	// The addendum's shared schemas, against the tools whose results they describe.
	for name, where := range specDefinitions {
		tl, _ := r.a.tools.Get(where.tool)
		spec := resolveRefs(defs[name], defs)
		out := schemaMap(t, tl.OutputSchema())
		res, sc := r.as(admin, tl.Name(), liveArgs(where.tool)) // a map, for validateLive as above
		if res.IsError {
			t.Fatalf("%s: %v", tl.Name(), resultError(t, res))
		}
		if where.list != "" {
			out = out["properties"].(map[string]any)[where.list].(map[string]any)["items"].(map[string]any)
			items := sc[where.list].([]any)
			if len(items) == 0 {
				t.Fatalf("%s lists no %s", tl.Name(), where.list)
			}
			sc = items[0].(map[string]any)
		}
		compareResult(diffs, where.tool, "result."+where.list+"[]", spec, out)
		validateLive(diffs, where.tool, spec, sc)
	}
	checkDifferences(t, diffs)
}

// checkDifferences fails on every difference not in spec002.Differences,
// and on every row of it that matches none.
func checkDifferences(t *testing.T, diffs contractDiffs) {
	t.Helper()
	used := make([]bool, len(spec002.Differences))
	keys := make([]string, 0, len(diffs))
	for k := range diffs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := strings.SplitN(k, "|", 3)
		tool, path, kind := f[0], f[1], f[2]
		i := slices.IndexFunc(spec002.Differences, func(d spec002.Difference) bool {
			return (d.Tool == tool || d.Tool == "*") && d.Path == path && d.Kind == kind
		})
		if i < 0 {
			t.Errorf("%s %q (%s) differs from spec 002 and is not in spec002.Differences: %s", tool, path, kind, strings.Join(diffs[k], "; "))
			continue
		}
		used[i] = true
	}
	for i, d := range spec002.Differences {
		if !used[i] {
			t.Errorf("spec002.Differences row %q %q %q matches no difference any more: remove it", d.Tool, d.Path, d.Kind)
		}
	}
}

func schemaMap(t *testing.T, s any) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// resolveRefs inlines the spec's "#/definitions/x" references (and allOf of
// them); a reference to a definition the spec never gives is left open.
func resolveRefs(v any, defs map[string]map[string]any) map[string]any {
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				d, ok := defs[strings.TrimPrefix(ref, "#/definitions/")]
				if !ok {
					return map[string]any{}
				}
				return walk(d)
			}
			if all, ok := x["allOf"].([]any); ok {
				merged := map[string]any{"type": "object", "properties": map[string]any{}}
				var req []any
				for _, part := range all {
					p := walk(part).(map[string]any)
					for k, v := range asMap(p["properties"]) {
						merged["properties"].(map[string]any)[k] = v
					}
					if r, ok := p["required"].([]any); ok {
						req = append(req, r...)
					}
				}
				if req != nil {
					merged["required"] = req
				}
				return merged
			}
			out := map[string]any{}
			for k, e := range x {
				out[k] = walk(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e)
			}
			return out
		}
		return v
	}
	return walk(v).(map[string]any)
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// types is a schema's type list without "null".
func types(s map[string]any) []string {
	var ts []string
	switch x := s["type"].(type) {
	case string:
		ts = []string{x}
	case []any:
		for _, e := range x {
			ts = append(ts, e.(string))
		}
	}
	ts = slices.DeleteFunc(ts, func(t string) bool { return t == "null" })
	sort.Strings(ts)
	return ts
}

func nullable(s map[string]any) bool {
	if x, ok := s["type"].([]any); ok {
		return slices.Contains(x, any("null"))
	}
	return false
}

func isRequired(s map[string]any, name string) bool {
	r, _ := s["required"].([]any)
	return slices.Contains(r, any(name))
}

// boundKind groups the length bounds, which a row excuses together.
func boundKind(k string) string {
	if strings.HasSuffix(k, "Length") {
		return "length"
	}
	return k
}

var boundKeys = []string{"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems"}

// compareParams checks each spec parameter against the tool's input schema
// and feeds the validator the spec's own boundary values.
func compareParams(t *testing.T, diffs contractDiffs, id string, tl *tool.Tool, spec map[string]any) {
	in := schemaMap(t, tl.Input().Tree)
	ours := asMap(in["properties"])
	for name, sp := range asMap(spec["properties"]) {
		s := asMap(sp)
		o := asMap(ours[name])
		if o == nil {
			diffs.add(id, name, "missing", "parameter missing")
			continue
		}
		compareSchema(diffs, id, name, s, o)
		if isRequired(spec, name) != isRequired(in, name) {
			diffs.add(id, name, "required", "required: spec %v, ours %v", isRequired(spec, name), isRequired(in, name))
		}
		if nullable(s) {
			diffs.add(id, name, "nullable", "nullable type %v advertised as %v", s["type"], o["type"])
			// null must still mean "not given".
			if _, err := tl.Check(specJSON(map[string]any{name: nil})); err != nil && err.Details["parameter"] == name {
				t.Errorf("%s: null for %s refused: %v", id, name, err)
			}
		}
		// The spec's boundary and enum values pass the parameter's own check.
		for _, v := range specValues(s) {
			if err := tl.Input().Props[name].Validate(v); err != nil {
				t.Errorf("%s: %s = %v (a value the spec allows) refused: %v", id, name, v, err)
			}
		}
	}
	for _, name := range asSlice(in["required"]) {
		if asMap(asMap(spec["properties"])[name.(string)]) == nil {
			diffs.add(id, name.(string), "required", "required here, not a spec parameter")
		}
	}
}

// specValues are values the spec says a parameter takes: its bounds and
// enum members (null aside).
func specValues(s map[string]any) []any {
	var vs []any
	for _, k := range []string{"minimum", "maximum"} {
		if v, ok := s[k]; ok {
			vs = append(vs, v)
		}
	}
	for _, e := range asSlice(s["enum"]) {
		if e != nil {
			vs = append(vs, e)
		}
	}
	return vs
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// compareSchema compares one parameter's type, bounds, enum, format, default
// and items; a bound only ours has is a difference too.
func compareSchema(diffs contractDiffs, id, path string, s, o map[string]any) {
	if st, ot := types(s), types(o); len(st) > 0 && !slices.Equal(st, ot) {
		diffs.add(id, path, "type", "type: spec %v, ours %v", st, ot)
	}
	for _, k := range boundKeys {
		sv, sok := s[k]
		ov, ook := o[k]
		switch {
		case sok && (!ook || toFloat(sv) != toFloat(ov)):
			diffs.add(id, path, boundKind(k), "%s: spec %v, ours %v", k, sv, ov)
		case !sok && ook:
			diffs.add(id, path, boundKind(k), "%s: ours adds %v", k, ov)
		}
	}
	if sv, ok := s["format"]; ok && o["format"] != sv {
		diffs.add(id, path, "format", "format: spec %v, ours %v", sv, o["format"])
	}
	if sv, ok := s["default"]; ok && fmt.Sprint(o["default"]) != fmt.Sprint(sv) {
		diffs.add(id, path, "default", "default: spec %v, ours %v", sv, o["default"])
	}
	se := slices.DeleteFunc(slices.Clone(asSlice(s["enum"])), func(v any) bool { return v == nil })
	oe := asSlice(o["enum"])
	if len(se) > 0 || len(oe) > 0 {
		if !sameSet(se, oe) {
			diffs.add(id, path, "enum", "enum: spec %v, ours %v", se, oe)
		}
	}
	if si := asMap(s["items"]); si != nil {
		if oi := asMap(o["items"]); oi == nil {
			diffs.add(id, path, "items", "items: ours has none")
		} else {
			compareSchema(diffs, id, path, si, oi)
		}
	}
}

func sameSet(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y any) bool { return fmt.Sprint(x) == fmt.Sprint(y) }) {
			return false
		}
	}
	return true
}

func toFloat(v any) float64 {
	f, ok := v.(float64)
	if !ok {
		return math.NaN()
	}
	return f
}

func specJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// compareResult checks that our output schema declares each spec result
// field with the spec's type, always present where the spec requires it.
func compareResult(diffs contractDiffs, id, path string, spec, ours map[string]any) {
	if st, ot := types(spec), types(ours); len(st) > 0 && !slices.Equal(st, ot) && !(slices.Equal(st, []string{"number"}) && slices.Equal(ot, []string{"integer"})) {
		diffs.add(id, path, "type", "type: spec %v, ours %v", st, ot)
	}
	if nullable(spec) {
		diffs.add(id, path, "nullable", "nullable %v, ours %v", spec["type"], ours["type"])
	}
	if se := slices.DeleteFunc(slices.Clone(asSlice(spec["enum"])), func(v any) bool { return v == nil }); len(se) > 0 {
		if oe := asSlice(ours["enum"]); len(oe) > 0 && !sameSet(se, oe) {
			diffs.add(id, path, "enum", "enum: spec %v, ours %v", se, oe)
		}
	}
	sp, op := asMap(spec["properties"]), asMap(ours["properties"])
	for name, s := range sp {
		o := asMap(op[name])
		if o == nil {
			diffs.add(id, path+"."+name, "missing", "result field missing")
			continue
		}
		if isRequired(spec, name) && !isRequired(ours, name) {
			diffs.add(id, path+"."+name, "required", "required by the spec, optional here")
		}
		compareResult(diffs, id, path+"."+name, asMap(s), o)
	}
	if spec["additionalProperties"] == false && sp != nil {
		for name := range op {
			if _, ok := sp[name]; !ok {
				diffs.add(id, "result: additional fields", "additional", "%s.%s", path, name)
			}
		}
	}
	if si := asMap(spec["items"]); si != nil {
		if oi := asMap(ours["items"]); oi == nil {
			diffs.add(id, path, "items", "items: ours has none")
		} else {
			compareResult(diffs, id, path+"[]", si, oi)
		}
	}
}

// compareShape checks an example fragment of a result (the addendum gives
// the network and disk_io blocks as examples, not schemas) against our output
// schema: every key is declared (a key under a map is one of its entries),
// every number is a number.
func compareShape(diffs contractDiffs, id, path string, ex any, ours map[string]any) {
	switch x := ex.(type) {
	case map[string]any:
		if !slices.Equal(types(ours), []string{"object"}) {
			diffs.add(id, path, "type", "spec has an object, ours is %v", ours["type"])
			return
		}
		for k, v := range x {
			o := asMap(asMap(ours["properties"])[k])
			if o == nil {
				o = asMap(ours["additionalProperties"]) // a map: k is one of its keys
			}
			if o == nil {
				diffs.add(id, path+"."+k, "missing", "result field missing")
				continue
			}
			compareShape(diffs, id, path+"."+k, v, o)
		}
	case float64:
		if ot := types(ours); !slices.Equal(ot, []string{"number"}) && !slices.Equal(ot, []string{"integer"}) {
			diffs.add(id, path, "type", "spec has a number, ours is %v", ot)
		}
	}
}

// validateLive checks a real result against the spec's result schema, with
// additional fields allowed (see spec002.Differences) and nullable fields
// allowed to be absent.
func validateLive(diffs contractDiffs, id string, spec map[string]any, got map[string]any) {
	open := openSchema(spec)
	var s jsonschema.Schema
	if err := json.Unmarshal(specJSON(open), &s); err != nil {
		diffs.add(id, "result", "live", "spec schema unreadable: %v", err)
		return
	}
	res, err := s.Resolve(nil)
	if err != nil {
		diffs.add(id, "result", "live", "spec schema does not resolve: %v", err)
		return
	}
	if err := res.Validate(got); err != nil {
		diffs.add(id, "result", "live", "the real result breaks the spec's schema: %v", err)
	}
}

// openSchema drops additionalProperties false and formats (validated
// elsewhere), everywhere.
func openSchema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if (k == "additionalProperties" && e == false) || k == "format" || k == "description" {
				continue
			}
			out[k] = openSchema(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = openSchema(e)
		}
		return out
	}
	return v
}

// runExample runs one of the spec's example requests and expects it to
// succeed (or, for the spec's invalid request, to be refused as invalid).
func runExample(t *testing.T, r *rig, diffs contractDiffs, id string, tl *tool.Tool, ex spec002.Example) {
	_, args := spec002.Call(id, ex)
	// Only whether and how the example fails is read here: its result is
	// any tool's, and validateLive is for the results without examples.
	res, _ := r.as(admin, tl.Name(), args)
	_, e := decodeResult[any](t, res)
	switch {
	case ex.ExpectError && (e == nil || e.Code != CodeInvalidArgument):
		t.Errorf("%s example %q: want invalid_argument, got %+v", id, ex.Label, e)
	case ex.ExpectError:
	case e != nil:
		path := "example: " + ex.Label
		diffs.add(id, path, "example", "%+v", *e)
		d, ok := spec002.Find(id, path, "example")
		if !ok || d.Retry == nil {
			return
		}
		for k, v := range d.Retry {
			args[k] = v
		}
		res, _ := r.as(admin, tl.Name(), args)
		if _, e := decodeResult[any](t, res); e != nil {
			t.Errorf("%s example %q with %v: %+v", id, ex.Label, d.Retry, *e)
		}
	}
}

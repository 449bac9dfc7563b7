package tool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Tool is one tool of the registry, built once from a typed Spec (or, for
// a LAN upstream's tool, by Foreign). Everything a call goes through
// (validation, policy, audit, result shape) is the pipeline's, so each
// namespace file of the agent only says what its tools do.
type Tool struct {
	id       string // canonical dotted id: "system.reboot"
	name     string // wire name: "system_reboot"
	rule     Rule
	mutating bool
	lan      bool   // fronts a LAN upstream's tool: every call is audited
	slow     bool   // may take more than a second: reports progress
	stable   string // alpha, beta or stable: how settled its contract is
	mcp      *mcp.Tool
	example  json.RawMessage // Spec.Example as JSON arguments; nil if it has none
	// newInput builds the input schema on the tool's first call (Input);
	// nil for a tool whose schema is someone else's (a LAN upstream's).
	newInput func() (*InputSchema, error)
	outRes   *jsonschema.Resolved // nil unless the Registry checks results
	// out is the output schema as JSON: served as raspi://agent/schemas/{tool},
	// not listed (OutputSchema says why); nil for a LAN upstream's tool.
	out json.RawMessage
	// check validates raw arguments: t.Validate against the input schema, or, for a tool
	// whose schema is someone else's (a LAN upstream's), a lighter check.
	check func(raw json.RawMessage) ([]byte, *Error)
	// spelling rewrites alternative spellings before validation; may be nil.
	spelling func(args map[string]any)
	// run decodes validated arguments and runs the typed handler.
	run RunFunc
	// needsDevice is Spec.NeedsDevice on raw arguments; nil for most tools.
	needsDevice func(ctx context.Context, c *Call, args []byte) (string, error)

	// stats counts the tool's calls for status and /metrics; only the
	// pipeline counts.
	stats stats
}

// stats are a tool's call counters: atomics on the tool, so counting needs
// no map.
type stats struct {
	calls, failures           atomic.Int64
	allowed, denied, declined atomic.Uint64
}

// Stats are a tool's call counts so far.
type Stats struct {
	Calls, Failures int64
	// Allowed, Denied and Declined count finished calls by decision.
	Allowed, Denied, Declined uint64
}

// Stats reads the tool's call counts, which the pipeline keeps.
func (t *Tool) Stats() Stats {
	return Stats{Calls: t.stats.calls.Load(), Failures: t.stats.failures.Load(),
		Allowed: t.stats.allowed.Load(), Denied: t.stats.denied.Load(), Declined: t.stats.declined.Load()}
}

// RunFunc runs a tool on validated arguments: its result and one-line summary.
type RunFunc func(ctx context.Context, c *Call, args []byte) (out any, summary string, err error)

// ID is the canonical dotted id: "system.reboot".
func (t *Tool) ID() string { return t.id }

// Name is the wire name clients call: "system_reboot".
func (t *Tool) Name() string { return t.name }

// Rule is what the policy knows of the tool.
func (t *Tool) Rule() Rule { return t.rule }

// Mutating is whether the tool changes something (it takes guard arguments
// or its risk is above read).
func (t *Tool) Mutating() bool { return t.mutating }

// LAN is whether the tool fronts a LAN upstream's tool.
func (t *Tool) LAN() bool { return t.lan }

// Slow is whether the tool may take more than a second and reports progress.
func (t *Tool) Slow() bool { return t.slow }

// Stability is alpha, beta or stable: how settled its contract is.
func (t *Tool) Stability() string { return t.stable }

// MCP is the tool as tools/list shows it.
func (t *Tool) MCP() *mcp.Tool { return t.mcp }

// Example is Spec.Example as JSON arguments; nil if it has none.
func (t *Tool) Example() json.RawMessage { return t.example }

// ChecksOutput is whether results are checked against the output schema.
func (t *Tool) ChecksOutput() bool { return t.outRes != nil }

// OutputSchema is the JSON Schema every structuredContent of the tool
// conforms to; nil for a LAN upstream's tool. tools/list does not carry
// it: no client measured shows output schemas to a model, and all tools'
// were 56 KB of every session's listing, more than half of it, on a Pi
// Zero's link. A client that wants one reads raspi://agent/schemas/{tool}
// (MCP makes outputSchema optional; structuredContent without it is fine).
func (t *Tool) OutputSchema() json.RawMessage { return t.out }

// Check validates raw arguments (Validate, or a foreign tool's own check)
// and returns them with defaults applied.
func (t *Tool) Check(raw json.RawMessage) ([]byte, *Error) { return t.check(raw) }

// Foreign is a tool whose schema is someone else's (a LAN upstream's): the
// caller builds its listing; check validates arguments, run runs it. Every
// call of it is audited.
func Foreign(id, name string, rule Rule, stability string, listing *mcp.Tool, check func(json.RawMessage) ([]byte, *Error), run RunFunc) *Tool {
	return &Tool{id: id, name: name, rule: rule, stable: stability, mutating: rule.Risk != RiskRead, lan: true, mcp: listing, check: check, run: run}
}

// Call is what a handler knows about the call it serves.
type Call struct {
	Principal     identity.Principal
	CorrelationID string
	Guard
	Session       *mcp.ServerSession
	ProgressToken any // the client's, to forward an upstream's progress
	// committed: arrived through change_commit with a valid token. Only the
	// pipeline sets it.
	committed bool
	// request is the client's request, for its capabilities, protocol era and
	// answers to our input requests; nil for calls made inside the agent.
	request *mcp.CallToolRequest
	// approval is how the device answered, when it was asked.
	approval *ApprovalOutcome
}

// Request is the client's request the call answers; nil for a call made
// inside the agent (change_commit's, a resource's).
func (c *Call) Request() *mcp.CallToolRequest { return c.request }

// GuardArgs are the guard arguments every mutating tool takes (embedded in its input).
//
// Twenty tools take them, so each word here is twenty in every model's
// context: what they mean and when each is required is said once, in the
// server's instructions and in raspi://agent/contract
// (agent/agentcontract.go); keep the two in step. Their names say enough,
// but confirm keeps three words: a model must not read it as "proceed".
type GuardArgs struct {
	DryRun  bool   `json:"dry_run,omitempty"`
	Confirm bool   `json:"confirm,omitempty" jsonschema:"the person agreed"`
	Reason  string `json:"reason,omitempty"`
	Intent  string `json:"intent,omitempty"`
}

func (g GuardArgs) guard() Guard { return Guard(g) }

type guarded interface{ guard() Guard }

// Spec describes one  In and Out are Go types whose JSON schemas, tightened
// by Props, are the tool's InputSchema and outputSchema.
type Spec[In, Out any] struct {
	ID          string
	Title       string
	Description string
	Rule        Rule // Tool and Domain are filled from ID
	Stability   string
	Idempotent  bool
	Destructive bool
	Props       []Prop // bounds, enums and defaults of the tool catalog's schemas
	OutProps    []Prop
	// Spelling, when set, rewrites accepted alternative spellings of the
	// arguments (another name for a parameter, 1 for "high") into the ones
	// the schema names, before validation; the schema documents only those.
	Spelling func(args map[string]any)
	Run      func(ctx context.Context, c *Call, in In) (Out, error)
	Summary  func(in In, out Out) string
	// Slow marks a tool that can take more than a second (waits for a
	// systemd job, a camera, the journal): it reports progress to a client
	// that sent a progress token.
	Slow bool
	// Example is one call of the tool that its input schema accepts: the
	// required parameters, with values the laptop config permits, and no
	// guard arguments (whoever runs it adds dry_run, confirm, reason). A
	// tool with required parameters must have one (TestEveryToolHasAnExample):
	// the tests start from it, the error walk breaking it one parameter at a
	// time. Typed, so it cannot name a parameter the tool does not take; a
	// pointer, so that a zero In can be an example too. tools/list does not
	// show it.
	Example *In
	// NeedsDevice, when set, says why this call needs an approval on the
	// device whatever [guard] says for its risk ("" when it does not): a
	// configuration change that widens a power. It sees the validated
	// arguments of a real (not dry) call, before the policy decision.
	NeedsDevice func(ctx context.Context, c *Call, in In) (string, error)
}

// nonNullable drops the "null" that Go pointers, slices and maps get in
// inferred schemas: our results never contain null (absent fields are
// omitted, lists are empty), and clients mapping schemas onto single-type
// dialects (Gemini's OpenAPI subset) reject ["null", T]. A field that really
// is nullable says so with a Prop.
func nonNullable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	notNull(s)
	for _, p := range s.Properties {
		nonNullable(p)
	}
	nonNullable(s.Items)
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil {
		nonNullable(s.AdditionalProperties)
	}
}

// undescribed drops the descriptions of an output schema, at every level.
// They document the result types in the source; on the wire they were a
// fifth of every tools/list (16 KB) for no client: validating
// structuredContent ignores them, and clients do not show output schemas
// to models, which read the result's field names and values. An input
// schema keeps its descriptions: those are what a model reads to call.
func undescribed(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Description = ""
	for _, p := range s.Properties {
		undescribed(p)
	}
	for _, p := range s.PatternProperties {
		undescribed(p)
	}
	for _, p := range s.Defs {
		undescribed(p)
	}
	for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf} {
		for _, p := range l {
			undescribed(p)
		}
	}
	undescribed(s.Items)
	undescribed(s.AdditionalProperties)
}

// notNull makes an optional pointer field a plain type: absent is allowed, null is not.
func notNull(s *jsonschema.Schema) {
	if len(s.Types) == 0 {
		return
	}
	for _, t := range s.Types {
		if t != "null" {
			s.Type, s.Types = t, nil
			return
		}
	}
}

var (
	SnakeName  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,47}$`)
	dottedName = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,47}$`)
)

// WireName maps a canonical id to what clients see. Claude Desktop, Claude
// Code, Cursor, Copilot and OpenAI reject dots, so snake_case is the default.
func WireName(id string, dotted bool) (string, error) {
	if dotted {
		if !dottedName.MatchString(id) {
			return "", fmt.Errorf("agent: tool id %q does not match %s", id, dottedName)
		}
		return id, nil
	}
	n := strings.ReplaceAll(id, ".", "_")
	if !SnakeName.MatchString(n) {
		return "", fmt.Errorf("agent: tool name %q does not match %s", n, SnakeName)
	}
	return n, nil
}

// Add builds a tool from its spec. It fails start-up on any schema problem,
// bad name or collision rather than serving a broken contract.
func Add[In, Out any](r *Registry, s Spec[In, Out]) {
	if r.err != nil {
		return
	}
	t, err := build(r, s)
	if err == nil {
		err = r.Mount(t)
	}
	r.err = err
}

// build is the typed shell around buildTool: only what needs In and Out
// (their types and decoding the arguments into an In) is generic. Each tool's
// In and Out is a distinct struct, so every line here is compiled once per
// tool; everything else is compiled once, in buildTool.
func build[In, Out any](r *Registry, s Spec[In, Out]) (*Tool, error) {
	run, summary, title := s.Run, s.Summary, s.Title
	t, err := buildTool(r, specBase{
		ID: s.ID, Title: s.Title, Description: s.Description, Rule: s.Rule, Stability: s.Stability,
		Idempotent: s.Idempotent, Destructive: s.Destructive, Props: s.Props, OutProps: s.OutProps,
		Spelling: s.Spelling, Slow: s.Slow,
	}, reflect.TypeFor[In](), reflect.TypeFor[Out](), func(ctx context.Context, c *Call, args []byte) (any, string, error) {
		var v In
		if err := decodeArgs(args, &v); err != nil {
			return nil, "", err
		}
		out, err := run(ctx, c, v)
		if err != nil {
			return nil, "", err
		}
		sum := title
		if summary != nil {
			sum = summary(v, out)
		}
		return out, sum, nil
	})
	if err == nil && s.NeedsDevice != nil {
		needs := s.NeedsDevice
		t.needsDevice = func(ctx context.Context, c *Call, args []byte) (string, error) {
			var v In
			if err := decodeArgs(args, &v); err != nil {
				return "", err
			}
			return needs(ctx, c, v)
		}
	}
	if err != nil || s.Example == nil {
		return t, err
	}
	if t.example, err = json.Marshal(s.Example); err != nil {
		return nil, fmt.Errorf("agent: tool %q example: %w", s.ID, err)
	}
	return t, nil
}

// specBase is the part of a Spec that does not depend on In and Out.
type specBase struct {
	ID, Title, Description string
	Rule                   Rule
	Stability              string
	Idempotent             bool
	Destructive            bool
	Props, OutProps        []Prop
	Spelling               func(args map[string]any)
	Slow                   bool
}

// decodeArgs decodes validated arguments into v, refusing unknown fields.
func decodeArgs(args []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errf(errcode.InvalidArgument, "arguments: %v", err)
	}
	return nil
}

func buildTool(r *Registry, s specBase, inType, outType reflect.Type, run func(ctx context.Context, c *Call, args []byte) (any, string, error)) (*Tool, error) {
	name, err := WireName(s.ID, r.opt.Dotted)
	if err != nil {
		return nil, err
	}
	isGuarded := inType.Implements(reflect.TypeFor[guarded]())
	if isGuarded && s.Rule.Risk == RiskRead {
		return nil, fmt.Errorf("agent: tool %q takes guard arguments but has risk read", s.ID)
	}
	if isGuarded {
		s.Props = append(s.Props, P("reason", MaxLen(200)), P("intent", MaxLen(200)))
	}
	newInput := func() (*InputSchema, error) { return buildInput(s.ID, inType, s.Props) }
	// Built once now so that a bad input schema fails start-up, and sent to
	// the SDK as the JSON tools/list shows; built again on the first call.
	in, err := newInput()
	if err != nil {
		return nil, err
	}
	inJSON, err := json.Marshal(in.Tree)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q input schema: %w", s.ID, err)
	}
	out, err := jsonschema.ForType(outType, nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q output schema: %w", s.ID, err)
	}
	nonNullable(out)
	if err := tighten(out, s.OutProps); err != nil {
		return nil, fmt.Errorf("agent: tool %q output: %w", s.ID, err)
	}
	undescribed(out)
	t := &Tool{id: s.ID, name: name, rule: s.Rule, mutating: isGuarded || s.Rule.Risk != RiskRead, stable: s.Stability, spelling: s.Spelling, slow: s.Slow, run: run,
		newInput: sync.OnceValues(newInput)}
	t.check = t.Validate
	if t.stable == "" && r.opt.Stability != nil {
		t.stable = r.opt.Stability(s.ID)
	}
	t.rule.Tool = s.ID
	if t.rule.Domain == "" { // a tool may sit in another namespace's switch (system.get_network_info: network)
		t.rule.Domain = strings.SplitN(s.ID, ".", 2)[0]
	}
	// Resolved once so that a bad output schema fails start-up; kept only
	// where results are checked against it (Options.CheckOutput).
	outRes, err := out.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q output schema: %w", s.ID, err)
	}
	if r.opt.CheckOutput {
		t.outRes = outRes
	}
	// Kept as JSON, not as the tree of schema values: those trees behind all
	// tools' results were 1.8 MB, two thirds of the idle agent's live heap.
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q output schema: %w", s.ID, err)
	}
	readOnly := t.rule.Risk == RiskRead && !t.mutating
	ann := &mcp.ToolAnnotations{Title: s.Title, ReadOnlyHint: readOnly, IdempotentHint: s.Idempotent || readOnly}
	if !readOnly {
		d := s.Destructive
		ann.DestructiveHint = &d
	}
	closed := false
	ann.OpenWorldHint = &closed
	desc := s.Description
	if !readOnly {
		desc += fmt.Sprintf(" Risk %s, role %s.", t.rule.Risk, t.rule.MinRole)
	}
	t.out = outJSON
	t.mcp = &mcp.Tool{Name: name, Title: s.Title, Description: desc, InputSchema: json.RawMessage(inJSON), Annotations: ann,
		Meta: mcp.Meta{"id": s.ID, "risk": t.rule.Risk.String(), "min_role": t.rule.MinRole.String(), "stability": t.stable}}
	return t, nil
}

// InputSchema is what checking a tool's arguments needs: the schema tree,
// its resolved form, and each property's alone for errors that name it.
// A tool builds it on its first call, not at start-up: most tools are never
// called in a session, and all tools' input schemas were most of what an
// idle agent kept in its heap once their output schemas went (see build).
type InputSchema struct {
	Tree     *jsonschema.Schema
	Resolved *jsonschema.Resolved
	Props    map[string]*jsonschema.Resolved // each top-level property's schema alone
}

// buildInput builds a tool's input schema from its In type and Props: the
// same every time, so a build that succeeded at start-up succeeds again.
func buildInput(id string, inType reflect.Type, props []Prop) (*InputSchema, error) {
	tree, err := jsonschema.ForType(inType, nil)
	if err != nil {
		return nil, fmt.Errorf("agent: tool %q input schema: %w", id, err)
	}
	nonNullable(tree)
	if err := tighten(tree, props); err != nil {
		return nil, fmt.Errorf("agent: tool %q: %w", id, err)
	}
	in := &InputSchema{Tree: tree, Props: map[string]*jsonschema.Resolved{}}
	if in.Resolved, err = tree.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		return nil, fmt.Errorf("agent: tool %q input schema: %w", id, err)
	}
	for k, ps := range tree.Properties {
		if in.Props[k], err = ps.Resolve(nil); err != nil {
			return nil, fmt.Errorf("agent: tool %q property %q: %w", id, k, err)
		}
	}
	return in, nil
}

// Input is the tool's input schema; nil for a LAN upstream's tool, or if
// it could not be built (which validate reports).
func (t *Tool) Input() *InputSchema {
	if t.newInput == nil {
		return nil
	}
	in, _ := t.newInput()
	return in
}

// tighten applies Props to the generated schema.
func tighten(s *jsonschema.Schema, props []Prop) error {
	for _, p := range props {
		cur := s
		for _, part := range strings.Split(p.Path, ".") {
			for cur.Items != nil && cur.Properties == nil {
				cur = cur.Items
			}
			next, ok := cur.Properties[part]
			if !ok {
				return fmt.Errorf("schema has no property %q", p.Path)
			}
			cur = next
		}
		for _, m := range p.Mods {
			m(cur)
		}
	}
	return nil
}

// Validate checks raw arguments against the tool's schema and returns them with
// defaults applied. Errors name the parameter, what was expected and what came,
// as the tool catalog's invalid-request example does (parameter, expected_type,
// actual_type; spec 002 §2.6.7), instead of the SDK's plain-text validation message.
func (t *Tool) Validate(raw json.RawMessage) ([]byte, *Error) {
	in, err := t.newInput()
	if err != nil {
		return nil, Errf(errcode.Internal, "%v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, Errf(errcode.InvalidArgument, "arguments must be a JSON object").With("actual_type", JSONType(raw))
	}
	if t.spelling != nil {
		t.spelling(args)
	}
	dropNulls(in.Tree, args)
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := in.Tree.Properties[k]; !ok {
			return nil, Errf(errcode.InvalidArgument, "unknown parameter %q", k).
				With("parameter", k).With("allowed_parameters", t.paramNames()).
				Hint("remove " + k + "; " + t.name + " takes only the listed parameters")
		}
	}
	for _, k := range in.Tree.Required {
		if _, ok := args[k]; !ok {
			ps := in.Tree.Properties[k]
			e := Errf(errcode.InvalidArgument, "missing required parameter %q", k).
				With("parameter", k).With("expected_type", SchemaType(ps)).
				Hint("add " + k + " (" + Describe(ps) + ") and call " + t.name + " again")
			if len(ps.Enum) > 0 {
				e.With("allowed_values", ps.Enum)
			}
			return nil, e
		}
	}
	for _, k := range keys {
		if err := in.Props[k].Validate(args[k]); err != nil {
			ps := in.Tree.Properties[k]
			e := Errf(errcode.InvalidArgument, "parameter %q %s", k, problem(ps, args[k], err)).
				With("parameter", k).With("expected_type", SchemaType(ps)).With("actual_type", GoJSONType(args[k])).
				With("provided_value", args[k]).
				Hint("set " + k + " to " + Describe(ps) + ", or leave it out if it is optional")
			if slices.Contains(in.Tree.Required, k) {
				e.Hint("set " + k + " to " + Describe(ps))
			}
			if ps.Minimum != nil {
				e.With("minimum", *ps.Minimum)
			}
			if ps.Maximum != nil {
				e.With("maximum", *ps.Maximum)
			}
			if ps.MaxLength != nil {
				e.With("max_length", *ps.MaxLength)
			}
			if len(ps.Enum) > 0 {
				e.With("allowed_values", ps.Enum)
			}
			return nil, e
		}
	}
	if err := in.Resolved.ApplyDefaults(&args); err != nil {
		return nil, Errf(errcode.InvalidArgument, "arguments: %s", cleanValidation(err))
	}
	if err := in.Resolved.Validate(args); err != nil {
		return nil, Errf(errcode.InvalidArgument, "arguments: %s", cleanValidation(err))
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, Errf(errcode.InvalidArgument, "arguments: %v", err)
	}
	return b, nil
}

// dropNulls removes explicit nulls of optional properties, at every level of
// nested objects: null for an optional parameter means "not given", as many
// clients send it. The advertised schemas keep single types rather than
// ["T", "null"] unions, which some clients' schema dialects reject; a null
// for a required parameter stays and is refused by name.
func dropNulls(s *jsonschema.Schema, m map[string]any) {
	for k, v := range m {
		ps, ok := s.Properties[k]
		if !ok {
			continue
		}
		switch v := v.(type) {
		case nil:
			if !slices.Contains(s.Required, k) {
				delete(m, k)
			}
		case map[string]any:
			dropNulls(ps, v)
		}
	}
}

func (t *Tool) paramNames() []string {
	in := t.Input()
	if in == nil {
		return nil
	}
	n := make([]string, 0, len(in.Tree.Properties))
	for k := range in.Tree.Properties {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// problem says in plain words why v does not fit s, in the words of the tool
// catalog's invalid-request example ("must be an integer, got string", spec 002
// §2.6.7); the library's message is the fallback.
func problem(s *jsonschema.Schema, v any, err error) string {
	want, got := SchemaType(s), GoJSONType(v)
	switch {
	case v == nil && !slices.Contains(s.Types, "null"):
		return fmt.Sprintf("must be %s, got null", article(want))
	case want == "integer" && got == "number":
		if f := v.(float64); f != math.Trunc(f) {
			return fmt.Sprintf("must be an integer, got %v", f)
		}
	case want != "" && !strings.Contains(want, got) && !(got == "number" && strings.Contains(want, "integer")):
		return fmt.Sprintf("must be %s, got %s", article(want), got)
	}
	if f, ok := v.(float64); ok {
		if s.Minimum != nil && f < *s.Minimum {
			return fmt.Sprintf("must be at least %v, got %v", *s.Minimum, f)
		}
		if s.Maximum != nil && f > *s.Maximum {
			return fmt.Sprintf("must be at most %v, got %v", *s.Maximum, f)
		}
	}
	if str, ok := v.(string); ok {
		n := utf8.RuneCountInString(str)
		if s.MaxLength != nil && n > *s.MaxLength {
			return fmt.Sprintf("must be at most %d characters, got %d", *s.MaxLength, n)
		}
		if s.MinLength != nil && n < *s.MinLength {
			return fmt.Sprintf("must be at least %d characters, got %d", *s.MinLength, n)
		}
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return e == v }) {
		return fmt.Sprintf("must be one of %v, got %v", s.Enum, v)
	}
	return "is invalid: " + cleanValidation(err)
}

func article(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	}
	return "a " + t
}

// cleanValidation keeps the last, most specific clause of a jsonschema error.
func cleanValidation(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		if j := strings.LastIndex(msg[:i], ": "); j >= 0 {
			return msg[j+2:]
		}
	}
	return msg
}

func SchemaType(s *jsonschema.Schema) string {
	if s == nil {
		return ""
	}
	if s.Type != "" {
		return s.Type
	}
	ts := []string{}
	for _, t := range s.Types {
		if t != "null" {
			ts = append(ts, t)
		}
	}
	return strings.Join(ts, "|")
}

func GoJSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func JSONType(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	return GoJSONType(v)
}

// NewCorrelationID is short, random and safe to log.
func NewCorrelationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "c-" + hex.EncodeToString(b[:])
}

var clientCorrelation = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// CorrelationFrom takes the client's _meta.correlation_id when it is sane.
func CorrelationFrom(meta map[string]any) string {
	if s, ok := meta["correlation_id"].(string); ok && clientCorrelation.MatchString(s) {
		return s
	}
	return NewCorrelationID()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// CheckOut validates a marshalled result against the tool's output schema.
func (t *Tool) CheckOut(js []byte) error {
	if t.outRes == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		return err
	}
	return t.outRes.Validate(v)
}

// Describe says in words what s accepts: "an integer from 1 to 53", "one of high, low".
func Describe(s *jsonschema.Schema) string {
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		return "one of " + strings.Join(vals, ", ")
	}
	d := article(SchemaType(s))
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'f', -1, 64) }
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		d += " from " + num(s.Minimum) + " to " + num(s.Maximum)
	case s.Minimum != nil:
		d += " of at least " + num(s.Minimum)
	case s.Maximum != nil:
		d += " of at most " + num(s.Maximum)
	}
	if s.MaxLength != nil {
		d += fmt.Sprintf(" of at most %d characters", *s.MaxLength)
	}
	if s.Format != "" {
		d += " (" + s.Format + ")"
	}
	return d
}

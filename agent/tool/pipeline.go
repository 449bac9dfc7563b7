package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/canon"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// The pipeline is what every call goes through, whatever tool it calls:
// validate, decide, ask the person, run, audit, shape the result. It knows
// no namespace and no device; what it needs of the agent (the audit trail,
// the change-token store, the config, the catalog's suggestions, the
// notifications) comes in PipelineOptions.

// Decisions of an audit record.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	// DecisionDeclined is a call the policy allowed but the person, asked
	// by their client, declined (or did not answer in time).
	DecisionDeclined = "declined_by_user"
)

// Record is one audit record as the pipeline writes it; the agent's trail
// adds the chain (sequence number, previous hash, hash). The hashes are
// PipelineOptions.Hash of the canonical input and of the output (or of
// {"error": the error}).
type Record struct {
	Time          time.Time
	CorrelationID string
	Principal     string
	Role          string
	Tool          string
	Decision      string
	DryRun        bool
	Reason        string
	Intent        string
	InHash        string
	OutHash       string
	DurationMS    int64
	ErrorCode     string
	Message       string
	Upstream      string
	Remote        string
	Elicitation   string
	// Channel is what approved (or refused) a high or critical call:
	// ChannelButton, "console:USER", ChannelElicitation, ChannelToken,
	// ChannelConfirm; "" for calls that need no approval.
	Channel  string
	Approver string // who answered on the device: "button", a user name
	WaitedMS int64  // how long the call waited for the device
	// Traceparent is the W3C traceparent the client sent in _meta
	// (trace.go); "" when none or a malformed one came.
	Traceparent string
	// Profile is the caller's profile when it narrows the role ("" for
	// none): a refusal then reads against what the owner granted.
	Profile string
}

// Result interfaces a tool's result type may implement.
type (
	// TextViewer is a result whose text block shows something other than
	// its structured content (a photo without its base64).
	TextViewer interface{ TextView() any }
	// ContentAdder is a result that adds content blocks (a camera image).
	ContentAdder interface{ Content() []mcp.Content }
	// AuditMessager names what the call's audit record should say (the
	// hash of the configuration diff an apply put in force).
	AuditMessager interface{ AuditMessage() string }
	// PassThrough is a LAN upstream's answer, which goes to the client as
	// it came.
	PassThrough interface {
		PassThrough() (upstream string, res *mcp.CallToolResult)
	}
)

// PipelineOptions are what the pipeline needs from the agent.
type PipelineOptions struct {
	// Config is the configuration in force now.
	Config func() *config.Config
	Log    *slog.Logger
	// Audit appends one record durably and returns its reference.
	Audit func(Record) (ref string, err error)
	// Tokens keeps the change tokens; nil: change_prepare and
	// change_commit answer unavailable.
	Tokens TokenStore
	// MapError maps a handler's error that is not a *Error (the helper's,
	// say); internal means a bug, logged. nil: every such error is internal.
	MapError func(err error) (te *Error, internal bool)
	// Lookup is the read tool listing the valid values of t's parameter
	// param ("" for the objects t works on); may be nil.
	Lookup func(t *Tool, param string, args map[string]any) (SuggestedCall, bool)
	// Progress starts progress notifications of a call; may be nil.
	Progress func(ctx context.Context, t *Tool, c *Call) (stop func())
	// Denied tells the person a call was refused; may be nil.
	Denied func(ctx context.Context, t *Tool, c *Call, decision string, e *Error)
	// Count counts a finished call beyond the tool's own Stats; may be nil.
	Count func(t *Tool, decision string, e *Error)
	// Device names the device for the question put to the person; nil:
	// "this Raspberry Pi".
	Device func(ctx context.Context) string
	// Approver waits for approvals on the device (the button, the
	// console); nil: a call that needs one is refused.
	Approver DeviceApprover
	// Waiting tells the client of a call that waits for the device what
	// the person should do (progress and a log message) until stop is
	// called; may be nil.
	Waiting func(ctx context.Context, t *Tool, c *Call, msg string) (stop func())
	// CheckOutput reports whether results are checked against their
	// output schemas; nil: never.
	CheckOutput func() bool
	// Capabilities, Status and Prepare are the ids of the tools an error
	// suggests: to see what one may call, whether the agent's parts are up,
	// and to prepare a critical call.
	Capabilities, Status, Prepare string
}

// Pipeline runs calls of the tools of one registry.
type Pipeline struct {
	tools *Registry
	o     PipelineOptions
	asks  *asks
}

// NewPipeline is the pipeline of r's tools.
func NewPipeline(r *Registry, o PipelineOptions) *Pipeline {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.MapError == nil {
		o.MapError = func(error) (*Error, bool) {
			return Errf(errcode.Internal, "internal error; the agent log has the details"), true
		}
	}
	return &Pipeline{tools: r, o: o, asks: newAsks()}
}

func (p *Pipeline) conf() *config.Config { return p.o.Config() }

// Handler adapts a tool to the SDK's low-level ToolHandler, which leaves
// validation and result shape to us.
func (p *Pipeline) Handler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		pr, ok := identity.FromContext(ctx)
		if !ok {
			pr = identity.Principal{Name: "unknown", UID: -1}
		}
		c := &Call{Principal: pr, CorrelationID: CorrelationFrom(req.Params.Meta), Session: req.Session, ProgressToken: req.Params.GetProgressToken(), request: req}
		return p.Invoke(ctx, t, c, req.Params.Arguments), nil
	}
}

// outcome is one finished call, before it becomes an MCP result.
type outcome struct {
	out      any
	summary  string
	err      *Error
	auditRef string
	dur      time.Duration
	// input, in the 2026-07-28 era, is the question for the person the
	// call is answered with first; the call is audited when answered.
	input *mcp.CallToolResult
}

// Invoke runs the whole pipeline for one call: validate, decide, run, audit.
// It never returns a Go error: every failure is an Error a model can act on.
func (p *Pipeline) Invoke(ctx context.Context, t *Tool, c *Call, raw json.RawMessage) *mcp.CallToolResult {
	o := p.execute(ctx, t, c, raw)
	if o.input != nil {
		return o.input
	}
	return p.result(t, c, o)
}

// Call runs tool id for principal pr with args (any value that marshals to
// the tool's arguments) through the whole pipeline, audited exactly as a
// client's call is, and returns its result object or its error. ss is the
// session it serves, for asking the person; may be nil.
func (p *Pipeline) Call(ctx context.Context, pr identity.Principal, id string, args any, ss *mcp.ServerSession) (any, *Error) {
	t, ok := p.tools.Get(id)
	if !ok {
		return nil, Errf(errcode.NotFound, "tool %s is not registered", id)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, Errf(errcode.InvalidArgument, "arguments of %s: %v", id, err)
	}
	o := p.execute(ctx, t, &Call{Principal: pr, CorrelationID: NewCorrelationID(), Session: ss}, raw)
	return o.out, o.err
}

// May is nil when principal pr may call tool id now (role and switches, as
// its dry run is checked), else the refusal the call would get.
func (p *Pipeline) May(pr identity.Principal, id string) *Error {
	t, ok := p.tools.Get(id)
	if !ok {
		return Errf(errcode.NotFound, "tool %s is not registered", id)
	}
	return Decide(p.conf(), pr, t.Rule(), Guard{DryRun: true}, false)
}

func (p *Pipeline) execute(ctx context.Context, t *Tool, c *Call, raw json.RawMessage) outcome {
	start := time.Now()
	t.stats.calls.Add(1)
	var o outcome
	decision, elicited := DecisionAllow, ""
	args, verr := t.Check(raw)
	if verr != nil {
		decision, o.err = DecisionDeny, verr
	} else {
		// Guard arguments are needed for the decision before the handler
		// runs; tools without them decode to the zero guard.
		var g GuardArgs
		_ = json.Unmarshal(args, &g)
		c.Guard = Guard(g)
		// Only a call the person confirms needs to know how to reach
		// them; reading that is per request from 2026-07-28 on (the
		// capabilities in the request's _meta), so a cheap call skips it.
		var ask asking
		if needsPerson(t, c) {
			ask = p.askingOf(c)
		}
		// A call the device approves needs no guard of the client's
		// channel, and the client is not asked: the device is.
		why, gerr := p.deviceReason(ctx, t, c, args)
		standIn := false
		if gerr == nil && why == "" {
			standIn, gerr = p.personGate(t, c, ask)
		}
		var pa personAnswer
		if gerr != nil {
			decision, o.err = DecisionDeny, gerr
		} else if derr := Decide(p.conf(), c.Principal, t.Rule(), c.Guard, c.committed || standIn || why != ""); derr != nil {
			decision, o.err = DecisionDeny, derr
			if t.Rule().Risk == RiskCritical && derr.Code == errcode.FailedPrecondition {
				var m map[string]any
				_ = json.Unmarshal(args, &m)
				derr.Suggest(SuggestedCall{Tool: p.wire(PrepareID), Arguments: map[string]any{"tool": t.Name(), "arguments": m},
					Why: "get a single-use change token for exactly this call"})
			}
		} else if why != "" {
			if pa = p.awaitDevice(ctx, t, c, args, why); pa.err != nil {
				decision, o.err = pa.decision, pa.err
			} else {
				o.out, o.summary, o.err, decision = p.run(ctx, t, c, args)
			}
		} else if pa = p.askPerson(ctx, t, c, ask, args); pa.input != nil {
			return outcome{input: pa.input}
		} else if pa.err != nil {
			decision, o.err, elicited = pa.decision, pa.err, pa.answer
		} else {
			elicited = pa.answer
			o.out, o.summary, o.err, decision = p.run(ctx, t, c, args)
		}
	}
	if o.err != nil {
		t.stats.failures.Add(1)
		p.actionable(t, c, raw, o.err)
		if decision != DecisionAllow && p.o.Denied != nil {
			p.o.Denied(ctx, t, c, decision, o.err)
		}
	}
	o.dur = time.Since(start)
	// A call to a LAN upstream leaves the Pi: it is recorded even as a read.
	if t.Mutating() || t.LAN() || o.err != nil || p.conf().Audit.RecordReads {
		rec := Record{
			Time: start.UTC(), CorrelationID: c.CorrelationID, Principal: c.Principal.Name, Role: c.Principal.Role.String(),
			Tool: t.ID(), Decision: decision, DryRun: c.DryRun, Reason: c.Reason, Intent: c.Intent, DurationMS: ms(o.dur),
			Elicitation: elicited, Remote: c.Principal.Remote, Traceparent: c.Traceparent(),
			Profile: narrowing(c.Principal.Profile),
		}
		rec.Channel, rec.Approver, rec.WaitedMS = channelOf(t, c, elicited)
		ref, err := p.Record(rec, RawOrEmpty(raw), o.out, o.err)
		if err != nil {
			// The action may have happened; say so rather than pretend.
			p.o.Log.Error("audit append failed", "tool", t.ID(), "correlation_id", c.CorrelationID, "err", err)
			o.out, o.err = nil, Errf(errcode.Internal, "the audit trail could not be written; the call's effect is unknown").
				Hint("read the state this call would change before retrying; on the device, `raspi-mcp status` shows the database's problem")
		} else {
			o.auditRef = ref
		}
	}
	p.count(t, decision, o.err)
	p.logCall(ctx, t, c, decision, o)
	return o
}

// run runs an allowed call's handler, with progress for a slow tool.
func (p *Pipeline) run(ctx context.Context, t *Tool, c *Call, args []byte) (out any, sum string, te *Error, decision string) {
	stop := func() {}
	if p.o.Progress != nil {
		stop = p.o.Progress(ctx, t, c)
	}
	out, sum, err := t.Run(ctx, c, args)
	stop()
	if err == nil {
		return out, sum, nil, DecisionAllow
	}
	te, internal := p.toError(err)
	if internal {
		p.o.Log.Error("tool failed", "tool", t.ID(), "correlation_id", c.CorrelationID, "err", err)
	}
	// An allowlist (the agent's or the helper's) refused it: a denial,
	// recorded as one, though found past Decide.
	if te.Code == errcode.PermissionDenied {
		return nil, "", te, DecisionDeny
	}
	return nil, "", te, DecisionAllow
}

// channelOf is what approved a high or critical call, for its audit
// record: the device's answer when it was asked, else the client's guard.
func channelOf(t *Tool, c *Call, elicited string) (channel, approver string, waitedMS int64) {
	switch {
	case c.approval != nil:
		return c.approval.Channel, c.approval.Approver, ms(c.approval.Waited)
	case t.Rule().Risk < RiskHigh || c.DryRun:
		return "", "", 0
	case elicited != "":
		return ChannelElicitation, "", 0
	case c.committed:
		return ChannelToken, "", 0
	case c.Confirm:
		return ChannelConfirm, "", 0
	}
	return "", "", 0
}

// count records one finished call: its decision, and its error if it failed.
func (p *Pipeline) count(t *Tool, decision string, e *Error) {
	switch decision {
	case DecisionAllow:
		t.stats.allowed.Add(1)
	case DecisionDeclined:
		t.stats.declined.Add(1)
	default:
		t.stats.denied.Add(1)
	}
	if p.o.Count != nil {
		p.o.Count(t, decision, e)
	}
}

// toError turns any error from a handler into the public shape: an *Error
// as it is, anything else through MapError.
func (p *Pipeline) toError(err error) (*Error, bool) {
	var te *Error
	if errors.As(err, &te) {
		return te, false
	}
	return p.o.MapError(err)
}

// result shapes an outcome the same way for every tool of ours (a LAN
// upstream's answer passes through as it came): structuredContent is the
// result object, checked against the output schema, the text block holds a
// one-line summary then the same JSON (without a photo's base64, which an
// image block carries), and _meta carries correlation id, duration and audit
// ref. An error is {"error": {...}} in the text block and
// in _meta.error.
func (p *Pipeline) result(t *Tool, c *Call, o outcome) *mcp.CallToolResult {
	meta := mcp.Meta{"correlation_id": c.CorrelationID, "duration_ms": ms(o.dur)}
	if o.auditRef != "" {
		meta["audit_ref"] = o.auditRef
	}
	if o.err != nil {
		// Clients built on the TypeScript SDK validate structuredContent
		// against outputSchema even when isError is set, so the error object
		// goes in the text (for the model) and in _meta.error (for programs),
		// never in structuredContent.
		meta["error"] = o.err
		js, _ := json.Marshal(map[string]any{"error": o.err})
		return &mcp.CallToolResult{
			Meta: meta, IsError: true,
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("error %s: %s\n%s", o.err.Code, o.err.Message, js)}},
		}
	}
	if lr, ok := o.out.(PassThrough); ok {
		// An upstream's answer goes to the client as it came.
		upstream, res := lr.PassThrough()
		meta["upstream"] = upstream
		out := &mcp.CallToolResult{Meta: meta, Content: res.Content}
		if res.StructuredContent != nil {
			if js, err := json.Marshal(res.StructuredContent); err == nil {
				out.StructuredContent = json.RawMessage(js)
			}
		}
		return out
	}
	js, err := json.Marshal(o.out)
	if err == nil && p.o.CheckOutput != nil && p.o.CheckOutput() {
		err = t.CheckOut(js)
	}
	if err != nil {
		p.o.Log.Error("tool output breaks its schema", "tool", t.ID(), "err", err)
		return p.result(t, c, outcome{err: Errf(errcode.Internal, "the tool produced an invalid result").
			Hint("a bug in raspi-mcp, not in your call: the device owner finds it in the agent log under correlation id " + c.CorrelationID), dur: o.dur, auditRef: o.auditRef})
	}
	summary := o.summary
	if c.DryRun {
		summary = "dry run: " + summary
	}
	text := js
	if x, ok := o.out.(TextViewer); ok {
		if tj, err := json.Marshal(x.TextView()); err == nil {
			text = tj // e.g. without a base64 image the image block carries
		}
	}
	content := []mcp.Content{&mcp.TextContent{Text: summary + "\n" + string(text)}}
	if x, ok := o.out.(ContentAdder); ok {
		content = append(content, x.Content()...) // e.g. a camera image
	}
	return &mcp.CallToolResult{Meta: meta, StructuredContent: json.RawMessage(js), Content: content}
}

// RawOrEmpty is raw, or {} when raw is empty or not JSON: what an audit
// record hashes as a call's input.
func RawOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 || !json.Valid(raw) {
		return json.RawMessage("{}")
	}
	return raw
}

// Truncate cuts s to at most n bytes.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// wire is the wire name of a canonical id under the current naming mode.
func (p *Pipeline) wire(id string) string {
	if t, ok := p.tools.Get(id); ok {
		return t.Name()
	}
	return id
}

// Record appends the audit record of one call, with the hashes of what came
// in and what went out (or the error), and returns its reference.
func (p *Pipeline) Record(rec Record, in, out any, terr *Error) (string, error) {
	rec.InHash, _ = canon.Hash(in)
	if terr != nil {
		rec.ErrorCode, rec.Message = terr.Code, Truncate(terr.Message, 200)
		rec.OutHash, _ = canon.Hash(map[string]any{"error": terr})
	} else {
		rec.OutHash, _ = canon.Hash(out)
		// A result may name what the record should say, e.g. the hash
		// of the configuration diff an apply put in force.
		if m, ok := out.(AuditMessager); ok {
			rec.Message = Truncate(m.AuditMessage(), 200)
		}
	}
	return p.o.Audit(rec)
}

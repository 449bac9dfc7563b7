package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// principalFrom is the principal the doors (agent/transport) put in ctx.
func principalFrom(ctx context.Context) (identity.Principal, bool) {
	return identity.FromContext(ctx)
}

// handler adapts a tool to the SDK's low-level ToolHandler, which leaves
// validation and result shape to us.
func (a *Agent) handler(t *tool.Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := principalFrom(ctx)
		if !ok {
			p = identity.Principal{Name: "unknown", UID: -1}
		}
		c := &tool.Call{Principal: p, CorrelationID: tool.CorrelationFrom(req.Params.Meta), Session: req.Session, ProgressToken: req.Params.GetProgressToken(), Request: req}
		return a.invoke(ctx, t, c, req.Params.Arguments), nil
	}
}

// outcome is one finished call, before it becomes an MCP result.
type outcome struct {
	out      any
	summary  string
	err      *tool.Error
	auditRef string
	dur      time.Duration
	// input, in the 2026-07-28 era, is the question for the person the
	// call is answered with first; the call is audited when answered.
	input *mcp.CallToolResult
}

// invoke runs the whole pipeline for one call: validate, decide, run, audit.
// It never returns a Go error: every failure is a tool.Error a model can act on.
func (a *Agent) invoke(ctx context.Context, t *tool.Tool, c *tool.Call, raw json.RawMessage) *mcp.CallToolResult {
	o := a.execute(ctx, t, c, raw)
	if o.input != nil {
		return o.input
	}
	return a.result(t, c, o)
}

func (a *Agent) execute(ctx context.Context, t *tool.Tool, c *tool.Call, raw json.RawMessage) outcome {
	start := time.Now()
	t.Stats.Calls.Add(1)
	var o outcome
	decision, elicited := "allow", ""
	args, verr := t.Check(raw)
	if verr != nil {
		decision, o.err = "deny", verr
	} else {
		// Guard arguments are needed for the decision before the handler
		// runs; tools without them decode to the zero guard.
		var g tool.GuardArgs
		_ = json.Unmarshal(args, &g)
		c.Guard = tool.Guard(g)
		ask := a.askingOf(c)
		standIn, gerr := a.personGate(t, c, ask)
		var pa personAnswer
		if gerr != nil {
			decision, o.err = "deny", gerr
		} else if derr := tool.Decide(a.conf(), c.Principal, t.Rule(), c.Guard, c.Committed || standIn); derr != nil {
			decision, o.err = "deny", derr
			if t.Rule().Risk == tool.RiskCritical && derr.Code == CodeFailedPrecondition {
				var m map[string]any
				_ = json.Unmarshal(args, &m)
				derr.Suggest(tool.SuggestedCall{Tool: a.wire("change.prepare"), Arguments: map[string]any{"tool": t.Name(), "arguments": m},
					Why: "get a single-use change token for exactly this call"})
			}
		} else if pa = a.askPerson(ctx, t, c, ask, args); pa.input != nil {
			return outcome{input: pa.input}
		} else if pa.err != nil {
			decision, o.err, elicited = pa.decision, pa.err, pa.answer
		} else {
			elicited = pa.answer
			stop := a.progress(ctx, t, c)
			out, sum, err := t.Run(ctx, c, args)
			stop()
			if err != nil {
				te, internal := toToolError(err)
				if internal {
					a.log.Error("tool failed", "tool", t.ID(), "correlation_id", c.CorrelationID, "err", err)
				}
				o.err = te
				// An allowlist (the agent's or the helper's) refused it:
				// a denial, recorded as one, though found past Decide.
				if te.Code == CodePermissionDenied {
					decision = "deny"
				}
			} else {
				o.out, o.summary = out, sum
			}
		}
	}
	if o.err != nil {
		t.Stats.Failures.Add(1)
		a.actionable(t, c, raw, o.err)
		if decision != "allow" {
			a.tellDenied(ctx, t, c, decision, o.err)
		}
	}
	o.dur = time.Since(start)
	// A call to a LAN upstream leaves the Pi: it is recorded even as a read.
	if t.Mutating() || t.LAN() || o.err != nil || a.conf().Audit.RecordReads {
		rec := store.AuditRecord{
			Time: start.UTC(), CorrelationID: c.CorrelationID, Principal: c.Principal.Name, Role: c.Principal.Role.String(),
			Tool: t.ID(), Decision: decision, DryRun: c.DryRun, Reason: c.Reason, Intent: c.Intent, DurationMS: ms(o.dur),
			Elicitation: elicited, Remote: c.Principal.Remote,
		}
		ref, err := a.record(rec, rawOrEmpty(raw), o.out, o.err)
		if err != nil {
			// The action may have happened; say so rather than pretend.
			a.log.Error("audit append failed", "tool", t.ID(), "correlation_id", c.CorrelationID, "err", err)
			o.out, o.err = nil, tool.Errf(CodeInternal, "the audit trail could not be written; the call's effect is unknown").
				Hint("read the state this call would change before retrying; on the device, `raspi-mcp status` shows the database's problem")
		} else {
			o.auditRef = ref
		}
	}
	a.count(t, decision, o.err)
	return o
}

// result shapes an outcome the same way for every tool of ours (a LAN
// upstream's answer passes through as it came): structuredContent is the
// result object, checked against the output schema, the text block holds a
// one-line summary then the same JSON (without a photo's base64, which an
// image block carries), and _meta carries correlation id, duration and audit
// ref. An error is {"error": {...}} in the text block and
// in _meta.error.
func (a *Agent) result(t *tool.Tool, c *tool.Call, o outcome) *mcp.CallToolResult {
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
	if lr, ok := o.out.(lanResult); ok {
		// An upstream's answer goes to the client as it came.
		meta["upstream"] = lr.upstream
		out := &mcp.CallToolResult{Meta: meta, Content: lr.res.Content}
		if lr.res.StructuredContent != nil {
			if js, err := json.Marshal(lr.res.StructuredContent); err == nil {
				out.StructuredContent = json.RawMessage(js)
			}
		}
		return out
	}
	js, err := json.Marshal(o.out)
	if err == nil && a.checkOutput {
		err = t.CheckOut(js)
	}
	if err != nil {
		a.log.Error("tool output breaks its schema", "tool", t.ID(), "err", err)
		return a.result(t, c, outcome{err: tool.Errf(CodeInternal, "the tool produced an invalid result").
			Hint("a bug in raspi-mcp, not in your call: the device owner finds it in the agent log under correlation id " + c.CorrelationID), dur: o.dur, auditRef: o.auditRef})
	}
	summary := o.summary
	if c.DryRun {
		summary = "dry run: " + summary
	}
	text := js
	if x, ok := o.out.(interface{ textView() any }); ok {
		if tj, err := json.Marshal(x.textView()); err == nil {
			text = tj // e.g. without a base64 image the image block carries
		}
	}
	content := []mcp.Content{&mcp.TextContent{Text: summary + "\n" + string(text)}}
	if x, ok := o.out.(interface{ content() []mcp.Content }); ok {
		content = append(content, x.content()...) // e.g. a camera image
	}
	return &mcp.CallToolResult{Meta: meta, StructuredContent: json.RawMessage(js), Content: content}
}

func rawOrEmpty(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 || !json.Valid(raw) {
		return json.RawMessage("{}")
	}
	return raw
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// wire is the wire name of a canonical id under the current naming mode.
func (a *Agent) wire(id string) string {
	if t, ok := a.tools.Get(id); ok {
		return t.Name()
	}
	return id
}

// record appends the audit record of one call, with the hashes of what came
// in and what went out (or the error), and returns its reference.
func (a *Agent) record(rec store.AuditRecord, in, out any, terr *tool.Error) (string, error) {
	rec.InHash, _ = store.HashJSON(in)
	if terr != nil {
		rec.ErrorCode, rec.Message = terr.Code, truncate(terr.Message, 200)
		rec.OutHash, _ = store.HashJSON(map[string]any{"error": terr})
	} else {
		rec.OutHash, _ = store.HashJSON(out)
		// A result may name what the record should say, e.g. the hash
		// of the configuration diff an apply put in force.
		if m, ok := out.(interface{ auditMessage() string }); ok {
			rec.Message = truncate(m.auditMessage(), 200)
		}
	}
	stored, err := a.appendAudit(rec)
	if err != nil {
		return "", err
	}
	return stored.Ref(), nil
}

// rule is the rule of a local tool, which always exists.
func (a *Agent) rule(id string) tool.Rule {
	t, _ := a.tools.Get(id)
	return t.Rule()
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

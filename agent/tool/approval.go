package tool

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/canon"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Every guard the client channel has (confirm and reason, a change token,
// even an elicitation answer) is something a model or its client can
// produce. A device approval is not: the owner presses the button on the
// Pi, or answers `raspi-mcp approve` at its console. [guard] high and
// critical say which channel approves a call of that risk; a tool can add
// its own reason to need the device (NeedsDevice: a configuration change
// that widens a power), which no setting lowers.

// Channels an approval can come through, as audit records name them
// (a console approval is "console:" and the approver's name).
const (
	ChannelButton      = "button"
	ChannelConsole     = "console"
	ChannelElicitation = "client:elicitation"
	ChannelToken       = "client:change_token"
	ChannelConfirm     = "client:confirm"
)

// ApprovalRequest is one call put to the device for approval: everything
// the person is shown, and what the approval is bound to.
type ApprovalRequest struct {
	Principal identity.Principal
	Tool      string // canonical id
	Name      string // wire name
	Title     string
	Risk      Risk
	// Bind is the hash of principal, tool, arguments and plan: an
	// approval is for exactly this call.
	Bind string
	// Arguments are the call's arguments without the guard ones, as
	// compact JSON, for display.
	Arguments string
	// Plan is the tool's dry run in the agent's words, "" when it has
	// none.
	Plan string
	// Reason and Intent are the model's words: shown quoted, one line.
	Reason, Intent string
	// Why says why the device is asked: the risk's channel, or what a
	// configuration change widens.
	Why string
	// Transport is how the caller came: "socket" or the HTTP remote.
	Transport string
	// CorrelationID is the call's, for the audit record of a wait a
	// restart cut short.
	CorrelationID string
}

// ApprovalOutcome is how a device approval ended.
type ApprovalOutcome struct {
	Approved bool
	Channel  string // ChannelButton, "console:USER"; "" when nobody answered
	Approver string
	Waited   time.Duration
	// Err is why the call does not run, when not approved: declined,
	// timed out, refused (busy), or the wait broke.
	Err *Error
	// Declined is true when a person (or the clock) said no, as against
	// a refusal before anyone was asked.
	Declined bool
}

// DeviceApprover waits for a device approval of one call. tell gives the
// model (through its client) a message it can relay to the person: where
// to press or what to run.
type DeviceApprover interface {
	Await(ctx context.Context, r ApprovalRequest, tell func(msg string)) ApprovalOutcome
}

// deviceReason is why a call needs a device approval, "" when it does
// not: the risk's channel in [guard], or the tool's own NeedsDevice.
func (p *Pipeline) deviceReason(ctx context.Context, t *Tool, c *Call, args []byte) (string, *Error) {
	if c.DryRun || t.Rule().Risk < RiskHigh && t.needsDevice == nil {
		return "", nil
	}
	g := p.conf().Guard
	if t.Rule().Risk >= RiskHigh && g.DeviceApproves(t.Rule().Risk.String()) {
		return "[guard] " + t.Rule().Risk.String() + " = \"" + config.ChannelDevice + "\"", nil
	}
	if t.needsDevice != nil {
		why, err := t.needsDevice(ctx, c, args)
		if err != nil {
			return "", p.asError(err)
		}
		return why, nil
	}
	return "", nil
}

// asError is err as the public shape.
func (p *Pipeline) asError(err error) *Error {
	te, internal := p.toError(err)
	if internal {
		p.o.Log.Error("deciding a device approval failed", "err", err)
	}
	return te
}

// awaitDevice puts the call to the device and waits. Its plan comes from
// the tool's own dry run; a dry run that is refused fails the call as the
// real one would, without troubling the person.
func (p *Pipeline) awaitDevice(ctx context.Context, t *Tool, c *Call, args []byte, why string) personAnswer {
	if p.o.Approver == nil {
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.Unavailable, "%s needs an approval on the device, and this agent has no approval channel on the device", t.Name()).
			With("tool", t.ID()).With("why", why).
			Hint("the owner runs raspi-mcp as its service on the Pi (raspi-mcp serve), where `raspi-mcp approve` reaches it")}
	}
	plan, refused := p.plan(ctx, t, c, args)
	if refused != nil {
		return refusedPlan(refused)
	}
	var shown map[string]any
	_ = json.Unmarshal(args, &shown)
	for _, k := range []string{"confirm", "reason", "intent", "dry_run", "change_token"} {
		delete(shown, k)
	}
	argText, _ := json.Marshal(shown)
	bind, err := canon.Hash(map[string]any{"tool": t.ID(), "arguments": json.RawMessage(args), "principal": c.Principal.Name, "plan": plan})
	if err != nil {
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.Internal, "hashing the call to approve: %v", err)}
	}
	transport := "socket"
	if c.Principal.Remote != "" {
		transport = "http from " + c.Principal.Remote
	}
	title := t.ID()
	if t.MCP() != nil && t.MCP().Title != "" {
		title = t.MCP().Title
	}
	r := ApprovalRequest{Principal: c.Principal, Tool: t.ID(), Name: t.Name(), Title: title, Risk: t.Rule().Risk, Bind: bind,
		Arguments: Truncate(string(argText), 400), Plan: plan, Reason: OneLine(c.Reason, 200), Intent: OneLine(c.Intent, 200),
		Why: why, Transport: transport, CorrelationID: c.CorrelationID}
	stop := func() {}
	tell := func(msg string) {
		if p.o.Waiting != nil {
			stop = p.o.Waiting(ctx, t, c, msg)
		}
	}
	o := p.o.Approver.Await(ctx, r, tell)
	stop()
	c.approval = &o
	if o.Approved {
		return personAnswer{}
	}
	decision := DecisionDeny
	if o.Declined {
		decision = DecisionDeclined
	}
	e := o.Err
	if e == nil {
		e = Errf(errcode.PermissionDenied, "%s was not approved on the device; it did not run", t.Name()).With("tool", t.ID())
	}
	return personAnswer{decision: decision, err: e}
}

// OneLine is model-written text as the person sees it: control characters
// (newlines included) become spaces, runs of spaces one, and it is cut at
// n runes with an ellipsis. So a reason cannot draw a line of its own (a
// forged "Plan:") in a question.
func OneLine(s string, n int) string {
	var b strings.Builder
	space := false
	count := 0
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) { // zero-width and direction marks: shown as nothing
			continue
		}
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			count++
			space = false
		}
		if count >= n {
			return strings.TrimSpace(b.String()) + "…"
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}

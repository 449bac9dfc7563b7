package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/canon"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
)

// Every guard argument (confirm, reason, even a change token) is something a
// model can type. When the client can put a question in front of the person
// (MCP elicitation), a high or critical call that passes policy is confirmed
// by that person before it runs; for a critical tool the person's yes stands
// in for the change token. [guard] elicitation decides whether this happens
// ("preferred", "required" or "off"); no tool can change it.
//
// Two protocol eras ask differently. Up to 2025-11-25 the server sends
// elicitation/create while the tool call waits. From 2026-07-28 the server
// answers the call with an input request, and the client calls again with
// the person's answer and the request state we gave it: the call is then
// held here (pendingAsk) between the two rounds, bound to the exact tool,
// arguments and principal, and audited once, when answered or when the
// time to answer runs out.

// elicitKey is the id of our one input request in a multi-round-trip call.
const elicitKey = "confirm"

// asks holds the confirmations awaiting the client's second round.
type asks struct {
	mu      sync.Mutex
	pending map[string]*pendingAsk // by request state
}

// pendingAsk is one question put to the person in the 2026-07-28 era.
type pendingAsk struct {
	bind  string // hash of tool, arguments and principal
	timer *time.Timer
}

func newAsks() *asks { return &asks{pending: map[string]*pendingAsk{}} }

// take removes and returns the pending ask of a request state; false when
// there is none (never issued, already answered, or timed out).
func (q *asks) take(state string) (*pendingAsk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.pending[state]
	if !ok {
		return nil, false
	}
	delete(q.pending, state)
	p.timer.Stop()
	return p, true
}

// asking is how a call can reach the person, decided once per call.
type asking struct {
	can    bool // the client declared (form) elicitation and the config lets us ask
	rounds bool // 2026-07-28 era: ask by input request and a second round
}

// askingOf reads the client's capabilities and protocol version: per request
// in the 2026-07-28 era, from the session's initialize before.
func (p *Pipeline) askingOf(c *Call) asking {
	if p.conf().Guard.Elicitation == config.ElicitOff {
		return asking{}
	}
	var caps *mcp.ClientCapabilities
	version := ""
	switch {
	case c.request != nil:
		caps, version = c.request.ClientCapabilities(), c.request.ProtocolVersion()
	case c.Session != nil:
		if ip := c.Session.InitializeParams(); ip != nil {
			caps, version = ip.Capabilities, ip.ProtocolVersion
		}
	}
	if caps == nil || caps.Elicitation == nil {
		return asking{}
	}
	// A client that declares only URL elicitation cannot show our form.
	if caps.Elicitation.Form == nil && caps.Elicitation.URL != nil {
		return asking{}
	}
	rounds := version >= "2026-07-28"
	if rounds && c.request == nil {
		return asking{} // a nested call has no request to answer with input
	}
	if !rounds && c.Session == nil {
		return asking{}
	}
	return asking{can: true, rounds: rounds}
}

// needsPerson is whether a call is one the person confirms: high or critical,
// and not a dry run (a dry run changes nothing and never asks).
func needsPerson(t *Tool, c *Call) bool {
	return t.Rule().Risk >= RiskHigh && !c.DryRun
}

// personGate runs before the policy decision. Under "required" it refuses a
// high or critical call from a client that cannot ask; otherwise it reports
// whether an accepted elicitation will stand in for a critical call's token.
func (p *Pipeline) personGate(t *Tool, c *Call, ask asking) (standsInForToken bool, refuse *Error) {
	if !needsPerson(t, c) {
		return false, nil
	}
	if !ask.can {
		if p.conf().Guard.Elicitation == config.ElicitRequired {
			// Role and switches first: a call that is not allowed at all says so.
			if derr := Decide(p.conf(), c.Principal, t.Rule(), Guard{DryRun: true}, false); derr != nil {
				return false, derr
			}
			return false, Errf(errcode.PermissionDenied, "%s is %s-risk and this device requires the person's confirmation, which your client cannot ask for", t.Name(), t.Rule().Risk).
				With("tool", t.ID()).With("risk", t.Rule().Risk.String()).With("config_key", "guard.elicitation").
				Hint("use a client that supports MCP elicitation (Claude Code 2.1.76+, VS Code 1.102+), or the owner sets [guard] elicitation = \"preferred\" in " + config.DefaultPath)
		}
		return false, nil
	}
	return t.Rule().Risk == RiskCritical, nil
}

// personAnswer is what came of asking the person.
type personAnswer struct {
	answer   string              // the accepted answer, for the audit record
	decision string              // when refused: DecisionDeclined or "deny"
	err      *Error              // refused
	input    *mcp.CallToolResult // 2026-07-28 era: the input request to answer the call with now
}

// askPerson puts the call to the person when the gate said so. A zero
// personAnswer means go ahead without having asked.
func (p *Pipeline) askPerson(ctx context.Context, t *Tool, c *Call, ask asking, args []byte) personAnswer {
	if !ask.can || !needsPerson(t, c) {
		return personAnswer{}
	}
	bind, err := canon.Hash(map[string]any{"tool": t.ID(), "arguments": json.RawMessage(args), "principal": c.Principal.Name})
	if err != nil {
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.Internal, "hashing the call to confirm: %v", err)}
	}
	if ask.rounds {
		return p.askInRounds(ctx, t, c, args, bind)
	}
	plan, refused := p.plan(ctx, t, c, args)
	if refused != nil {
		return refusedPlan(refused)
	}
	params := p.question(ctx, t, c, args, plan)
	ectx, cancel := context.WithTimeout(ctx, p.conf().Guard.ElicitationTimeout.D())
	defer cancel()
	res, err := c.Session.Elicit(ectx, params)
	switch {
	case err != nil && ectx.Err() != nil && ctx.Err() == nil:
		return p.unanswered(t)
	case err != nil:
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.PermissionDenied, "%s needs the person's confirmation, and asking failed: %v", t.Name(), err).
			With("tool", t.ID()).Hint("call again; if it keeps failing, the client's elicitation support is broken")}
	}
	return p.judge(t, res)
}

// refusedPlan is a call whose own dry run is refused: it fails as the real
// call would, without troubling the person. A refusal by policy or an
// allowlist is a denial; anything else an allowed call that failed.
func refusedPlan(te *Error) personAnswer {
	decision := DecisionAllow
	if te.Code == errcode.PermissionDenied {
		decision = DecisionDeny
	}
	return personAnswer{decision: decision, err: te}
}

// askInRounds is the 2026-07-28 era: the first round returns the question as
// an input request; the second carries the answer and our request state.
func (p *Pipeline) askInRounds(ctx context.Context, t *Tool, c *Call, args []byte, bind string) personAnswer {
	rp := c.request.Params
	if rp.InputResponses == nil && rp.RequestState == "" {
		plan, refused := p.plan(ctx, t, c, args)
		if refused != nil {
			return refusedPlan(refused)
		}
		state := "ask-" + strings.TrimPrefix(NewCorrelationID(), "c-")
		rec := Record{Time: time.Now().UTC(), CorrelationID: c.CorrelationID, Principal: c.Principal.Name,
			Role: c.Principal.Role.String(), Tool: t.ID(), Decision: DecisionDeclined, Reason: c.Reason, Intent: c.Intent, Remote: c.Principal.Remote}
		pa := &pendingAsk{bind: bind}
		p.asks.mu.Lock()
		p.asks.pending[state] = pa
		// No second round in time: the person did not confirm. Audited
		// here, since no call is left to audit it.
		pa.timer = time.AfterFunc(p.conf().Guard.ElicitationTimeout.D(), func() {
			if _, ok := p.asks.take(state); !ok {
				return
			}
			te := p.unanswered(t).err
			rec.DurationMS = ms(time.Since(rec.Time))
			if _, err := p.Record(rec, RawOrEmpty(args), nil, te); err != nil {
				p.o.Log.Error("audit append failed", "tool", t.ID(), "correlation_id", rec.CorrelationID, "err", err)
			}
		})
		p.asks.mu.Unlock()
		return personAnswer{input: &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{elicitKey: p.question(ctx, t, c, args, plan)},
			RequestState:  state,
		}}
	}
	pa, ok := p.asks.take(rp.RequestState)
	if !ok || pa.bind != bind {
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.FailedPrecondition, "%s: this confirmation is unknown, already used, expired, or for another call", t.Name()).
			With("tool", t.ID()).Hint("call the tool again without inputResponses; the person is asked afresh")}
	}
	res, _ := rp.InputResponses[elicitKey].(*mcp.ElicitResult)
	if res == nil {
		return personAnswer{decision: DecisionDeny, err: Errf(errcode.InvalidArgument, "%s: inputResponses has no elicitation answer under %q", t.Name(), elicitKey).
			With("tool", t.ID())}
	}
	return p.judge(t, res)
}

// judge turns the person's answer into go or refuse. Only "accept" with the
// box ticked goes ahead; in the 2026-07-28 era the SDK does not check the
// answer against our form, so the tick is checked here.
func (p *Pipeline) judge(t *Tool, res *mcp.ElicitResult) personAnswer {
	ans, _ := json.Marshal(map[string]any{"action": res.Action, "content": res.Content})
	if res.Action == "accept" {
		if ok, _ := res.Content["confirm"].(bool); ok {
			return personAnswer{answer: Truncate(string(ans), 500)}
		}
	}
	action := res.Action
	if action == "accept" {
		action = "accept without ticking confirm"
	}
	return personAnswer{decision: DecisionDeclined, answer: Truncate(string(ans), 500),
		err: Errf(errcode.PermissionDenied, "the person declined %s (%s); it did not run", t.Name(), action).
			With("tool", t.ID()).With("elicitation_action", res.Action).
			Hint("do not call it again unless the person asks you to; ask them what they want instead")}
}

func (p *Pipeline) unanswered(t *Tool) personAnswer {
	d := p.conf().Guard.ElicitationTimeout.D()
	return personAnswer{decision: DecisionDeclined,
		err: Errf(errcode.PermissionDenied, "the person did not confirm %s within %s; counted as a decline, it did not run", t.Name(), d).
			With("tool", t.ID()).With("elicitation_action", "timeout").
			Hint("ask the person whether they want it, then call it again")}
}

// question is the form put to the person: what will happen, on which device,
// with the tool's own dry-run plan where it has one.
func (p *Pipeline) question(ctx context.Context, t *Tool, c *Call, args []byte, plan string) *mcp.ElicitParams {
	var b strings.Builder
	device := "this Raspberry Pi"
	if p.o.Device != nil {
		device = p.o.Device(ctx)
	}
	title := t.ID()
	if t.MCP() != nil && t.MCP().Title != "" {
		title = t.MCP().Title
	}
	// Who asks, the tool, then the plan in the agent's own words: clients
	// show the first lines and fold the rest (Claude Code shows three). The
	// model's own words come last, quoted on one line, so a reason cannot
	// pass for a line of ours.
	fmt.Fprintf(&b, "%s asks to run %s (%s, %s risk) on %s.\n", OneLine(c.Principal.Name, 64), title, t.Name(), t.Rule().Risk, device)
	if plan != "" {
		fmt.Fprintf(&b, "Plan: %s\n", OneLine(plan, 600))
	}
	var shown map[string]any
	_ = json.Unmarshal(args, &shown)
	for _, k := range []string{"confirm", "reason", "intent", "dry_run"} {
		delete(shown, k)
	}
	if js, err := json.Marshal(shown); err == nil && len(shown) > 0 {
		fmt.Fprintf(&b, "Arguments: %s\n", OneLine(string(js), 400))
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "The model's reason (its words, not ours): %q\n", OneLine(c.Reason, 200))
	}
	b.WriteString("Tick confirm and accept to run it; decline to refuse.")
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": checkboxLabel(t), "default": false},
			"note":    map[string]any{"type": "string", "title": "Note for the audit trail (optional)", "maxLength": 200},
		},
		"required": []string{"confirm"},
	}
	return &mcp.ElicitParams{Mode: "form", Message: b.String(), RequestedSchema: schema}
}

// plan is the tool's dry run in one line, when it has one. A dry run that
// is refused (a protected process, a pending reboot a shutdown would
// replace) comes back as the refusal: the real call would fail the same
// way, so the person is not asked about it.
func (p *Pipeline) plan(ctx context.Context, t *Tool, c *Call, args []byte) (string, *Error) {
	// A LAN tool plans with the upstream's own dry run, or says what would
	// be sent; a local one has dry_run when it changes anything.
	if !t.LAN() {
		if in := t.Input(); in == nil || in.Tree.Properties["dry_run"] == nil {
			return "", nil
		}
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return "", nil
	}
	m["dry_run"] = true
	dry, _ := json.Marshal(m)
	g := c.Guard
	g.DryRun = true
	out, sum, err := t.Run(ctx, &Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Guard: g}, dry)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return "", te
		}
		return "", nil
	}
	js, _ := json.Marshal(out)
	return Truncate(sum+" "+string(js), 600), nil
}

// checkboxLabel is the confirm box's label: clients cut it at about 50
// characters, so it says what runs within 40.
func checkboxLabel(t *Tool) string {
	if l := "Run " + t.Name(); utf8.RuneCountInString(l) <= 40 {
		return l
	}
	return "Run this call"
}

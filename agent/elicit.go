package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
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
func (a *Agent) askingOf(c *tool.Call) asking {
	if a.conf().Guard.Elicitation == config.ElicitOff {
		return asking{}
	}
	var caps *mcp.ClientCapabilities
	version := ""
	switch {
	case c.Request != nil:
		caps, version = c.Request.ClientCapabilities(), c.Request.ProtocolVersion()
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
	if rounds && c.Request == nil {
		return asking{} // a nested call has no request to answer with input
	}
	if !rounds && c.Session == nil {
		return asking{}
	}
	return asking{can: true, rounds: rounds}
}

// needsPerson is whether a call is one the person confirms: high or critical,
// and not a dry run (a dry run changes nothing and never asks).
func needsPerson(t *tool.Tool, c *tool.Call) bool {
	return t.Rule().Risk >= tool.RiskHigh && !c.DryRun
}

// personGate runs before the policy decision. Under "required" it refuses a
// high or critical call from a client that cannot ask; otherwise it reports
// whether an accepted elicitation will stand in for a critical call's token.
func (a *Agent) personGate(t *tool.Tool, c *tool.Call, ask asking) (standsInForToken bool, refuse *tool.Error) {
	if !needsPerson(t, c) {
		return false, nil
	}
	if !ask.can {
		if a.conf().Guard.Elicitation == config.ElicitRequired {
			// Role and switches first: a call that is not allowed at all says so.
			if derr := tool.Decide(a.conf(), c.Principal, t.Rule(), tool.Guard{DryRun: true}, false); derr != nil {
				return false, derr
			}
			return false, tool.Errf(CodePermissionDenied, "%s is %s-risk and this device requires the person's confirmation, which your client cannot ask for", t.Name(), t.Rule().Risk).
				With("tool", t.ID()).With("risk", t.Rule().Risk.String()).With("config_key", "guard.elicitation").
				Hint("use a client that supports MCP elicitation (Claude Code 2.1.76+, VS Code 1.102+), or the owner sets [guard] elicitation = \"preferred\" in " + config.DefaultPath)
		}
		return false, nil
	}
	return t.Rule().Risk == tool.RiskCritical, nil
}

// personAnswer is what came of asking the person.
type personAnswer struct {
	answer   string              // the accepted answer, for the audit record
	decision string              // when refused: store.DecisionDeclined or "deny"
	err      *tool.Error         // refused
	input    *mcp.CallToolResult // 2026-07-28 era: the input request to answer the call with now
}

// askPerson puts the call to the person when the gate said so. A zero
// personAnswer means go ahead without having asked.
func (a *Agent) askPerson(ctx context.Context, t *tool.Tool, c *tool.Call, ask asking, args []byte) personAnswer {
	if !ask.can || !needsPerson(t, c) {
		return personAnswer{}
	}
	bind, err := store.HashJSON(map[string]any{"tool": t.ID(), "arguments": json.RawMessage(args), "principal": c.Principal.Name})
	if err != nil {
		return personAnswer{decision: store.DecisionDeny, err: tool.Errf(CodeInternal, "hashing the call to confirm: %v", err)}
	}
	if ask.rounds {
		return a.askInRounds(ctx, t, c, args, bind)
	}
	plan, refused := a.plan(ctx, t, c, args)
	if refused != nil {
		return refusedPlan(refused)
	}
	params := a.question(ctx, t, c, args, plan)
	ectx, cancel := context.WithTimeout(ctx, a.conf().Guard.ElicitationTimeout.D())
	defer cancel()
	res, err := c.Session.Elicit(ectx, params)
	switch {
	case err != nil && ectx.Err() != nil && ctx.Err() == nil:
		return a.unanswered(t)
	case err != nil:
		return personAnswer{decision: store.DecisionDeny, err: tool.Errf(CodePermissionDenied, "%s needs the person's confirmation, and asking failed: %v", t.Name(), err).
			With("tool", t.ID()).Hint("call again; if it keeps failing, the client's elicitation support is broken")}
	}
	return a.judge(t, res)
}

// refusedPlan is a call whose own dry run is refused: it fails as the real
// call would, without troubling the person. A refusal by policy or an
// allowlist is a denial; anything else an allowed call that failed.
func refusedPlan(te *tool.Error) personAnswer {
	decision := store.DecisionAllow
	if te.Code == CodePermissionDenied {
		decision = store.DecisionDeny
	}
	return personAnswer{decision: decision, err: te}
}

// askInRounds is the 2026-07-28 era: the first round returns the question as
// an input request; the second carries the answer and our request state.
func (a *Agent) askInRounds(ctx context.Context, t *tool.Tool, c *tool.Call, args []byte, bind string) personAnswer {
	p := c.Request.Params
	if p.InputResponses == nil && p.RequestState == "" {
		plan, refused := a.plan(ctx, t, c, args)
		if refused != nil {
			return refusedPlan(refused)
		}
		state := "ask-" + strings.TrimPrefix(tool.NewCorrelationID(), "c-")
		rec := store.AuditRecord{Time: time.Now().UTC(), CorrelationID: c.CorrelationID, Principal: c.Principal.Name,
			Role: c.Principal.Role.String(), Tool: t.ID(), Decision: store.DecisionDeclined, Reason: c.Reason, Intent: c.Intent, Remote: c.Principal.Remote}
		pa := &pendingAsk{bind: bind}
		a.asks.mu.Lock()
		a.asks.pending[state] = pa
		// No second round in time: the person did not confirm. Audited
		// here, since no call is left to audit it.
		pa.timer = time.AfterFunc(a.conf().Guard.ElicitationTimeout.D(), func() {
			if _, ok := a.asks.take(state); !ok {
				return
			}
			te := a.unanswered(t).err
			rec.DurationMS = ms(time.Since(rec.Time))
			if _, err := a.record(rec, rawOrEmpty(args), nil, te); err != nil {
				a.log.Error("audit append failed", "tool", t.ID(), "correlation_id", rec.CorrelationID, "err", err)
			}
		})
		a.asks.mu.Unlock()
		return personAnswer{input: &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{elicitKey: a.question(ctx, t, c, args, plan)},
			RequestState:  state,
		}}
	}
	pa, ok := a.asks.take(p.RequestState)
	if !ok || pa.bind != bind {
		return personAnswer{decision: store.DecisionDeny, err: tool.Errf(CodeFailedPrecondition, "%s: this confirmation is unknown, already used, expired, or for another call", t.Name()).
			With("tool", t.ID()).Hint("call the tool again without inputResponses; the person is asked afresh")}
	}
	res, _ := p.InputResponses[elicitKey].(*mcp.ElicitResult)
	if res == nil {
		return personAnswer{decision: store.DecisionDeny, err: tool.Errf(CodeInvalidArgument, "%s: inputResponses has no elicitation answer under %q", t.Name(), elicitKey).
			With("tool", t.ID())}
	}
	return a.judge(t, res)
}

// judge turns the person's answer into go or refuse. Only "accept" with the
// box ticked goes ahead; in the 2026-07-28 era the SDK does not check the
// answer against our form, so the tick is checked here.
func (a *Agent) judge(t *tool.Tool, res *mcp.ElicitResult) personAnswer {
	ans, _ := json.Marshal(map[string]any{"action": res.Action, "content": res.Content})
	if res.Action == "accept" {
		if ok, _ := res.Content["confirm"].(bool); ok {
			return personAnswer{answer: truncate(string(ans), 500)}
		}
	}
	action := res.Action
	if action == "accept" {
		action = "accept without ticking confirm"
	}
	return personAnswer{decision: store.DecisionDeclined, answer: truncate(string(ans), 500),
		err: tool.Errf(CodePermissionDenied, "the person declined %s (%s); it did not run", t.Name(), action).
			With("tool", t.ID()).With("elicitation_action", res.Action).
			Hint("do not call it again unless the person asks you to; ask them what they want instead")}
}

func (a *Agent) unanswered(t *tool.Tool) personAnswer {
	d := a.conf().Guard.ElicitationTimeout.D()
	return personAnswer{decision: store.DecisionDeclined,
		err: tool.Errf(CodePermissionDenied, "the person did not confirm %s within %s; counted as a decline, it did not run", t.Name(), d).
			With("tool", t.ID()).With("elicitation_action", "timeout").
			Hint("ask the person whether they want it, then call it again")}
}

// question is the form put to the person: what will happen, on which device,
// with the tool's own dry-run plan where it has one.
func (a *Agent) question(ctx context.Context, t *tool.Tool, c *tool.Call, args []byte, plan string) *mcp.ElicitParams {
	var b strings.Builder
	device := "this Raspberry Pi"
	if a.sys == nil {
	} else if info, err := a.sys.Basic(ctx); err == nil {
		device = fmt.Sprintf("%s (%s)", info.Hostname, info.Model)
	}
	title := t.ID()
	if t.MCP() != nil && t.MCP().Title != "" {
		title = t.MCP().Title
	}
	fmt.Fprintf(&b, "%s wants to run %s (%s, %s risk) on %s.\n", c.Principal.Name, title, t.Name(), t.Rule().Risk, device)
	var shown map[string]any
	_ = json.Unmarshal(args, &shown)
	for _, k := range []string{"confirm", "reason", "intent", "dry_run"} {
		delete(shown, k)
	}
	if js, err := json.Marshal(shown); err == nil && len(shown) > 0 {
		fmt.Fprintf(&b, "Arguments: %s\n", truncate(string(js), 400))
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "Reason given: %s\n", c.Reason)
	}
	if plan != "" {
		fmt.Fprintf(&b, "Plan: %s\n", plan)
	}
	b.WriteString("Tick confirm and accept to run it; decline to refuse.")
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": "Run " + title + " on " + device, "default": false},
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
func (a *Agent) plan(ctx context.Context, t *tool.Tool, c *tool.Call, args []byte) (string, *tool.Error) {
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
	out, sum, err := t.Run(ctx, &tool.Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Guard: g}, dry)
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) {
			return "", te
		}
		return "", nil
	}
	js, _ := json.Marshal(out)
	return truncate(sum+" "+string(js), 600), nil
}

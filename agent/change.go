package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Critical tools run in two steps. change_prepare checks policy, runs the
// tool's dry run and stores a single-use token bound to the SHA-256 of the
// canonical plan (tool, arguments, principal); change_commit re-checks
// policy as of now, consumes the token and runs exactly that call. Only the
// holder's commit consumes it: another principal's is refused and audited,
// and the token stays its holder's. A model can
// therefore not slip different arguments between what a person approved and
// what runs.

// PrepareIn names the call to prepare.
type PrepareIn struct {
	Tool      string         `json:"tool" jsonschema:"wire name or canonical id of a mutating tool"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments, without dry_run"`
}

// PrepareOut is the token and what it will do.
type PrepareOut struct {
	Token     string         `json:"token"`
	Tool      string         `json:"tool"`
	ToolID    string         `json:"tool_id"`
	Risk      string         `json:"risk"`
	Arguments map[string]any `json:"arguments"`
	Plan      map[string]any `json:"plan" jsonschema:"the tool's dry-run result"`
	PlanHash  string         `json:"plan_hash"`
	ExpiresAt string         `json:"expires_at"`
}

// CommitIn carries the token.
type CommitIn struct {
	Token string `json:"token"`
}

// CommitOut is what the committed call returned.
type CommitOut struct {
	Tool         string         `json:"tool"`
	ToolID       string         `json:"tool_id"`
	PlanHash     string         `json:"plan_hash"`
	Result       map[string]any `json:"result"`
	ToolAuditRef string         `json:"tool_audit_ref" jsonschema:"audit record of the committed call itself"`
}

func (a *Agent) registerChange() {
	tool.Add(a.tools, tool.Spec[PrepareIn, PrepareOut]{
		ID: "change.prepare", Title: "Prepare a change",
		Description: "Stage a call to a critical tool: checks policy, returns its dry-run plan and a single-use token for change_commit that expires soon.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Risk: tool.RiskLow},
		Props:       []tool.Prop{tool.P("tool", tool.MinLen(1), tool.MaxLen(100))},
		OutProps:    []tool.Prop{tool.P("expires_at", tool.Format("date-time"))},
		Example:     &PrepareIn{Tool: "system_shutdown"},
		Run:         a.prepare,
		Summary: func(_ PrepareIn, o PrepareOut) string {
			return fmt.Sprintf("prepared %s; commit with change_commit before %s", o.Tool, o.ExpiresAt)
		},
	})
	tool.Add(a.tools, tool.Spec[CommitIn, CommitOut]{
		ID: "change.commit", Title: "Commit a change",
		Description: "Run the call a change_prepare token stands for, after re-checking policy. The token works once.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Risk: tool.RiskLow},
		Destructive: true,
		Props:       []tool.Prop{tool.P("token", tool.MinLen(8), tool.MaxLen(64))},
		Example:     &CommitIn{Token: "tok-does-not-exist"}, // passes the schema; the commit finds no such token
		Run:         a.commit,
		Summary:     func(_ CommitIn, o CommitOut) string { return "committed " + o.Tool },
	})
}

// planHash binds a token to exactly one call by one principal.
func planHash(toolID string, args map[string]any, principal string) (string, error) {
	return store.HashJSON(map[string]any{"tool": toolID, "arguments": args, "principal": principal})
}

func (a *Agent) prepare(ctx context.Context, c *tool.Call, in PrepareIn) (PrepareOut, error) {
	t, ok := a.tools.Lookup(in.Tool)
	if !ok {
		return PrepareOut{}, tool.Errf(CodeNotFound, "no tool %q", in.Tool).With("parameter", "tool").
			Suggest(tool.SuggestedCall{Tool: a.wire("system.get_capabilities"), Why: "list the tools and their risks"})
	}
	if !t.Mutating() || t.ID() == "change.prepare" || t.ID() == "change.commit" {
		return PrepareOut{}, tool.Errf(CodeInvalidArgument, "%s changes nothing; call it directly", t.Name()).With("parameter", "tool")
	}
	args := in.Arguments
	if args == nil {
		args = map[string]any{}
	}
	if _, ok := args["dry_run"]; ok {
		return PrepareOut{}, tool.Errf(CodeInvalidArgument, "leave dry_run out: change_prepare is itself the dry run").With("parameter", "arguments.dry_run")
	}
	raw, _ := json.Marshal(args)
	if _, verr := t.Validate(raw); verr != nil {
		verr.Message = "arguments for " + t.Name() + ": " + verr.Message
		if param, _ := verr.Details["parameter"].(string); param != "" {
			if s, ok := correction(t, param, args); ok {
				delete(s.Arguments, "dry_run") // change_prepare is the dry run
				verr.Suggest(tool.SuggestedCall{Tool: a.wire("change.prepare"), Arguments: map[string]any{"tool": t.Name(), "arguments": s.Arguments}, Why: s.Why})
			}
			verr.With("parameter", "arguments."+param)
		}
		return PrepareOut{}, verr
	}
	if derr := tool.Decide(a.conf(), c.Principal, t.Rule(), tool.Guard{DryRun: true}, false); derr != nil {
		return PrepareOut{}, derr
	}
	// The plan is the tool's own dry run, audited like any dry run.
	dry := map[string]any{"dry_run": true}
	for k, v := range args {
		dry[k] = v
	}
	draw, _ := json.Marshal(dry)
	o := a.execute(ctx, t, &tool.Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Session: c.Session}, draw)
	if o.err != nil {
		return PrepareOut{}, o.err
	}
	var plan map[string]any
	pj, _ := json.Marshal(o.out)
	_ = json.Unmarshal(pj, &plan)
	h, err := planHash(t.ID(), args, c.Principal.Name)
	if err != nil {
		return PrepareOut{}, err
	}
	id, err := store.NewChangeTokenID()
	if err != nil {
		return PrepareOut{}, err
	}
	now := time.Now().UTC()
	tok := store.ChangeToken{ID: id, Tool: t.ID(), Arguments: raw, PlanHash: h, Principal: c.Principal.Name, CreatedAt: now, ExpiresAt: now.Add(a.conf().Change.TokenTTL.D())}
	if _, err := a.store.PruneChangeTokens(now); err != nil {
		return PrepareOut{}, err
	}
	if err := a.store.PutChangeToken(tok); err != nil {
		return PrepareOut{}, err
	}
	return PrepareOut{Token: id, Tool: t.Name(), ToolID: t.ID(), Risk: t.Rule().Risk.String(), Arguments: args, Plan: plan, PlanHash: h,
		ExpiresAt: tok.ExpiresAt.Format(time.RFC3339)}, nil
}

func (a *Agent) commit(ctx context.Context, c *tool.Call, in CommitIn) (CommitOut, error) {
	now := time.Now()
	ask := a.askingOf(c)
	var t *tool.Tool
	// What refuses the commit without being the holder's own doing is
	// decided inside the store's transaction, and leaves the token as it
	// was: another principal presenting it cannot burn it, and a call the
	// policy refuses for now (a switch turned off, a tool gone with its
	// upstream, a client that cannot ask the person) can be committed
	// once that changes, within the token's TTL. Everything else uses the
	// token up: its holder's commit that goes on to run (whatever the tool
	// then answers), an expired or corrupt token. Of concurrent commits
	// that pass, exactly one gets the token.
	tok, err := a.store.ConsumeChangeTokenIf(in.Token, now, func(tok store.ChangeToken) error {
		if tok.Principal != c.Principal.Name {
			// Who holds it is the audit trail's to say, not the refusal's.
			return tool.Errf(CodePermissionDenied, "this change token was prepared by another principal; only they can commit it").
				With("parameter", "token").Hint("prepare the change yourself with change_prepare")
		}
		if !now.Before(tok.ExpiresAt) {
			return nil // the store deletes it and says it expired
		}
		tl, ok := a.tools.Get(tok.Tool)
		if !ok {
			return tool.Errf(CodeNotFound, "the prepared tool %q is not available now", tok.Tool).With("tool", tok.Tool)
		}
		if derr := tool.Decide(a.conf(), c.Principal, tl.Rule(), tool.Guard{}, true); derr != nil {
			return derr
		}
		if _, gerr := a.personGate(tl, c, ask); gerr != nil {
			return gerr
		}
		if ask.rounds && tl.Rule().Risk >= tool.RiskHigh {
			// In the 2026-07-28 era the person's answer comes back in a second
			// call, which change_commit cannot carry; the token stays usable.
			var args map[string]any
			_ = json.Unmarshal(tok.Arguments, &args)
			return tool.Errf(CodeFailedPrecondition, "your client asks the person to confirm %s: call it directly, the person's answer stands in for the change token", tl.Name()).
				With("tool", tl.ID()).Suggest(tool.SuggestedCall{Tool: tl.Name(), Arguments: args, Why: "the client puts the question to the person"})
		}
		t = tl
		return nil
	})
	var refused *tool.Error
	switch {
	case errors.As(err, &refused):
		return CommitOut{}, refused
	case errors.Is(err, store.ErrChangeTokenExpired):
		return CommitOut{}, tool.Errf(CodeFailedPrecondition, "the change token has expired").With("parameter", "token").
			Hint("prepare the change again with change_prepare")
	case errors.Is(err, store.ErrChangeTokenNotFound):
		return CommitOut{}, tool.Errf(CodeNotFound, "no such change token (tokens work once)").With("parameter", "token").
			Hint("prepare the change again with change_prepare")
	case err != nil:
		return CommitOut{}, err
	}
	var args map[string]any
	if err := json.Unmarshal(tok.Arguments, &args); err != nil {
		return CommitOut{}, fmt.Errorf("agent: token %s arguments: %w", tok.ID, err)
	}
	if h, err := planHash(t.ID(), args, c.Principal.Name); err != nil || h != tok.PlanHash {
		return CommitOut{}, tool.Errf(CodeFailedPrecondition, "the token's plan hash does not match its call; prepare again")
	}
	// The client's progress token goes along: a long committed call (an OS
	// update) reports its progress to the change_commit it answers.
	o := a.execute(ctx, t, &tool.Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Session: c.Session, ProgressToken: c.ProgressToken, Committed: true}, tok.Arguments)
	if o.err != nil {
		return CommitOut{}, o.err
	}
	var res map[string]any
	rj, _ := json.Marshal(o.out)
	_ = json.Unmarshal(rj, &res)
	return CommitOut{Tool: t.Name(), ToolID: t.ID(), PlanHash: tok.PlanHash, Result: res, ToolAuditRef: o.auditRef}, nil
}

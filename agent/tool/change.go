package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/canon"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
)

// The ids of the change tools, whose handlers are Prepare and Commit.
const (
	PrepareID = "change.prepare"
	CommitID  = "change.commit"
)

// Token is a change token: what change_prepare stored and change_commit
// consumes.
type Token struct {
	ID        string
	Tool      string
	Arguments json.RawMessage
	PlanHash  string // Hash of the canonical plan: tool, arguments, principal
	Principal string
	CreatedAt time.Time
	ExpiresAt time.Time
}

var (
	// ErrTokenNotFound means the token is unknown or was already used.
	ErrTokenNotFound = errors.New("tool: change token not found or already used")
	// ErrTokenExpired means the token existed but its TTL had passed; it
	// has been deleted.
	ErrTokenExpired = errors.New("tool: change token expired")
)

// TokenStore keeps change tokens durably (the agent's database).
type TokenStore interface {
	// NewID is a new unguessable token id.
	NewID() (string, error)
	// Put stores a token; an id already present is refused.
	Put(Token) error
	// Prune deletes the tokens expired at now.
	Prune(now time.Time) error
	// ConsumeIf deletes and returns the token, in one transaction with
	// check: when check returns an error the token stays as it was and that
	// error is returned as it is. Errors wrap ErrTokenNotFound and
	// ErrTokenExpired (the expired token is returned too).
	ConsumeIf(id string, now time.Time, check func(Token) error) (Token, error)
}

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
	Tool      string         `json:"tool" jsonschema:"the tool to stage"`
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"its arguments"`
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

// planHash binds a token to exactly one call by one principal.
func (p *Pipeline) planHash(toolID string, args map[string]any, principal string) (string, error) {
	return canon.Hash(map[string]any{"tool": toolID, "arguments": args, "principal": principal})
}

func (p *Pipeline) Prepare(ctx context.Context, c *Call, in PrepareIn) (PrepareOut, error) {
	if p.o.Tokens == nil {
		return PrepareOut{}, errNoTokens()
	}
	t, ok := p.tools.Lookup(in.Tool)
	if !ok {
		return PrepareOut{}, Errf(errcode.NotFound, "no tool %q", in.Tool).With("parameter", "tool").
			Suggest(SuggestedCall{Tool: p.wire(p.o.Capabilities), Why: "list the tools and their risks"})
	}
	if !t.Mutating() || t.ID() == PrepareID || t.ID() == CommitID {
		return PrepareOut{}, Errf(errcode.InvalidArgument, "%s changes nothing; call it directly", t.Name()).With("parameter", "tool")
	}
	args := in.Arguments
	if args == nil {
		args = map[string]any{}
	}
	if _, ok := args["dry_run"]; ok {
		return PrepareOut{}, Errf(errcode.InvalidArgument, "leave dry_run out: change_prepare is itself the dry run").With("parameter", "arguments.dry_run")
	}
	raw, _ := json.Marshal(args)
	if _, verr := t.Validate(raw); verr != nil {
		verr.Message = "arguments for " + t.Name() + ": " + verr.Message
		if param, _ := verr.Details["parameter"].(string); param != "" {
			if s, ok := correction(t, param, args); ok {
				delete(s.Arguments, "dry_run") // change_prepare is the dry run
				verr.Suggest(SuggestedCall{Tool: p.wire(PrepareID), Arguments: map[string]any{"tool": t.Name(), "arguments": s.Arguments}, Why: s.Why})
			}
			verr.With("parameter", "arguments."+param)
		}
		return PrepareOut{}, verr
	}
	if derr := Decide(p.conf(), c.Principal, t.Rule(), Guard{DryRun: true}, false); derr != nil {
		return PrepareOut{}, derr
	}
	// The plan is the tool's own dry run, audited like any dry run.
	dry := map[string]any{"dry_run": true}
	for k, v := range args {
		dry[k] = v
	}
	draw, _ := json.Marshal(dry)
	o := p.execute(ctx, t, &Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Session: c.Session}, draw)
	if o.err != nil {
		return PrepareOut{}, o.err
	}
	var plan map[string]any
	pj, _ := json.Marshal(o.out)
	_ = json.Unmarshal(pj, &plan)
	h, err := p.planHash(t.ID(), args, c.Principal.Name)
	if err != nil {
		return PrepareOut{}, err
	}
	id, err := p.o.Tokens.NewID()
	if err != nil {
		return PrepareOut{}, err
	}
	now := time.Now().UTC()
	tok := Token{ID: id, Tool: t.ID(), Arguments: raw, PlanHash: h, Principal: c.Principal.Name, CreatedAt: now, ExpiresAt: now.Add(p.conf().Change.TokenTTL.D())}
	if err := p.o.Tokens.Prune(now); err != nil {
		return PrepareOut{}, err
	}
	if err := p.o.Tokens.Put(tok); err != nil {
		return PrepareOut{}, err
	}
	return PrepareOut{Token: id, Tool: t.Name(), ToolID: t.ID(), Risk: t.Rule().Risk.String(), Arguments: args, Plan: plan, PlanHash: h,
		ExpiresAt: tok.ExpiresAt.Format(time.RFC3339)}, nil
}

func (p *Pipeline) Commit(ctx context.Context, c *Call, in CommitIn) (CommitOut, error) {
	if p.o.Tokens == nil {
		return CommitOut{}, errNoTokens()
	}
	now := time.Now()
	ask := p.askingOf(c)
	var t *Tool
	// What refuses the commit without being the holder's own doing is
	// decided inside the store's transaction, and leaves the token as it
	// was: another principal presenting it cannot burn it, and a call the
	// policy refuses for now (a switch turned off, a tool gone with its
	// upstream, a client that cannot ask the person) can be committed
	// once that changes, within the token's TTL. Everything else uses the
	// token up: its holder's commit that goes on to run (whatever the tool
	// then answers), an expired or corrupt token. Of concurrent commits
	// that pass, exactly one gets the token.
	tok, err := p.o.Tokens.ConsumeIf(in.Token, now, func(tok Token) error {
		if tok.Principal != c.Principal.Name {
			// Who holds it is the audit trail's to say, not the refusal's.
			return Errf(errcode.PermissionDenied, "this change token was prepared by another principal; only they can commit it").
				With("parameter", "token").Hint("prepare the change yourself with change_prepare")
		}
		if !now.Before(tok.ExpiresAt) {
			return nil // the store deletes it and says it expired
		}
		tl, ok := p.tools.Get(tok.Tool)
		if !ok {
			return Errf(errcode.NotFound, "the prepared tool %q is not available now", tok.Tool).With("tool", tok.Tool)
		}
		if derr := Decide(p.conf(), c.Principal, tl.Rule(), Guard{}, true); derr != nil {
			return derr
		}
		if _, gerr := p.personGate(tl, c, ask); gerr != nil {
			return gerr
		}
		if ask.rounds && tl.Rule().Risk >= RiskHigh {
			// In the 2026-07-28 era the person's answer comes back in a second
			// call, which change_commit cannot carry; the token stays usable.
			var args map[string]any
			_ = json.Unmarshal(tok.Arguments, &args)
			return Errf(errcode.FailedPrecondition, "your client asks the person to confirm %s: call it directly, the person's answer stands in for the change token", tl.Name()).
				With("tool", tl.ID()).Suggest(SuggestedCall{Tool: tl.Name(), Arguments: args, Why: "the client puts the question to the person"})
		}
		t = tl
		return nil
	})
	var refused *Error
	switch {
	case errors.As(err, &refused):
		return CommitOut{}, refused
	case errors.Is(err, ErrTokenExpired):
		return CommitOut{}, Errf(errcode.FailedPrecondition, "the change token has expired").With("parameter", "token").
			Hint("prepare the change again with change_prepare")
	case errors.Is(err, ErrTokenNotFound):
		return CommitOut{}, Errf(errcode.NotFound, "no such change token (tokens work once)").With("parameter", "token").
			Hint("prepare the change again with change_prepare")
	case err != nil:
		return CommitOut{}, err
	}
	var args map[string]any
	if err := json.Unmarshal(tok.Arguments, &args); err != nil {
		return CommitOut{}, fmt.Errorf("tool: token %s arguments: %w", tok.ID, err)
	}
	if h, err := p.planHash(t.ID(), args, c.Principal.Name); err != nil || h != tok.PlanHash {
		return CommitOut{}, Errf(errcode.FailedPrecondition, "the token's plan hash does not match its call; prepare again")
	}
	// The client's progress token goes along: a long committed call (an OS
	// update) reports its progress to the change_commit it answers.
	o := p.execute(ctx, t, &Call{Principal: c.Principal, CorrelationID: c.CorrelationID, Session: c.Session, ProgressToken: c.ProgressToken, committed: true}, tok.Arguments)
	if o.err != nil {
		return CommitOut{}, o.err
	}
	var res map[string]any
	rj, _ := json.Marshal(o.out)
	_ = json.Unmarshal(rj, &res)
	return CommitOut{Tool: t.Name(), ToolID: t.ID(), PlanHash: tok.PlanHash, Result: res, ToolAuditRef: o.auditRef}, nil
}

func errNoTokens() *Error {
	return Errf(errcode.Unavailable, "change tokens are not kept here").Hint("the agent has no token store: a bug in how it was started")
}

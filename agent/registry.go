package agent

import (
	"context"
	"encoding/json"
	"errors"
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

// newPipeline wires the call pipeline (agent/tool) to the agent: its audit
// trail, change tokens, config, helper errors, catalog suggestions and
// notifications.
func (a *Agent) newPipeline() *tool.Pipeline {
	return tool.NewPipeline(a.tools, tool.PipelineOptions{
		Config: a.conf, Log: a.log,
		Audit:    a.appendRecord,
		Tokens:   changeTokens{a.store},
		MapError: toToolError,
		Lookup:   catalogLookup{a.tools}.lookupFor,
		Progress: a.progress,
		Denied:   a.tellDenied,
		Approver: a.approvals,
		Waiting:  a.tellWaiting,
		Count:    a.count,
		Device: func(ctx context.Context) string {
			if a.sys != nil {
				if info, err := a.sys.Basic(ctx); err == nil {
					return info.Hostname + " (" + info.Model + ")"
				}
			}
			return "this Raspberry Pi"
		},
		CheckOutput:  func() bool { return a.checkOutput },
		Capabilities: "system.get_capabilities",
		Status:       "manage.get_server_status",
	})
}

// mayReadDomain is nil when p may read an upstream's resources and prompts
// (domain is the upstream's name, id the read as the audit trail names it),
// else the refusal: role read, the domain switched on and a profile that
// takes the upstream in, as any read tool of that domain would need. The pipeline's May answers for a registered
// tool, and no tool stands behind such a read (resources/read and
// prompts/get are not tools of the upstream), so the decision with the rule
// a read has is made here, with the pipeline's wiring, and the catalog
// (lan.go) only asks.
func (a *Agent) mayReadDomain(p identity.Principal, domain, id string) *tool.Error {
	rule := tool.Rule{Tool: id, Domain: domain, MinRole: identity.RoleRead, Risk: tool.RiskRead}
	return tool.Decide(a.conf(), p, rule, tool.Guard{}, false)
}

// appendRecord is the pipeline's audit record in the agent's trail.
func (a *Agent) appendRecord(r tool.Record) (string, error) {
	stored, err := a.appendAudit(store.AuditRecord{
		Time: r.Time, CorrelationID: r.CorrelationID, Principal: r.Principal, Role: r.Role, Tool: r.Tool, Decision: r.Decision,
		DryRun: r.DryRun, Reason: r.Reason, Intent: r.Intent, InHash: r.InHash, OutHash: r.OutHash, DurationMS: r.DurationMS,
		ErrorCode: r.ErrorCode, Message: r.Message, Upstream: r.Upstream, Remote: r.Remote, Elicitation: r.Elicitation,
		Channel: r.Channel, Approver: r.Approver, WaitedMS: r.WaitedMS, Traceparent: r.Traceparent, Profile: r.Profile,
	})
	if err != nil {
		return "", err
	}
	return stored.Ref(), nil
}

// changeTokens are the pipeline's change tokens in the agent's database.
type changeTokens struct{ db *store.DB }

func (s changeTokens) NewID() (string, error) { return store.NewChangeTokenID() }

func (s changeTokens) Put(t tool.Token) error {
	return s.db.PutChangeToken(store.ChangeToken{ID: t.ID, Tool: t.Tool, Arguments: t.Arguments, PlanHash: t.PlanHash,
		Principal: t.Principal, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt})
}

func (s changeTokens) Prune(now time.Time) error {
	_, err := s.db.PruneChangeTokens(now)
	return err
}

func (s changeTokens) ConsumeIf(id string, now time.Time, check func(tool.Token) error) (tool.Token, error) {
	of := func(t store.ChangeToken) tool.Token {
		return tool.Token{ID: t.ID, Tool: t.Tool, Arguments: t.Arguments, PlanHash: t.PlanHash, Principal: t.Principal,
			CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
	}
	var c func(store.ChangeToken) error
	if check != nil {
		c = func(t store.ChangeToken) error { return check(of(t)) }
	}
	t, err := s.db.ConsumeChangeTokenIf(id, now, c)
	switch {
	case errors.Is(err, store.ErrChangeTokenExpired):
		err = errors.Join(tool.ErrTokenExpired, err)
	case errors.Is(err, store.ErrChangeTokenNotFound):
		err = errors.Join(tool.ErrTokenNotFound, err)
	}
	return of(t), err
}

// handler adapts a tool to the SDK's low-level ToolHandler.
func (a *Agent) handler(t *tool.Tool) mcp.ToolHandler { return a.pipe.Handler(t) }

// invoke runs the whole pipeline for one call.
func (a *Agent) invoke(ctx context.Context, t *tool.Tool, c *tool.Call, raw json.RawMessage) *mcp.CallToolResult {
	return a.pipe.Invoke(ctx, t, c, raw)
}

// wire is the wire name of a canonical id under the current naming mode.
func (a *Agent) wire(id string) string {
	if t, ok := a.tools.Get(id); ok {
		return t.Name()
	}
	return id
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// The pipeline end to end over the SDK's in-memory transports: fake tools,
// a fake audit trail and token store, a client that may be asked.

// fakeAudit is the audit trail: every record, in order.
type fakeAudit struct {
	mu   sync.Mutex
	recs []Record
}

func (f *fakeAudit) append(r Record) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs = append(f.recs, r)
	return fmt.Sprintf("audit:%d", len(f.recs)), nil
}

func (f *fakeAudit) since(n int) []Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Record(nil), f.recs[n:]...)
}

func (f *fakeAudit) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.recs)
}

// fakeTokens keeps change tokens in memory, as the store does on disk.
type fakeTokens struct {
	mu sync.Mutex
	n  int
	m  map[string]Token
}

func (f *fakeTokens) NewID() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return fmt.Sprintf("token-%04d", f.n), nil
}

func (f *fakeTokens) Put(t Token) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[t.ID] = t
	return nil
}

func (f *fakeTokens) Prune(time.Time) error { return nil }

func (f *fakeTokens) ConsumeIf(id string, now time.Time, check func(Token) error) (Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.m[id]
	if !ok {
		return Token{}, ErrTokenNotFound
	}
	if check != nil {
		if err := check(t); err != nil {
			return t, err
		}
	}
	delete(f.m, id)
	if !now.Before(t.ExpiresAt) {
		return t, ErrTokenExpired
	}
	return t, nil
}

type guardedIn struct {
	Pin int `json:"pin"`
	GuardArgs
}

type ranOut struct {
	Ran bool `json:"ran"`
}

// badOut says it is ranOut and is not.
type badOut struct {
	Ran bool `json:"ran"`
}

func (badOut) MarshalJSON() ([]byte, error) { return []byte(`{"ran":"yes"}`), nil }

type pipeRig struct {
	t      *testing.T
	cfg    config.Config
	who    atomic.Pointer[identity.Principal]
	audit  *fakeAudit
	tokens *fakeTokens
	runs   atomic.Int64 // handler runs that were not dry runs
	pipe   *Pipeline
	server *mcp.Server
	device fakeDevice
}

var (
	operator = identity.Principal{Name: "op", UID: 1001, Role: identity.RoleOperate}
	other    = identity.Principal{Name: "eve", UID: 1002, Role: identity.RoleOperate}
)

func newPipeRig(t *testing.T) *pipeRig {
	r := &pipeRig{t: t, cfg: config.Default(), audit: &fakeAudit{}, tokens: &fakeTokens{m: map[string]Token{}}}
	r.cfg.Guard.ElicitationTimeout = config.Duration(5 * time.Second)
	// The client's channel; approval_test.go puts calls to the device.
	r.cfg.Guard.Critical = config.ChannelClient
	r.who.Store(&operator)
	reg := NewRegistry(Options{CheckOutput: true})
	run := func(_ context.Context, c *Call, in guardedIn) (ranOut, error) {
		if !c.DryRun {
			r.runs.Add(1)
		}
		return ranOut{Ran: !c.DryRun}, nil
	}
	for _, risk := range []Risk{RiskHigh, RiskCritical} {
		Add(reg, Spec[guardedIn, ranOut]{ID: "test." + risk.String(), Title: risk.String(), Rule: Rule{MinRole: identity.RoleOperate, Risk: risk}, Run: run})
	}
	Add(reg, Spec[noArgs, ranOut]{ID: "test.boom", Rule: Rule{MinRole: identity.RoleRead}, Run: func(context.Context, *Call, noArgs) (ranOut, error) {
		var m map[string]int
		m["x"] = 1 // a nil map: panics
		return ranOut{}, nil
	}})
	Add(reg, Spec[noArgs, badOut]{ID: "test.bad_out", Rule: Rule{MinRole: identity.RoleRead}, Run: func(context.Context, *Call, noArgs) (badOut, error) {
		return badOut{}, nil
	}})
	r.pipe = NewPipeline(reg, PipelineOptions{Config: func() *config.Config { return &r.cfg }, Audit: r.audit.append, Tokens: r.tokens,
		Approver:    &r.device,
		Log:         slog.New(slog.DiscardHandler),
		CheckOutput: func() bool { return true }})
	Add(reg, Spec[PrepareIn, PrepareOut]{ID: PrepareID, Rule: Rule{MinRole: identity.RoleRead, Risk: RiskLow}, Run: r.pipe.Prepare})
	Add(reg, Spec[CommitIn, CommitOut]{ID: CommitID, Rule: Rule{MinRole: identity.RoleRead, Risk: RiskLow}, Run: r.pipe.Commit})
	if reg.Err() != nil {
		t.Fatal(reg.Err())
	}
	r.server = mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	for _, tl := range reg.All() {
		r.server.AddTool(tl.MCP(), r.pipe.Handler(tl))
	}
	r.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			return next(identity.NewContext(ctx, *r.who.Load()), method, req)
		}
	})
	return r
}

// client connects a client in a protocol era ("" for the SDK's latest);
// answer, when set, is the person at it.
func (r *pipeRig) client(era string, answer func() *mcp.ElicitResult) *mcp.ClientSession {
	r.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := r.server.Connect(ctx, st, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	var opts *mcp.ClientOptions
	if answer != nil {
		opts = &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return answer(), nil }}
	}
	var so *mcp.ClientSessionOptions
	if era != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: era}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, opts).Connect(ctx, ct, so)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// call calls a tool as p and returns its structured content or its error,
// and the audit records it left.
func (r *pipeRig) call(s *mcp.ClientSession, p identity.Principal, name string, args map[string]any) (map[string]any, *Error, []Record) {
	r.t.Helper()
	r.who.Store(&p)
	before := r.audit.len()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	recs := r.audit.since(before)
	if res.IsError {
		js, _ := json.Marshal(res.Meta["error"])
		var e Error
		if err := json.Unmarshal(js, &e); err != nil || e.Code == "" {
			r.t.Fatalf("%s: error result without _meta.error: %v", name, res.Meta)
		}
		if res.StructuredContent != nil {
			r.t.Errorf("%s: an error in structuredContent", name)
		}
		return nil, &e, recs
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return sc, nil, recs
}

func wantCode(t *testing.T, what string, e *Error, code string) {
	t.Helper()
	if code == "" && e != nil {
		t.Fatalf("%s: %v", what, e)
	}
	if code != "" && (e == nil || e.Code != code) {
		t.Fatalf("%s: got %v, want %s", what, e, code)
	}
	if e != nil && e.FixHint == "" {
		t.Errorf("%s: error without a fix hint: %v", what, e)
	}
}

func TestPipelineHighRiskNeedsConfirmAndReason(t *testing.T) {
	r := newPipeRig(t)
	s := r.client("", nil)
	_, e, recs := r.call(s, operator, "test_high", map[string]any{"pin": 1})
	wantCode(t, "unguarded", e, errcode.FailedPrecondition)
	// The refusal is audited once, as a denial, and suggests the dry run.
	if len(recs) != 1 || recs[0].Decision != DecisionDeny || recs[0].ErrorCode != errcode.FailedPrecondition || recs[0].Tool != "test.high" {
		t.Fatalf("denial audited as %+v", recs)
	}
	if len(e.Next) == 0 || e.Next[0].Arguments["dry_run"] != true {
		t.Errorf("no dry run suggested: %+v", e.Next)
	}
	if r.runs.Load() != 0 {
		t.Fatal("a refused call ran")
	}
	sc, e, recs := r.call(s, operator, "test_high", map[string]any{"pin": 1, "confirm": true, "reason": "test"})
	wantCode(t, "guarded", e, "")
	if sc["ran"] != true || r.runs.Load() != 1 || len(recs) != 1 || recs[0].Decision != DecisionAllow || recs[0].Reason != "test" || recs[0].InHash == "" || recs[0].OutHash == "" {
		t.Fatalf("guarded call: %v, records %+v", sc, recs)
	}
}

func TestPipelineDryRunRunsNothing(t *testing.T) {
	r := newPipeRig(t)
	s := r.client("", nil)
	for _, name := range []string{"test_high", "test_critical"} {
		sc, e, recs := r.call(s, operator, name, map[string]any{"pin": 1, "dry_run": true})
		wantCode(t, name, e, "")
		if sc["ran"] != false || len(recs) != 1 || !recs[0].DryRun {
			t.Fatalf("%s dry run: %v, records %+v", name, sc, recs)
		}
	}
	if r.runs.Load() != 0 {
		t.Fatal("a dry run ran")
	}
}

func TestPipelineCriticalByChangeToken(t *testing.T) {
	r := newPipeRig(t)
	s := r.client("", nil)
	_, e, _ := r.call(s, operator, "test_critical", map[string]any{"pin": 2, "confirm": true, "reason": "r"})
	wantCode(t, "direct", e, errcode.FailedPrecondition)
	if len(e.Next) == 0 || e.Next[0].Tool != "change_prepare" {
		t.Fatalf("no change_prepare suggested: %+v", e.Next)
	}
	sc, e, _ := r.call(s, operator, "change_prepare", map[string]any{"tool": "test_critical", "arguments": map[string]any{"pin": 2}})
	wantCode(t, "prepare", e, "")
	tok, _ := sc["token"].(string)
	if tok == "" || r.runs.Load() != 0 {
		t.Fatalf("prepare: %v (runs %d)", sc, r.runs.Load())
	}
	// Another principal's commit is refused, audited, and leaves the token.
	_, e, recs := r.call(s, other, "change_commit", map[string]any{"token": tok})
	wantCode(t, "other's commit", e, errcode.PermissionDenied)
	if len(recs) != 1 || recs[0].Principal != "eve" || recs[0].Decision != DecisionDeny || r.runs.Load() != 0 {
		t.Fatalf("other's commit: records %+v, runs %d", recs, r.runs.Load())
	}
	sc, e, recs = r.call(s, operator, "change_commit", map[string]any{"token": tok})
	wantCode(t, "commit", e, "")
	if r.runs.Load() != 1 || len(recs) != 2 || recs[0].Tool != "test.critical" || recs[1].Tool != CommitID {
		t.Fatalf("commit: %v, records %+v, runs %d", sc, recs, r.runs.Load())
	}
	if ref := sc["tool_audit_ref"]; ref != "audit:"+fmt.Sprint(r.audit.len()-1) {
		t.Errorf("tool_audit_ref %v", ref)
	}
	_, e, _ = r.call(s, operator, "change_commit", map[string]any{"token": tok})
	wantCode(t, "second commit", e, errcode.NotFound)
}

func TestPipelineElicitation(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			r := newPipeRig(t)
			var asked atomic.Int64
			accept := func() *mcp.ElicitResult {
				asked.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
			}
			decline := func() *mcp.ElicitResult { asked.Add(1); return &mcp.ElicitResult{Action: "decline"} }
			// Accepted: the call runs; for a critical call the person's yes
			// stands in for the change token.
			s := r.client(era, accept)
			for name, args := range map[string]map[string]any{
				"test_high":     {"pin": 3, "confirm": true, "reason": "r"},
				"test_critical": {"pin": 3, "reason": "r"},
			} {
				sc, e, recs := r.call(s, operator, name, args)
				wantCode(t, name, e, "")
				if sc["ran"] != true || len(recs) != 1 || recs[0].Decision != DecisionAllow || !strings.Contains(recs[0].Elicitation, "accept") {
					t.Fatalf("%s accepted: %v, records %+v", name, sc, recs)
				}
			}
			if asked.Load() != 2 || r.runs.Load() != 2 {
				t.Fatalf("asked %d, ran %d", asked.Load(), r.runs.Load())
			}
			// Declined: refused, audited once as declined, nothing ran.
			s = r.client(era, decline)
			_, e, recs := r.call(s, operator, "test_high", map[string]any{"pin": 3, "confirm": true, "reason": "r"})
			wantCode(t, "declined", e, errcode.PermissionDenied)
			if len(recs) != 1 || recs[0].Decision != DecisionDeclined || r.runs.Load() != 2 {
				t.Fatalf("declined: records %+v, runs %d", recs, r.runs.Load())
			}
		})
	}
}

func TestPipelinePanicIsAnInternalError(t *testing.T) {
	r := newPipeRig(t)
	s := r.client("", nil)
	_, e, recs := r.call(s, operator, "test_boom", nil)
	wantCode(t, "panic", e, errcode.Internal)
	if strings.Contains(e.Message, "panic") || strings.Contains(e.Message, "goroutine") {
		t.Errorf("internals reach the client: %q", e.Message)
	}
	if len(recs) != 1 || recs[0].ErrorCode != errcode.Internal || recs[0].Decision != DecisionAllow {
		t.Fatalf("panic audited as %+v", recs)
	}
	// The server lives on.
	if _, e, _ := r.call(s, operator, "test_high", map[string]any{"pin": 1, "dry_run": true}); e != nil {
		t.Fatal(e)
	}
}

func TestPipelineOutputSchemaIsChecked(t *testing.T) {
	r := newPipeRig(t)
	s := r.client("", nil)
	_, e, _ := r.call(s, operator, "test_bad_out", nil)
	wantCode(t, "bad output", e, errcode.Internal)
	if !strings.Contains(e.Message, "invalid result") {
		t.Fatalf("bad output: %v", e)
	}
}

func TestPipelineMayAndCall(t *testing.T) {
	r := newPipeRig(t)
	if e := r.pipe.May(operator, "test.critical"); e != nil {
		t.Fatalf("May: %v", e)
	}
	if e := r.pipe.May(identity.Principal{Name: "r", Role: identity.RoleRead}, "test.high"); e == nil || e.Code != errcode.PermissionDenied {
		t.Fatalf("May for a reader: %v", e)
	}
	if e := r.pipe.May(operator, "test.none"); e == nil || e.Code != errcode.NotFound {
		t.Fatalf("May for no tool: %v", e)
	}
	before := r.audit.len()
	out, e := r.pipe.Call(context.Background(), operator, "test.high", map[string]any{"pin": 1, "dry_run": true}, nil)
	if e != nil || out.(ranOut).Ran || r.audit.len() != before+1 {
		t.Fatalf("Call: %v %v, %d records", out, e, r.audit.len()-before)
	}
}

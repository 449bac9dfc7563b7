package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// The two protocol eras the person can be asked in.
var eras = []string{"2025-11-25", "2026-07-28"}

// person is a scripted person at the client.
func person(action string, content map[string]any) *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: action, Content: content}, nil
	}}
}

// callOnce calls a tool and returns its result and the one audit record the
// call left (failing when it left none or several).
func callOnce(t *testing.T, r *rig, s *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any, store.AuditRecord) {
	t.Helper()
	before := r.auditCount()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if n := r.auditCount() - before; n != 1 {
		t.Fatalf("%s left %d audit records, want 1", name, n)
	}
	recs, _, err := r.db.QueryAudit(storeQuery(1))
	if err != nil {
		t.Fatal(err)
	}
	return res, wireStructured(t, res), recs[0]
}

// wireStructured is structured for a result that crossed the wire, where
// structuredContent arrives decoded.
func wireStructured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		return structured(t, res)
	}
	m, _ := res.StructuredContent.(map[string]any)
	return m
}

var (
	restartArgs  = map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "stuck worker"}
	shutdownArgs = map[string]any{"reason": "moving the Pi"}
)

func TestElicitAcceptRunsAndRecordsTheAnswer(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, nil)
			var asked []string
			opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = append(asked, req.Params.Message)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true, "note": "go"}}, nil
			}}
			s := r.serveMany()(opts, era)

			res, sc, rec := callOnce(t, r, s, "service_control_service", restartArgs)
			if res.IsError || rec.Decision != store.DecisionAllow || !strings.Contains(rec.Elicitation, `"accept"`) || !strings.Contains(rec.Elicitation, `"note":"go"`) {
				t.Fatalf("accepted restart: %v, record %+v", sc, rec)
			}
			// The critical call needs no change token: the person's yes stands in.
			res, sc, rec = callOnce(t, r, s, "system_shutdown", shutdownArgs)
			if res.IsError || rec.Decision != store.DecisionAllow || rec.Tool != "system.shutdown" || rec.Elicitation == "" {
				t.Fatalf("accepted shutdown: %v, record %+v", sc, rec)
			}
			if len(r.pw.Events()) == 0 {
				t.Fatal("the accepted shutdown did not reach logind")
			}
			if len(asked) != 2 || !strings.Contains(asked[0], "nginx") || !strings.Contains(asked[1], "system_shutdown") {
				t.Fatalf("questions: %q", asked)
			}
			// A dry run never asks.
			if res, sc := r.asSession(s, "system_shutdown", map[string]any{"dry_run": true}); res.IsError || len(asked) != 2 {
				t.Fatalf("dry run: %v, asked %d times", sc, len(asked))
			}
		})
	}
}

// asSession is a call through the client with no audit expectations.
func (r *rig) asSession(s *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	return res, wireStructured(r.t, res)
}

func TestElicitDeclineAndCancelAreRefusedAndAudited(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, nil)
			dial := r.serveMany()
			for _, p := range []*mcp.ClientOptions{
				person("decline", nil),
				person("cancel", nil),
				person("accept", map[string]any{"confirm": false}), // accepted the form, did not tick
			} {
				s := dial(p, era)
				for _, call := range []struct {
					name string
					args map[string]any
				}{{"service_control_service", restartArgs}, {"system_shutdown", shutdownArgs}} {
					res, sc, rec := callOnce(t, r, s, call.name, call.args)
					if errCode(res, sc) != CodePermissionDenied || rec.Decision != store.DecisionDeclined || rec.ErrorCode != CodePermissionDenied {
						t.Fatalf("%s declined: %v, record %+v", call.name, sc, rec)
					}
				}
			}
			if len(r.pw.Events()) != 0 {
				t.Fatal("a declined call ran")
			}
		})
	}
}

func TestElicitTimeoutCountsAsDecline(t *testing.T) {
	t.Parallel() // it mostly waits (a timeout, a scrape): beside the others
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, func(c *config.Config) { c.Guard.ElicitationTimeout = config.Duration(time.Second) })
			release := make(chan struct{})
			defer close(release)
			s := r.serveMany()(&mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				select { // the person never answers
				case <-ctx.Done():
				case <-release:
				}
				return nil, errors.New("no answer")
			}}, era)
			for _, call := range []struct {
				name string
				args map[string]any
			}{{"service_control_service", restartArgs}, {"system_shutdown", shutdownArgs}} {
				before := r.auditCount()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				var res *mcp.CallToolResult
				go func() {
					var err error
					res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: call.name, Arguments: call.args})
					done <- err
				}()
				waitFor(t, "the timeout's audit record", 60*time.Second, func() bool { return r.auditCount() > before })
				recs, _, _ := r.db.QueryAudit(storeQuery(1))
				if rec := recs[0]; rec.Decision != store.DecisionDeclined || !strings.Contains(rec.Message, "did not confirm") {
					t.Fatalf("%s timed out: record %+v", call.name, rec)
				}
				if era >= "2026-07-28" {
					// The client is still waiting for its person; the call
					// ends when the client gives up, with no second record.
					cancel()
				}
				select {
				case err := <-done:
					if err == nil && !res.IsError {
						t.Fatalf("%s ran after a timeout", call.name)
					}
				case <-time.After(60 * time.Second):
					t.Fatal("call hangs")
				}
				cancel()
				if n := r.auditCount() - before; n != 1 {
					t.Fatalf("%s left %d records", call.name, n)
				}
			}
			if len(r.pw.Events()) != 0 {
				t.Fatal("a call ran without an answer")
			}
		})
	}
}

func TestElicitClientThatCannotAsk(t *testing.T) {
	for _, era := range eras {
		t.Run(era+"/preferred", func(t *testing.T) {
			r := newRig(t, nil)
			s := r.serveMany()(nil, era)
			// High: confirm and reason suffice, as before.
			if res, sc, rec := callOnce(t, r, s, "service_control_service", restartArgs); res.IsError || rec.Decision != store.DecisionAllow || rec.Elicitation != "" {
				t.Fatalf("restart without elicitation: %v %+v", sc, rec)
			}
			// Critical: the change token is still needed.
			if res, sc, rec := callOnce(t, r, s, "system_shutdown", shutdownArgs); errCode(res, sc) != CodeFailedPrecondition || rec.Decision != store.DecisionDeny {
				t.Fatalf("shutdown without token: %v %+v", sc, rec)
			}
		})
		t.Run(era+"/required", func(t *testing.T) {
			r := newRig(t, func(c *config.Config) { c.Guard.Elicitation = config.ElicitRequired })
			s := r.serveMany()(nil, era)
			for _, call := range []struct {
				name string
				args map[string]any
			}{{"service_control_service", restartArgs}, {"system_shutdown", shutdownArgs}} {
				res, sc, rec := callOnce(t, r, s, call.name, call.args)
				if errCode(res, sc) != CodePermissionDenied || rec.Decision != store.DecisionDeny || !strings.Contains(rec.Message, "cannot ask") {
					t.Fatalf("%s under required: %v %+v", call.name, sc, rec)
				}
			}
			// A dry run still works: it never asks.
			if res, sc := r.asSession(s, "system_shutdown", map[string]any{"dry_run": true}); res.IsError {
				t.Fatalf("dry run under required: %v", sc)
			}
			if len(r.pw.Events()) != 0 {
				t.Fatal("a refused call ran")
			}
		})
	}
}

// Through change_commit the person is still asked in the 2025-11-25 era; in
// the 2026-07-28 era, whose answer needs a second round of the same call,
// change_commit points at the direct call and keeps the token.
func TestElicitThroughChangeCommit(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, nil)
			asked := 0
			s := r.serveMany()(&mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}}, era)
			res, sc := r.asSession(s, "change_prepare", map[string]any{"tool": "system_shutdown", "arguments": shutdownArgs})
			if res.IsError || asked != 0 {
				t.Fatalf("prepare: %v, asked %d", sc, asked)
			}
			tok := sc["token"].(string)
			res, sc = r.asSession(s, "change_commit", map[string]any{"token": tok})
			if era < "2026-07-28" {
				if res.IsError || asked != 1 || len(r.pw.Events()) == 0 {
					t.Fatalf("commit: %v, asked %d", sc, asked)
				}
				return
			}
			if errCode(res, sc) != CodeFailedPrecondition || asked != 0 || len(r.pw.Events()) != 0 {
				t.Fatalf("commit in rounds: %v, asked %d", sc, asked)
			}
			if _, err := r.db.ConsumeChangeToken(tok, time.Now()); err != nil {
				t.Fatalf("the token was lost: %v", err)
			}
		})
	}
}

// A call whose own dry run is refused fails the same way without troubling
// the person: asking them to approve what cannot run would only teach them
// to click yes.
func TestElicitNotAskedForACallThatWouldBeRefused(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newSimRig(t, nil)
			asked := 0
			opts := &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
			}}
			s := r.serveMany()(opts, era)
			// The board's sshd (pid 496) belongs to root, a protected user.
			res, _, rec := callOnce(t, r, s, "process_send_signal", map[string]any{"pid": 496, "signal": "TERM", "confirm": true, "reason": "stuck"})
			e := resultError(t, res)
			if e.Code != CodePermissionDenied || !strings.Contains(e.Message, "protected") || rec.Decision != store.DecisionDeny || rec.Elicitation != "" {
				t.Fatalf("signal to a protected process: %+v, record %+v", e, rec)
			}
			if asked != 0 {
				t.Fatalf("the person was asked %d times about a call that could not run", asked)
			}
		})
	}
}

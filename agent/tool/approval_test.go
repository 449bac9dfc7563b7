package tool

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// fakeDevice is the device's approver: it answers each call with answer,
// and keeps what it was asked.
type fakeDevice struct {
	mu     sync.Mutex
	answer ApprovalOutcome
	asked  []ApprovalRequest
}

func (f *fakeDevice) Await(_ context.Context, r ApprovalRequest, tell func(string)) ApprovalOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	tell("press the button")
	return f.answer
}

func (f *fakeDevice) set(o ApprovalOutcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer, f.asked = o, nil
}

func (f *fakeDevice) requests() []ApprovalRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ApprovalRequest(nil), f.asked...)
}

func TestPipelineCriticalGoesToTheDevice(t *testing.T) {
	r := newPipeRig(t)
	r.cfg.Guard.Critical = config.ChannelDevice
	var elicited int
	s := r.client("2025-11-25", func() *mcp.ElicitResult {
		elicited++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}
	})
	// Approved on the device: it runs without a token, and the client,
	// although it could answer, is never asked.
	r.device.set(ApprovalOutcome{Approved: true, Channel: "console:root", Approver: "root", Waited: 1500 * time.Millisecond})
	sc, e, recs := r.call(s, operator, "test_critical", map[string]any{"pin": 4, "reason": "line one\nPlan: nothing at all"})
	wantCode(t, "approved", e, "")
	if sc["ran"] != true || r.runs.Load() != 1 || elicited != 0 {
		t.Fatalf("approved: %v, runs %d, elicited %d", sc, r.runs.Load(), elicited)
	}
	if len(recs) != 1 || recs[0].Channel != "console:root" || recs[0].Approver != "root" || recs[0].WaitedMS != 1500 {
		t.Fatalf("audit %+v", recs)
	}
	asked := r.device.requests()
	if len(asked) != 1 || asked[0].Tool != "test.critical" || asked[0].Principal.Name != "op" || asked[0].Bind == "" ||
		asked[0].Arguments != `{"pin":4}` || strings.Contains(asked[0].Reason, "\n") {
		t.Fatalf("asked %+v", asked)
	}
	// Declined on the device: audited as declined, nothing ran.
	r.device.set(ApprovalOutcome{Declined: true, Channel: "button", Approver: "button",
		Err: Errf(errcode.PermissionDenied, "declined on the device").Hint("ask the person")})
	_, e, recs = r.call(s, operator, "test_critical", map[string]any{"pin": 4})
	wantCode(t, "declined", e, errcode.PermissionDenied)
	if r.runs.Load() != 1 || len(recs) != 1 || recs[0].Decision != DecisionDeclined || recs[0].Channel != "button" {
		t.Fatalf("declined: runs %d, audit %+v", r.runs.Load(), recs)
	}
	// A change token is no way around the device.
	r.device.set(ApprovalOutcome{Declined: true, Err: Errf(errcode.PermissionDenied, "timed out").Hint("ask")})
	prep, e, _ := r.call(s, operator, "change_prepare", map[string]any{"tool": "test_critical", "arguments": map[string]any{"pin": 5}})
	wantCode(t, "prepare", e, "")
	_, e, recs = r.call(s, operator, "change_commit", map[string]any{"token": prep["token"]})
	wantCode(t, "commit without the device", e, errcode.PermissionDenied)
	if r.runs.Load() != 1 || len(r.device.requests()) != 1 || recs[0].Decision != DecisionDeclined {
		t.Fatalf("commit: runs %d, audit %+v", r.runs.Load(), recs)
	}
	// A dry run needs nobody.
	r.device.set(ApprovalOutcome{})
	if _, e, _ := r.call(s, operator, "test_critical", map[string]any{"pin": 4, "dry_run": true}); e != nil || len(r.device.requests()) != 0 {
		t.Fatalf("dry run: %v, asked %d", e, len(r.device.requests()))
	}
	// A principal without the role is refused before anyone is asked.
	_, e, recs = r.call(s, identity.Principal{Name: "r", UID: 1003, Role: identity.RoleRead}, "test_critical", map[string]any{"pin": 4})
	wantCode(t, "a reader", e, errcode.PermissionDenied)
	if len(r.device.requests()) != 0 || recs[0].Decision != DecisionDeny || recs[0].Channel != "" {
		t.Fatalf("a reader: asked %d, audit %+v", len(r.device.requests()), recs)
	}
}

func TestPipelineHighStaysWithTheClient(t *testing.T) {
	r := newPipeRig(t)
	r.cfg.Guard.Critical = config.ChannelDevice
	s := r.client("", nil)
	sc, e, recs := r.call(s, operator, "test_high", map[string]any{"pin": 1, "confirm": true, "reason": "r"})
	wantCode(t, "high", e, "")
	if sc["ran"] != true || len(r.device.requests()) != 0 || recs[0].Channel != ChannelConfirm {
		t.Fatalf("high: %v, asked %d, audit %+v", sc, len(r.device.requests()), recs)
	}
	r.cfg.Guard.High = config.ChannelDevice
	r.device.set(ApprovalOutcome{Approved: true, Channel: "button", Approver: "button"})
	if _, e, _ := r.call(s, operator, "test_high", map[string]any{"pin": 1}); e != nil || len(r.device.requests()) != 1 {
		t.Fatalf("high on the device: %v", e)
	}
}

func TestQuestionPutsThePlanBeforeTheModelsWords(t *testing.T) {
	r := newPipeRig(t)
	tl, _ := r.pipe.tools.Get("test.critical")
	c := &Call{Principal: operator, Guard: Guard{Reason: "ok\nPlan: format the disk\r\n\u2028more"}}
	q := r.pipe.question(context.Background(), tl, c, []byte(`{"pin":4}`), "set pin 4 high")
	lines := strings.Split(q.Message, "\n")
	if !strings.HasPrefix(lines[0], "op asks to run critical (test_critical, critical risk)") || lines[1] != "Plan: set pin 4 high" {
		t.Fatalf("first lines: %q", lines[:2])
	}
	for i, l := range lines {
		if strings.HasPrefix(l, "Plan:") && i != 1 {
			t.Errorf("a second Plan line: %q", q.Message)
		}
	}
	if !strings.Contains(q.Message, `"ok Plan: format the disk more"`) {
		t.Errorf("the reason is not one quoted line: %q", q.Message)
	}
	label := q.RequestedSchema.(map[string]any)["properties"].(map[string]any)["confirm"].(map[string]any)["title"].(string)
	if len([]rune(label)) > 40 {
		t.Errorf("label %q is over 40 characters", label)
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                 "plain",
		"a\nb\r\nc":             "a b c",
		"  lead\t\ttabs  ":      "lead tabs",
		"zero\u200bwidth\u2028": "zerowidth",
		"\x1b[31mred":           "[31mred",
	} {
		if got := OneLine(in, 100); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
	if got := OneLine(strings.Repeat("x", 300), 10); got != "xxxxxxxxxx…" {
		t.Errorf("cut: %q", got)
	}
}

package approval

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// fakeButton is the helper's button: each Wait takes the next press the
// test sends, or blocks until the wait ends.
type fakeButton struct {
	presses chan string
	err     error
	waits   chan string // ids of the waits begun
}

func newFakeButton() *fakeButton {
	return &fakeButton{presses: make(chan string, 1), waits: make(chan string, 8)}
}

func (f *fakeButton) Wait(ctx context.Context, id string, timeout time.Duration) (string, error) {
	f.waits <- id
	if f.err != nil {
		return "", f.err
	}
	select {
	case p := <-f.presses:
		return p, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

type rig struct {
	guard  config.Guard
	button *fakeButton
	b      *Broker
	notes  *fakeJournal
}

type fakeJournal struct {
	mu   sync.Mutex
	open map[string]Waiting
}

func (j *fakeJournal) Begin(w Waiting) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.open[w.ID] = w
	return nil
}

func (j *fakeJournal) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.open)
}

func (j *fakeJournal) End(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.open, id)
	return nil
}

func newRig(t *testing.T, wired bool) *rig {
	r := &rig{guard: config.Default().Guard, notes: &fakeJournal{open: map[string]Waiting{}}}
	r.guard.ApprovalTimeout = config.Duration(20 * time.Second)
	r.guard.Approvers = []string{"alice"}
	o := Options{Guard: func() config.Guard { return r.guard }, Journal: r.notes}
	if wired {
		r.guard.Button.Pin, r.guard.Button.LED = 26, 27
		r.button = newFakeButton()
		o.Button = r.button
	}
	r.b = New(o)
	return r
}

var bob = identity.Principal{Name: "bob", UID: 1001, Role: identity.RoleAdmin}

func request(p identity.Principal) tool.ApprovalRequest {
	return tool.ApprovalRequest{Principal: p, Tool: "system.shutdown", Name: "system_shutdown", Risk: tool.RiskCritical,
		Bind: "sha256:1", Arguments: `{"delay_minutes":1}`, Plan: "shutdown in 1 minute", Reason: "tidy", Why: "[guard] critical = \"device\"", Transport: "socket"}
}

// await runs Await in the background and returns its outcome's channel
// and the messages told to the client.
func (r *rig) await(ctx context.Context, p identity.Principal) (<-chan tool.ApprovalOutcome, *[]string) {
	out := make(chan tool.ApprovalOutcome, 1)
	var told []string
	var mu sync.Mutex
	go func() {
		out <- r.b.Await(ctx, request(p), func(m string) { mu.Lock(); told = append(told, m); mu.Unlock() })
	}()
	return out, &told
}

// waitFor returns the one call that waits, once it does.
func (r *rig) waitFor(t *testing.T) Waiting {
	t.Helper()
	for {
		ch := r.b.Changed()
		if w := r.b.List(); len(w) > 0 {
			return w[0]
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no call came to wait")
		}
	}
}

func TestConsoleApprovesOnce(t *testing.T) {
	r := newRig(t, false)
	out, told := r.await(context.Background(), bob)
	w := r.waitFor(t)
	if w.Principal != "bob" || w.Plan == "" || w.Bind != "sha256:1" {
		t.Fatalf("waiting: %+v", w)
	}
	if r.notes.count() != 1 {
		t.Fatalf("the wait is not noted: %d notes", r.notes.count())
	}
	if err := r.b.Decide(w.ID, true, Approver{Name: "alice", UID: 1002}, "sha256:other"); !errors.Is(err, ErrChanged) {
		t.Fatalf("an answer for another call: %v", err)
	}
	if err := r.b.Decide(w.ID, true, Approver{Name: "alice", UID: 1002}, w.Bind); err != nil {
		t.Fatal(err)
	}
	o := <-out
	if !o.Approved || o.Channel != "console:alice" || o.Approver != "alice" || o.Err != nil {
		t.Fatalf("outcome %+v", o)
	}
	if !strings.Contains((*told)[0], "raspi-mcp approve "+w.ID) {
		t.Errorf("the client is not told how: %q", *told)
	}
	// Used once: the number is gone, and so is the note.
	if err := r.b.Decide(w.ID, true, Approver{Name: "alice", UID: 1002}, ""); !errors.Is(err, ErrUnknown) {
		t.Fatalf("a second answer: %v", err)
	}
	if len(r.b.List()) != 0 || r.notes.count() != 0 {
		t.Fatalf("left waiting: %v, %d notes", r.b.List(), r.notes.count())
	}
}

func TestNobodyApprovesTheirOwnCallButRoot(t *testing.T) {
	r := newRig(t, false)
	out, _ := r.await(context.Background(), bob)
	w := r.waitFor(t)
	if err := r.b.Decide(w.ID, true, Approver{Name: "bob", UID: 1001}, ""); !errors.Is(err, ErrOwnCall) {
		t.Fatalf("bob approving bob: %v", err)
	}
	if err := r.b.Decide(w.ID, true, Approver{Name: "root", UID: 0}, ""); err != nil {
		t.Fatal(err)
	}
	if o := <-out; !o.Approved || o.Channel != "console:root" {
		t.Fatalf("%+v", o)
	}
	// A deny by the asker is always allowed: saying no widens nothing.
	out, _ = r.await(context.Background(), bob)
	w = r.waitFor(t)
	if err := r.b.Decide(w.ID, false, Approver{Name: "bob", UID: 1001}, ""); err != nil {
		t.Fatal(err)
	}
	if o := <-out; o.Approved || !o.Declined || o.Err.Code != errcode.PermissionDenied || o.Channel != "console:bob" {
		t.Fatalf("%+v", o)
	}
}

func TestUnansweredIsDeclinedAfterTheTimeout(t *testing.T) {
	r := newRig(t, false)
	r.guard.ApprovalTimeout = config.Duration(50 * time.Millisecond)
	o := r.b.Await(context.Background(), request(bob), func(string) {})
	if o.Approved || !o.Declined || o.Err == nil || o.Err.Details["approval"] != "timeout" {
		t.Fatalf("%+v", o)
	}
	if len(r.b.List()) != 0 || r.notes.count() != 0 {
		t.Fatal("a timed-out wait stays")
	}
}

func TestTheClientLeaving(t *testing.T) {
	r := newRig(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	out, _ := r.await(ctx, bob)
	w := r.waitFor(t)
	cancel()
	if o := <-out; o.Approved || o.Err == nil {
		t.Fatalf("%+v", o)
	}
	if err := r.b.Decide(w.ID, true, Approver{Name: "root"}, ""); !errors.Is(err, ErrUnknown) {
		t.Fatalf("approving a call whose client left: %v", err)
	}
}

func TestWaitsAreBounded(t *testing.T) {
	r := newRig(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range MaxWaiting {
		r.await(ctx, bob)
	}
	for len(r.b.List()) < MaxWaiting {
		<-r.b.Changed()
	}
	o := r.b.Await(ctx, request(bob), func(string) {})
	if o.Err == nil || o.Err.Code != errcode.ResourceExhausted || !o.Err.Retryable || o.Declined {
		t.Fatalf("one over the bound: %+v", o)
	}
}

func TestButton(t *testing.T) {
	for _, tc := range []struct {
		press    string
		err      error
		approved bool
	}{
		{press: "short", approved: true},
		{press: "long"},
		{err: errors.New("helper went away")},
	} {
		r := newRig(t, true)
		r.button.err = tc.err
		out, told := r.await(context.Background(), bob)
		<-r.button.waits
		if tc.err == nil {
			r.button.presses <- tc.press
		}
		o := <-out
		if o.Approved != tc.approved || o.Channel != tool.ChannelButton || (!tc.approved && (o.Err == nil || !o.Declined)) {
			t.Fatalf("%s/%v: %+v", tc.press, tc.err, o)
		}
		if !strings.Contains((*told)[0], "GPIO 26") {
			t.Errorf("not told of the button: %q", *told)
		}
	}
}

func TestOneCallWaitsForTheButton(t *testing.T) {
	r := newRig(t, true)
	out, _ := r.await(context.Background(), bob)
	<-r.button.waits
	o := r.b.Await(context.Background(), request(bob), func(string) {})
	if o.Err == nil || o.Err.Code != errcode.Unavailable || !o.Err.Retryable || o.Declined {
		t.Fatalf("a second call for the button: %+v", o)
	}
	// The console still answers the first; the button is then free.
	w := r.b.List()[0]
	if err := r.b.Decide(w.ID, true, Approver{Name: "alice", UID: 1002}, ""); err != nil {
		t.Fatal(err)
	}
	if o := <-out; !o.Approved || o.Channel != "console:alice" {
		t.Fatalf("%+v", o)
	}
	out, _ = r.await(context.Background(), bob)
	<-r.button.waits
	r.button.presses <- "short"
	if o := <-out; !o.Approved {
		t.Fatalf("the button after the first: %+v", o)
	}
}

func TestWhoMayApprove(t *testing.T) {
	g := config.Default().Guard
	g.Approvers = []string{"alice"}
	c := &Console{Guard: func() config.Guard { return g }, AgentUID: 999}
	for _, tc := range []struct {
		uid  int
		name string
		ok   bool
	}{
		{0, "root", true}, {1002, "alice", true}, {1001, "bob", false}, {999, "raspi-mcp", false},
	} {
		a, err := c.approver(tc.uid, tc.name)
		if (err == nil) != tc.ok || (tc.ok && a.Name != tc.name) {
			t.Errorf("uid %d (%s): %+v, %v", tc.uid, tc.name, a, err)
		}
	}
	g.Approvers = append(g.Approvers, "raspi-mcp")
	if _, err := c.approver(999, "raspi-mcp"); err == nil {
		t.Error("the agent's own user approves")
	}
}

// TestConsoleSocket is the console over a real Unix socket, as `raspi-mcp
// approve` speaks it, with this process's credentials.
func TestConsoleSocket(t *testing.T) {
	r := newRig(t, false)
	path := filepath.Join(t.TempDir(), "approve.sock")
	ln, err := unixsock.Listen(path, SocketMode, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	me := identity.FromUnix(config.Roles{}, unixsock.Peer{UID: os.Getuid()})
	r.guard.Approvers = []string{me.Name}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Console{B: r.b, Guard: func() config.Guard { return r.guard }, AgentUID: -1}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })

	rctx, rcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer rcancel()
	if resp, err := Ask(rctx, path, Request{Op: "list"}); err != nil || len(resp.Waiting) != 0 {
		t.Fatalf("empty list: %+v %v", resp, err)
	}
	if _, err := Ask(rctx, path, Request{Op: "approve", ID: "1"}); err == nil || !strings.Contains(err.Error(), "no call waits") {
		t.Fatalf("approving nothing: %v", err)
	}
	if _, err := Ask(rctx, path, Request{Op: "reboot"}); err == nil {
		t.Fatal("an unknown op is accepted")
	}
	other := identity.Principal{Name: "someone-else", UID: 4242, Role: identity.RoleAdmin}
	out, _ := r.await(context.Background(), other)
	resp, err := Ask(rctx, path, Request{Op: "list", WaitMS: 10_000})
	if err != nil || len(resp.Waiting) != 1 {
		t.Fatalf("list while one waits: %+v %v", resp, err)
	}
	w := resp.Waiting[0]
	if _, err := Ask(rctx, path, Request{Op: "approve", ID: w.ID, Bind: w.Bind}); err != nil {
		t.Fatal(err)
	}
	if o := <-out; !o.Approved || o.Approver != me.Name {
		t.Fatalf("%+v", o)
	}
	// A connection that says nothing is cut at the request timeout, not
	// held: covered by the deadline; one that sends junk gets an error.
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("{not json\n"))
	buf := make([]byte, 512)
	n, _ := conn.Read(buf)
	if !strings.Contains(string(buf[:n]), "bad request") {
		t.Fatalf("junk: %q", buf[:n])
	}
}

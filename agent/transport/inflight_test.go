package transport

import (
	"context"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// The gate's arithmetic: one record a uid a window, a cap a window in all,
// and the next record counts the refusals left out.
func TestRefusalGate(t *testing.T) {
	var g refusalGate
	t0 := time.Unix(1_700_000_000, 0)
	type step struct {
		uid     int
		at      time.Duration
		ok      bool
		leftOut int
	}
	for i, s := range []step{
		{1, 0, true, 0},
		{1, time.Second, false, 0}, // the same uid within the window
		{2, time.Second, true, 1},
		{3, time.Second, false, 0}, // the cap (2) of the window
		{1, RefusalWindow, true, 1},
		{4, RefusalWindow, true, 0},
		{5, RefusalWindow, false, 0},
		{5, 2 * RefusalWindow, true, 1},
	} {
		ok, left := g.record(s.uid, t0.Add(s.at), 2)
		if ok != s.ok || left != s.leftOut {
			t.Errorf("step %d (uid %d at %s): %v, %d; want %v, %d", i, s.uid, s.at, ok, left, s.ok, s.leftOut)
		}
	}
}

// What the doors hand the agent's audit hook for a caller with no role:
// one Refusal a uid a window, a deny of "connect" with permission_denied
// and the uid to hash, and every refusal counted.
func TestUnmappedCallerRefusal(t *testing.T) {
	r := newRig(t, nil)
	const uid = 4242 // mapped by no [roles] entry
	r.d.SetPeerOf(func(c *net.UnixConn) (unixsock.Peer, error) { return unixsock.Peer{UID: uid, GID: uid, PID: 1}, nil })
	sock := r.listen()
	for range 3 {
		w := dialWire(t, sock)
		w.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		a := decodeAnswer(t, w.mustRecv())
		if a.Error == nil || a.Error.Code != -32001 || !strings.Contains(a.Error.Message, "permission_denied") {
			t.Fatalf("unmapped caller answered %+v", a)
		}
		w.conn.Close()
	}
	if n := r.d.RefusedConns(); n != 3 {
		t.Errorf("RefusedConns = %d, want 3", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refused) != 1 {
		t.Fatalf("audited %d refusals of one uid in a window, want 1: %+v", len(r.refused), r.refused)
	}
	got := r.refused[0]
	if got.Tool != "connect" || got.Code != "permission_denied" || got.Role != "none" || got.Principal == "" ||
		!reflect.DeepEqual(got.In, map[string]any{"uid": uid}) {
		t.Errorf("refusal %+v", got)
	}
}

// The requests in flight of all callers but root have one bound together
// (total_in_flight), whatever the number of principals; root is never
// refused by it, and a freed slot is taken again.
func TestTotalInFlightBound(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Sessions.PrincipalInFlight = 2; c.Sessions.TotalInFlight = 3 })
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	h := r.d.InFlightMiddleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		started <- struct{}{}
		<-release
		return nil, nil
	})
	call := func(p identity.Principal) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := h(identity.NewContext(context.Background(), p), "tools/call", nil)
			done <- err
		}()
		return done
	}
	user := func(uid int) identity.Principal {
		return identity.Principal{Kind: identity.KindUnix, Name: "u" + strconv.Itoa(uid), UID: uid, Role: identity.RoleRead}
	}
	var running []chan error
	for _, p := range []identity.Principal{user(1001), user(1001), user(1002)} {
		running = append(running, call(p))
		<-started
	}
	// A third principal, under its own bound, is over the total.
	if err := <-call(user(1003)); err == nil || !strings.Contains(err.Error(), "total_in_flight") {
		t.Fatalf("a request past the total bound: %v", err)
	}
	// Root is not held to it.
	rootDone := call(identity.Principal{Kind: identity.KindUnix, Name: "root", UID: 0, Role: identity.RoleAdmin})
	<-started
	close(release)
	for _, c := range append(running, rootDone) {
		if err := <-c; err != nil {
			t.Fatalf("a request within the bounds: %v", err)
		}
	}
	if err := <-call(user(1003)); err != nil {
		t.Fatalf("after the others ended: %v", err)
	}
}

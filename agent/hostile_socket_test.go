package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// Hostile clients of the agent socket (issue 28): what one client does to
// its own session must not cost the agent its memory, its descriptors or
// the other sessions their answers. These tests hold only to what a client
// and the audit trail see; none depends on how fast anything happens.

// rawSession dials the agent socket and says hello as an MCP client of era
// version would, leaving the connection to the test.
func rawSession(t *testing.T, r *rig, version string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hello := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}`, version)
	if _, err := conn.Write([]byte(hello + "\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 1<<20)
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"id":0`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	if _, err := conn.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	return conn, br
}

// cutRecords are the audit records of sessions the agent cut.
func cutRecords(t *testing.T, r *rig) []store.AuditRecord {
	t.Helper()
	recs, _, err := r.db.QueryAudit(store.AuditQuery{Tool: "session", ErrorCode: CodeResourceExhausted, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// readToEnd reads conn until the agent closes it and returns how many bytes
// came; it fails t if the connection stays open past the hang guard.
func readToEnd(t *testing.T, what string, conn net.Conn, br io.Reader) int64 {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	n, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the agent did not close the connection (%d bytes read)", what, n)
	}
	return n
}

// A client that sends thousands of requests and reads none of the answers
// is cut once its answers outgrow the session's queue: the connection ends
// after a bounded number of bytes, the cut is audited once, and another
// session is answered meanwhile and after.
func TestUnreadAnswersCutTheSession(t *testing.T) {
	r := newSimRig(t, nil)
	honest := r.serveMany()(nil, "")
	conn, br := rawSession(t, r, "2025-11-25")
	const requests = 2000
	wrote := make(chan int, 1)
	go func() {
		n := 0
		for i := 1; i <= requests; i++ {
			if _, err := fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
				break // the agent cut the session
			}
			n++
		}
		wrote <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := honest.ListTools(ctx, nil); err != nil {
		t.Fatalf("the honest session, during the flood: %v", err)
	}
	waitFor(t, "the cut's audit record", hangGuard, func() bool { return len(cutRecords(t, r)) > 0 })
	got := readToEnd(t, "the flooding session", conn, br)
	<-wrote
	// Without a bound the agent would have answered all 2,000 (some
	// 300 MB); with it, what reaches the client is the socket's buffers and
	// the session's queue.
	if got > 8<<20 {
		t.Errorf("the flooding session was sent %d bytes before the cut", got)
	}
	if _, err := honest.ListTools(ctx, nil); err != nil {
		t.Fatalf("the honest session, after the flood: %v", err)
	}
	recs := cutRecords(t, r)
	if len(recs) != 1 {
		t.Fatalf("%d cut records, want exactly 1: %+v", len(recs), recs)
	}
	if rec := recs[0]; rec.Decision != store.DecisionDeny || !strings.Contains(rec.Message, "queue") {
		t.Errorf("cut record %+v", rec)
	}
}

// One subscribed session that stops reading its socket must not hold up
// the updates of any other: a notifier never waits on another session's
// peer.
func TestStuckSubscriberDoesNotStopOthers(t *testing.T) {
	r := newSimRig(t, nil)
	dial := r.serveMany()
	// The stuck one connects first, so a notifier that walks the sessions
	// in order meets it first.
	stuck, _ := rawSession(t, r, "2025-06-18")
	if _, err := fmt.Fprintf(stuck, `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":%q}}`+"\n", uriSummary); err != nil {
		t.Fatal(err)
	}
	updated := make(chan string, 100)
	other := dial(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		select {
		case updated <- req.Params.URI:
		default:
		}
	}}, "2025-06-18")
	ctx := context.Background()
	if err := other.Subscribe(ctx, &mcp.SubscribeParams{URI: uriSummary}); err != nil {
		t.Fatal(err)
	}
	// Enough unread answers to fill the socket's buffers, well under the
	// session's queue: the stuck session is stuck, not cut. A listing is
	// some 38 KB (all switches on, no output schemas): 14 are 530 KB, past
	// a Unix socket's buffers and under [sessions] queue_bytes' 1 MiB.
	for i := 2; i < 16; i++ {
		if _, err := fmt.Fprintf(stuck, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "answers waiting for the stuck peer", hangGuard, func() bool { return r.a.SocketLoad().Queued > 0 })
	// Updates are sent from a goroutine of their own, as the watcher
	// sends them; they keep coming until the other session has one.
	stop := make(chan struct{})
	var sends sync.WaitGroup
	sends.Go(func() {
		for {
			r.a.updates.send(ctx, uriSummary)
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	defer func() { close(stop); stuck.Close(); sends.Wait() }()
	// go-sdk notifies the subscribed sessions in map order, so one update
	// might reach the other session before the stuck one; every one of
	// several must.
	for i := range 8 {
		select {
		case <-updated:
		case <-time.After(hangGuard):
			t.Fatalf("a session that reads got %d updates while another was stuck", i)
		}
	}
}

// Requests beyond a session's in-flight bound are answered at once with
// resource_exhausted and not run; once the calls in flight end, requests
// run again.
func TestInFlightBoundPerSession(t *testing.T) {
	r := newSimRig(t, nil)
	release := make(chan struct{})
	var asked atomic.Int32
	s := r.serveMany()(&mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		select { // the person answers only when the test says
		case <-ctx.Done():
		case <-release:
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	const bound = 16 // the default [sessions] in_flight
	var calls sync.WaitGroup
	for range bound {
		calls.Go(func() {
			_, _ = s.CallTool(ctx, &mcp.CallToolParams{Name: "service_control_service", Arguments: restartArgs})
		})
	}
	waitFor(t, "every call waiting for its person", hangGuard, func() bool { return asked.Load() == bound })
	_, err := s.ListTools(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Fatalf("a request beyond the bound: %v, want a resource_exhausted refusal", err)
	}
	if !strings.Contains(err.Error(), "retry") {
		t.Errorf("the refusal does not say it may be retried: %v", err)
	}
	close(release)
	calls.Wait()
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatalf("after the calls ended: %v", err)
	}
}

// Connections that say nothing are closed after the first-line bound,
// without an audit record each.
func TestSilentConnectionsAreClosed(t *testing.T) {
	// The bound shortened: what is tested is that it closes them, unrecorded.
	r := newSimRig(t, func(c *config.Config) { c.Sessions.FirstLineTimeout = config.Duration(300 * time.Millisecond) })
	r.serveMany()
	before := r.auditCount()
	const n = 20
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("unix", r.cfg.Agent.Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	for i, c := range conns {
		readToEnd(t, fmt.Sprintf("silent connection %d", i), c, c)
	}
	if got := r.auditCount() - before; got != 0 {
		t.Errorf("%d audit records for silent connections", got)
	}
}

// dialAs connects to the agent socket from an abstract address that names
// uid, which peerAsNamed reads back on the agent's side: the tests run as
// one user, and the caps are per uid.
func dialAs(t *testing.T, r *rig, uid, n int) *net.UnixConn {
	t.Helper()
	laddr := &net.UnixAddr{Name: fmt.Sprintf("@raspi-mcp-test-%d-uid-%d-%d", os.Getpid(), uid, n), Net: "unix"}
	c, err := net.DialUnix("unix", laddr, &net.UnixAddr{Name: r.cfg.Agent.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// peerAsNamed is the agent's peer lookup for dialAs's connections; others
// get the kernel's word.
func peerAsNamed(c *net.UnixConn) (unixsock.Peer, error) {
	if a, ok := c.RemoteAddr().(*net.UnixAddr); ok && strings.Contains(a.Name, "-uid-") {
		var pid, uid, n int
		if _, err := fmt.Sscanf(a.Name[1:], "raspi-mcp-test-%d-uid-%d-%d", &pid, &uid, &n); err == nil {
			return unixsock.Peer{UID: uid, GID: uid, PID: pid}, nil
		}
	}
	return unixsock.PeerOf(c)
}

// hello says initialize on conn and reads the answer: the session is up.
func hello(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	if _, err := conn.Write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	defer conn.SetReadDeadline(time.Time{})
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("initialize: %q, %v", line, err)
	}
}

// refusedLine reads what a refused connection gets: one line, then the end.
func refusedLine(t *testing.T, what string, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	b, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection was not closed (%q)", what, b)
	}
	return string(b)
}

// The caps on connections: per uid, in total, and root may always connect
// beyond the total.
func TestConnectionCaps(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) {
		c.Sessions.PerUID, c.Sessions.Total, c.Sessions.RootReserve = 2, 3, 1
		c.Roles.Users["uid:4243"] = "read"
		c.Roles.Users["uid:4244"] = "read"
		c.Roles.Users["uid:4245"] = "read"
	})
	r.a.doors.SetPeerOf(peerAsNamed)
	r.serveMany()
	for i := range 2 {
		c := dialAs(t, r, 4243, i)
		hello(t, c, bufio.NewReader(c))
	}
	third := dialAs(t, r, 4243, 2)
	if got := refusedLine(t, "a third connection of uid 4243", third); !strings.Contains(got, "resource_exhausted") || !strings.Contains(got, "per_uid") {
		t.Fatalf("a third connection of one uid got %q, want a resource_exhausted line naming per_uid", got)
	}
	other := dialAs(t, r, 4244, 0)
	hello(t, other, bufio.NewReader(other))
	fourth := dialAs(t, r, 4245, 0)
	if got := refusedLine(t, "a fourth connection", fourth); !strings.Contains(got, "[sessions] total") {
		t.Fatalf("a connection past the total got %q", got)
	}
	// Root is not locked out by the others.
	root, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	hello(t, root, bufio.NewReader(root))
	if got := r.a.SocketLoad().Conns; got != 4 {
		t.Errorf("%d connections counted, want 4", got)
	}
}

// Connections that send no whole first message are closed after the
// (shortened) bound, including one that sent half a line.
func TestHalfALineIsClosed(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Sessions.FirstLineTimeout = config.Duration(200 * time.Millisecond) })
	r.serveMany()
	before := r.auditCount()
	c, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,`)); err != nil {
		t.Fatal(err)
	}
	readToEnd(t, "half a line", c, c)
	if got := r.auditCount() - before; got != 0 {
		t.Errorf("%d audit records for a silent connection", got)
	}
	waitFor(t, "the connection's slot back", hangGuard, func() bool { return r.a.SocketLoad().Conns == 0 })
}

// Connections from unmapped uids are refused, and audited within the
// bounds: one a uid a minute, refusal_audits a minute in all.
func TestUnmappedFloodIsAuditedWithinBounds(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Sessions.RefusalAudits = 3 })
	r.a.doors.SetPeerOf(peerAsNamed)
	r.serveMany()
	before := r.auditCount()
	for uid := 4250; uid < 4256; uid++ {
		for i := range 10 {
			c := dialAs(t, r, uid, i)
			if _, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := refusedLine(t, "an unmapped caller", c); !strings.Contains(got, "permission_denied") {
				t.Fatalf("uid %d got %q", uid, got)
			}
			c.Close()
		}
	}
	if got := r.auditCount() - before; got != 3 {
		t.Errorf("60 refused connections of 6 uids wrote %d audit records, want 3", got)
	}
	if got := r.a.doors.RefusedConns(); got != 60 {
		t.Errorf("refusals counted: %d, want 60", got)
	}
}

// A session's in-flight bound is one thing, its principal's across
// sessions another: with the principal's reached on two sessions, a
// request on either is refused until one ends.
func TestInFlightBoundPerPrincipal(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Sessions.InFlight, c.Sessions.PrincipalInFlight = 3, 4 })
	release := make(chan struct{})
	var asked atomic.Int32
	opts := &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked.Add(1)
		select {
		case <-ctx.Done():
		case <-release:
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}
	dial := r.serveMany()
	a, b := dial(opts, "2025-11-25"), dial(opts, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	var calls sync.WaitGroup
	for _, s := range []*mcp.ClientSession{a, a, a, b} {
		calls.Go(func() {
			_, _ = s.CallTool(ctx, &mcp.CallToolParams{Name: "service_control_service", Arguments: restartArgs})
		})
	}
	waitFor(t, "four calls waiting for their person", hangGuard, func() bool { return asked.Load() == 4 })
	if _, err := a.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), "in_flight") {
		t.Errorf("session a, at its own bound: %v", err)
	}
	_, err := b.ListTools(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "principal_in_flight") {
		t.Fatalf("session b, under its own bound but at its principal's: %v", err)
	}
	if got := r.a.SocketLoad().InFlight; got != 4 {
		t.Errorf("in flight: %d, want 4", got)
	}
	close(release)
	calls.Wait()
	if _, err := b.ListTools(ctx, nil); err != nil {
		t.Fatalf("after the calls ended: %v", err)
	}
}

// A batch larger than max_batch is refused whole, one error per request;
// a smaller one runs.
func TestBatchBound(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Sessions.MaxBatch = 4 })
	r.serveMany()
	conn, br := rawSession(t, r, "2025-03-26")
	batch := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i))
		}
		return "[" + strings.Join(parts, ",") + "]\n"
	}
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	for _, c := range []struct {
		n       int
		refused bool
	}{{5, true}, {4, false}} {
		if _, err := conn.Write([]byte(batch(c.n))); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var answers []map[string]any
		if err := json.Unmarshal([]byte(line), &answers); err != nil || len(answers) != c.n {
			t.Fatalf("a batch of %d: %q (%v)", c.n, line, err)
		}
		for _, a := range answers {
			_, isErr := a["error"]
			if isErr != c.refused || (isErr && !strings.Contains(fmt.Sprint(a["error"]), "max_batch")) {
				t.Fatalf("a batch of %d: answer %v", c.n, a)
			}
		}
	}
}

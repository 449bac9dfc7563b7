package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/handover"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/rawio"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// drainGrace bounds how long a session whose input has ended waits for the
// answers it still owes before go-sdk sees the end (rpcid.Owed says why).
const drainGrace = 10 * time.Second

// serveConn runs one MCP session; unixsock.Serve closes conn after it.
//
// The session reads and writes either conn itself or, when `raspi-mcp
// stdio` hands them over (internal/handover), the SSH session's own stdin
// and stdout; conn then only tells that the bridge is still there. Either
// way the principal is conn's peer, read once.
func (a *Agent) serveConn(ctx context.Context, conn *net.UnixConn) {
	p, err := a.principalOf(conn)
	if err != nil {
		a.log.Warn("cannot read peer credentials; connection refused", "err", err)
		return
	}
	if p.Role == identity.RoleNone {
		// Audited before anything is read: a refused caller that says
		// nothing, or hands over something unusable, is on record too.
		a.auditRefusal(p)
	}
	s, err := openSession(conn)
	if err != nil {
		if errors.Is(err, handover.ErrRefused) {
			a.log.Warn("refused a handover", "principal", p.Name, "uid", p.UID, "pid", p.PID, "err", err)
			_, _ = conn.Write([]byte(err.Error() + "\n")) // the bridge prints it
		}
		return
	}
	// The session's descriptors are out of the runtime's poller
	// (internal/rawio) and out of reach of the listener's shutdown sweep,
	// so the session closes them itself when ctx ends, when it ends, and,
	// after a handover, when the bridge goes away.
	ctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	defer s.Close()
	defer context.AfterFunc(ctx, func() { s.Close() })()
	if s.handed {
		go func() {
			var b [64]byte
			for {
				if _, err := conn.Read(b[:]); err != nil {
					s.cancel()
					return
				}
			}
		}()
	}
	if p.Role == identity.RoleNone {
		a.refuse(s, p)
		return
	}
	log := a.log.With("principal", p.Name, "pid", p.PID)
	log.Debug("connection", "uid", p.UID, "role", p.Role, "handover", s.handed)
	in := newLineFilter(s, s.owed, log)
	in.done = ctx.Done()
	ss, err := a.server.Connect(context.WithValue(ctx, principalKey{}, p), &lineTransport{in: in, out: s}, nil)
	if err != nil {
		log.Warn("mcp connect failed", "err", err)
		return
	}
	_ = ss.Wait()
}

// session is where one MCP session reads requests and writes answers.
type session struct {
	in, out rawio.Conn // the same Conn unless handed over
	first   []byte     // read from conn before the session began, read again first
	handed  bool
	owed    *rpcid.Owed // requests handed to go-sdk and not yet answered
	cancel  context.CancelFunc

	mu        sync.Mutex // serializes writes: go-sdk's answers and the line filter's refusals come from different goroutines
	closeOnce sync.Once
}

// openSession reads conn's first message: descriptors handed over, or the
// first bytes of an ordinary stream.
func openSession(conn *net.UnixConn) (*session, error) {
	pair, first, err := handover.Receive(conn, make([]byte, 512))
	if err != nil {
		return nil, err
	}
	s := &session{first: first, owed: rpcid.NewOwed(), cancel: func() {}}
	if pair == nil {
		s.in = rawio.TakeUnix(conn)
		s.out = s.in
		return s, nil
	}
	if s.in, err = rawio.Take(pair.In); err != nil {
		_ = syscall.Close(pair.Out)
		return nil, fmt.Errorf("agent: handed-over stdin: %w", err)
	}
	if s.out, err = rawio.Take(pair.Out); err != nil {
		s.in.Close()
		return nil, fmt.Errorf("agent: handed-over stdout: %w", err)
	}
	s.handed = true
	return s, nil
}

func (s *session) Read(b []byte) (int, error) {
	if len(s.first) > 0 {
		n := copy(b, s.first)
		s.first = s.first[n:]
		return n, nil
	}
	return s.in.Read(b)
}

// Write writes one or more whole lines and strikes the answers among them
// off s.owed. A failed write means the client is gone: the session ends.
func (s *session) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.out.Write(b)
	if err != nil {
		s.cancel()
		return n, err
	}
	s.owed.Answered(b)
	return n, nil
}

// Close closes the session's descriptors, once.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		s.in.Close()
		if s.out != s.in {
			s.out.Close()
		}
	})
	return nil
}

// principalOf asks the kernel who connected and maps it to a principal with
// the [roles] table (identity.FromUnix).
func (a *Agent) principalOf(conn *net.UnixConn) (identity.Principal, error) {
	peer, err := unixsock.PeerOf(conn)
	if err != nil {
		return identity.Principal{}, err
	}
	return identity.FromUnix(a.conf().Roles, peer), nil
}

// auditRefusal logs, counts and audits the connection of an unmapped
// principal.
func (a *Agent) auditRefusal(p identity.Principal) {
	a.log.Warn("refused connection: principal has no role", "principal", p.Name, "uid", p.UID, "pid", p.PID)
	a.exp.refused.Add(1)
	rec := store.AuditRecord{Time: time.Now().UTC(), CorrelationID: newCorrelationID(), Principal: p.Name, Role: identity.RoleNone.String(),
		Tool: "connect", Decision: "deny", ErrorCode: CodePermissionDenied, Message: "principal has no role"}
	rec.InHash, _ = store.HashJSON(map[string]any{"uid": p.UID})
	if _, err := a.appendAudit(rec); err != nil {
		a.log.Error("audit append failed", "err", err)
	}
}

// refuse answers the first request of an unmapped principal (audited
// already) with a JSON-RPC error that says why, and closes: a client then
// shows a reason instead of "connection closed".
func (a *Agent) refuse(s *session, p identity.Principal) {
	// A client that says nothing, or reads nothing, is not waited for.
	t := time.AfterFunc(5*time.Second, func() { s.Close() })
	defer t.Stop()
	var id json.RawMessage = json.RawMessage("null")
	sc := bufio.NewScanner(s)
	sc.Buffer(make([]byte, 4096), 1<<20)
	if sc.Scan() {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &req) == nil && len(req.ID) > 0 {
			id = req.ID
		}
	}
	msg := fmt.Sprintf("permission_denied: %s (uid %d) has no role on this device; an admin maps it in [roles] of %s", p.Name, p.UID, config.DefaultPath)
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32001, "message": msg, "data": map[string]any{"error_code": CodePermissionDenied}}})
	_, _ = s.Write(append(resp, '\n'))
}

var _ io.ReadWriteCloser = (*session)(nil)

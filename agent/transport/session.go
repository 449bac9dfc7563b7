package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/handover"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/rawio"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// drainGrace bounds how long a session whose input has ended waits for the
// answers it still owes before go-sdk sees the end (rpcid.Owed says why).
const drainGrace = 10 * time.Second

// writeChunk is how much of a message the session's writer hands the
// kernel at once: each chunk written is progress for the stall bound, so a
// peer that reads, however slowly, is not taken for one that reads nothing.
const writeChunk = 64 << 10

// ServeConn runs one MCP session on the agent socket; it is the
// unixsock.Handler the agent serves its listener with, and unixsock.Serve
// closes conn after it.
//
// The session reads and writes either conn itself or, when `raspi-mcp
// stdio` hands them over (internal/handover), the SSH session's own stdin
// and stdout; conn then only tells that the bridge is still there. Either
// way the principal is conn's peer, read once.
//
// Before anything is read, the peer's uid must get a connection slot
// (guard.admit), and what it sends first (a handover, or a whole first
// message) must come within [sessions] first_line_timeout: a connection
// that says nothing is closed, unrecorded.
func (d *Doors) ServeConn(ctx context.Context, conn *net.UnixConn) {
	lim := d.conf().Sessions
	peerOf := d.guard.peerOf
	if peerOf == nil {
		peerOf = unixsock.PeerOf
	}
	peer, err := peerOf(conn)
	if err != nil {
		d.log.Warn("cannot read peer credentials; connection refused", "err", err)
		return
	}
	release, why := d.guard.admit(peer.UID, lim)
	if why != "" {
		if ok, _ := d.guard.capLog.First("uid:"+strconv.Itoa(peer.UID), time.Now()); ok {
			d.log.Warn("refused a connection: too many open", "uid", peer.UID, "pid", peer.PID, "why", why)
		}
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(busyLine(why))
		return
	}
	defer release()
	p := identity.FromUnix(d.conf().Roles, peer)
	if p.Role == identity.RoleNone {
		// Audited before anything is read: a refused caller that says
		// nothing, or hands over something unusable, is on record too,
		// within refusalGate's bounds.
		d.auditRefusal(p, lim)
	}
	firstBy := time.Now().Add(lim.FirstLineTimeout.D())
	_ = conn.SetReadDeadline(firstBy)
	s, err := openSession(conn)
	if err != nil {
		var ne net.Error
		switch {
		case errors.Is(err, handover.ErrRefused):
			d.log.Warn("refused a handover", "principal", p.Name, "uid", p.UID, "pid", p.PID, "err", err)
			_, _ = conn.Write([]byte(err.Error() + "\n")) // the bridge prints it
		case errors.As(err, &ne) && ne.Timeout():
			d.log.Debug("closed a connection that sent nothing", "uid", p.UID, "pid", p.PID, "bound", lim.FirstLineTimeout.D())
		}
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	log := d.log.With("principal", p.Name, "pid", p.PID)
	// The session's descriptors are out of the runtime's poller
	// (internal/rawio) and out of reach of the listener's shutdown sweep,
	// so the session closes them itself: at once when ctx ends or the
	// session is cut, after what is queued has gone out when it ends.
	ctx, s.cancel = context.WithCancel(ctx)
	s.start(&d.guard, lim, func(why string) { d.cutSession(log, p, why) })
	stop := context.AfterFunc(ctx, s.abort)
	defer func() {
		stop()
		s.Close()
		<-s.wdone
		s.cancel()
	}()
	// What has not sent a whole first line by firstBy is closed; the line
	// filter stops the clock at its first line.
	silent := time.AfterFunc(time.Until(firstBy), func() {
		log.Debug("closed a connection that sent no whole first message", "uid", p.UID, "bound", lim.FirstLineTimeout.D())
		s.abort()
	})
	defer silent.Stop()
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
		d.refuse(s, p, silent)
		return
	}
	log.Debug("connection", "uid", p.UID, "role", p.Role, "handover", s.handed)
	in := newLineFilter(s, s.owed, log)
	in.done = ctx.Done()
	in.firstLine = func() { silent.Stop() }
	in.maxInFlight, in.maxBatch = lim.InFlight, lim.MaxBatch
	if d.drainGrace > 0 {
		in.grace = d.drainGrace
	}
	in.ended = d.inputEnded
	ss, err := d.server.Connect(identity.NewContext(ctx, p), &lineTransport{in: in, out: s}, nil)
	if err != nil {
		log.Warn("mcp connect failed", "err", err)
		return
	}
	_ = ss.Wait()
}

// cutSession logs a session cut for a bound and audits it: the first cut of
// a principal in a refusal window, then the next after the window with the
// count of those left out, so a client that connects, floods and is cut
// over and over writes a record a minute, not one a session.
func (d *Doors) cutSession(log *slog.Logger, p identity.Principal, why string) {
	log.Warn("cut a session", "uid", p.UID, "why", why)
	record, leftOut := d.guard.cuts.First(string(p.Kind)+"/"+p.Name, time.Now())
	if !record {
		return
	}
	msg := "session cut: " + why
	if leftOut > 0 {
		msg += fmt.Sprintf(" (and %d cuts of this principal not recorded since the last)", leftOut)
	}
	d.audit(Refusal{Principal: p.Name, Role: p.Role.String(), Tool: "session", Code: errcode.ResourceExhausted, Message: msg,
		In: map[string]any{"uid": p.UID, "pid": p.PID}})
}

// session is where one MCP session reads requests and writes answers.
//
// Write never waits for the peer: it queues whole lines, which one writer
// goroutine (writeLoop) hands to the peer in order. So a peer that stops
// reading holds up nothing but its own session, and no notifier, answer or
// go-sdk goroutine waits on it. What the queue may hold is bounded
// ([sessions] queue_bytes for the session, total_queue_bytes for all), and
// so is how long the peer may read nothing while something waits
// (stall_timeout): past either the session is cut, its descriptors closed,
// which ends its go-sdk session.
type session struct {
	in, out rawio.Conn // the same Conn unless handed over
	first   []byte     // read from conn before the session began, read again first
	handed  bool
	owed    *rpcid.Owed // requests handed to go-sdk and not yet answered (written)
	cancel  context.CancelFunc

	g     *guard
	lim   config.Sessions
	onCut func(why string) // logs and audits a cut
	stall *time.Timer      // armed while a chunk waits for the peer
	wdone chan struct{}    // closed when writeLoop has ended and closed the descriptors

	mu      sync.Mutex // guards what follows
	cond    sync.Cond  // signalled when q grows, closing or dead is set
	q       [][]byte   // lines to write; q[0] may be being written
	queued  int64      // bytes in q
	closing bool       // Close: write what is queued, then close
	dead    bool       // no more writes: the descriptors are closed or about to be

	cutOnce   sync.Once
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

// start starts the session's writer under the bounds lim; onCut is called,
// once and on a goroutine of its own, when the session is cut.
func (s *session) start(g *guard, lim config.Sessions, onCut func(why string)) {
	s.g, s.lim, s.onCut = g, lim, onCut
	s.cond.L = &s.mu
	s.wdone = make(chan struct{})
	s.stall = time.AfterFunc(time.Hour, func() {
		s.cut(fmt.Sprintf("its peer read nothing for %s while answers waited ([sessions] stall_timeout)", lim.StallTimeout.D()))
	})
	s.stall.Stop()
	go s.writeLoop()
}

func (s *session) Read(b []byte) (int, error) {
	if len(s.first) > 0 {
		n := copy(b, s.first)
		s.first = s.first[n:]
		return n, nil
	}
	return s.in.Read(b)
}

// errCut is what a write to a session cut for a bound returns.
var errCut = errors.New("agent: session cut: its peer does not read its answers")

// Write queues b, one or more whole lines, for the peer, and returns
// without waiting for it. If the session already has something queued and
// b would take it past its bound, or the sessions past theirs, the session
// is cut instead. A message larger than the bound passes when nothing else
// waits.
func (s *session) Write(b []byte) (int, error) {
	n := int64(len(b))
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return 0, net.ErrClosed
	}
	var why string
	if s.queued > 0 {
		if s.queued+n > s.lim.QueueBytes {
			why = fmt.Sprintf("its peer left %d bytes of answers unread and %d more came, past the session's queue bound of %d bytes ([sessions] queue_bytes)", s.queued, n, s.lim.QueueBytes)
		} else if total := s.g.queued.Load(); total+n > s.lim.TotalQueueBytes {
			why = fmt.Sprintf("its peer left %d bytes of answers unread while all sessions' unread answers (%d bytes) passed their queue bound of %d bytes ([sessions] total_queue_bytes)", s.queued, total, s.lim.TotalQueueBytes)
		}
	}
	if why != "" {
		s.mu.Unlock()
		s.cut(why)
		return 0, errCut
	}
	s.q = append(s.q, bytes.Clone(b))
	s.queued += n
	s.g.addQueued(n)
	s.cond.Signal()
	s.mu.Unlock()
	return len(b), nil
}

// writeLoop writes the queue to the peer, in order, striking the answers
// written off s.owed, until the session is dead or closing with nothing
// left to write; then it closes the descriptors.
func (s *session) writeLoop() {
	defer close(s.wdone)
	defer s.closeFDs()
	for {
		s.mu.Lock()
		for len(s.q) == 0 && !s.closing && !s.dead {
			s.cond.Wait()
		}
		if s.dead || len(s.q) == 0 {
			s.dead = true
			s.mu.Unlock()
			return
		}
		b := s.q[0]
		s.mu.Unlock()
		err := s.send(b)
		s.mu.Lock()
		if s.dead { // abort has dropped the queue and its count
			s.mu.Unlock()
			return
		}
		s.q[0] = nil
		s.q = s.q[1:]
		s.queued -= int64(len(b))
		s.g.addQueued(-int64(len(b)))
		s.mu.Unlock()
		if err != nil {
			// The peer is gone: the session ends, nothing to audit.
			s.abort()
			return
		}
		s.owed.Answered(b)
	}
}

// send writes b to the peer a chunk at a time, each within the stall bound.
func (s *session) send(b []byte) error {
	for len(b) > 0 {
		n := min(len(b), writeChunk)
		s.stall.Reset(s.lim.StallTimeout.D())
		_, err := s.out.Write(b[:n])
		s.stall.Stop()
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// cut ends a session for a bound: logged and audited once (onCut), its
// queue dropped, its descriptors closed.
func (s *session) cut(why string) {
	s.mu.Lock()
	dead := s.dead
	s.mu.Unlock()
	if !dead && s.onCut != nil {
		s.cutOnce.Do(func() { go s.onCut(why) })
	}
	s.abort()
}

// abort ends the session now: what is queued is dropped, the descriptors
// are closed (which ends a write or read that waits) and the session's
// context is cancelled.
func (s *session) abort() {
	s.mu.Lock()
	if !s.dead {
		s.dead = true
		s.g.addQueued(-s.queued)
		s.queued, s.q = 0, nil
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	s.stall.Stop()
	s.closeFDs()
	s.cancel()
}

// Close ends the session once what is queued has been written (within the
// stall bound); it does not wait for that.
func (s *session) Close() error {
	s.mu.Lock()
	s.closing = true
	s.cond.Broadcast()
	s.mu.Unlock()
	return nil
}

// closeFDs closes the session's descriptors, once.
func (s *session) closeFDs() {
	s.closeOnce.Do(func() {
		s.in.Close()
		if s.out != s.in {
			s.out.Close()
		}
	})
}

// auditRefusal counts the connection of an unmapped principal and, within
// refusalGate's bounds (one a uid a minute, [sessions] refusal_audits a
// minute in all), logs and audits it; the record counts those left out.
func (d *Doors) auditRefusal(p identity.Principal, lim config.Sessions) {
	d.refused.Add(1)
	ok, leftOut := d.guard.refusals.record(p.UID, time.Now(), lim.RefusalAudits)
	if !ok {
		return
	}
	d.log.Warn("refused connection: principal has no role", "principal", p.Name, "uid", p.UID, "pid", p.PID, "left_out", leftOut)
	msg := "principal has no role"
	if leftOut > 0 {
		msg += fmt.Sprintf("; %d refused connections since the last such record were not recorded (at most one a uid a minute, [sessions] refusal_audits a minute)", leftOut)
	}
	d.audit(Refusal{Principal: p.Name, Role: identity.RoleNone.String(), Tool: "connect", Code: errcode.PermissionDenied, Message: msg,
		In: map[string]any{"uid": p.UID}})
}

// refuse answers the first request of an unmapped principal (audited
// already) with a JSON-RPC error that says why, and closes: a client then
// shows a reason instead of "connection closed".
func (d *Doors) refuse(s *session, p identity.Principal, silent *time.Timer) {
	// A client that says nothing, or reads nothing, is not waited for.
	t := time.AfterFunc(5*time.Second, s.abort)
	defer t.Stop()
	var id json.RawMessage = json.RawMessage("null")
	sc := bufio.NewScanner(s)
	sc.Buffer(make([]byte, 4096), 1<<20)
	if sc.Scan() {
		silent.Stop()
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &req) == nil && len(req.ID) > 0 {
			id = req.ID
		}
	}
	msg := fmt.Sprintf("permission_denied: %s (uid %d) has no role on this device; an admin maps it in [roles] of %s", p.Name, p.UID, config.DefaultPath)
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32001, "message": msg, "data": map[string]any{"error_code": errcode.PermissionDenied}}})
	_, _ = s.Write(append(resp, '\n'))
}

var _ io.ReadWriteCloser = (*session)(nil)

package webguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrCut is what a write to a response cut for a bound returns.
var ErrCut = errors.New("webguard: response cut: its client does not read it")

// errClosed is what a write after Close returns.
var errClosed = errors.New("webguard: write after the handler returned")

// QueueLimits bound what a Queued response may hold for its client.
type QueueLimits struct {
	// Bytes bounds what one response holds queued: a write that would
	// take it past, while something already waits, cuts the response. A
	// single write larger than Bytes passes when nothing else waits.
	Bytes int64
	// Add, when set, counts bytes queued (negative: written or dropped)
	// across responses and returns the new total; Total bounds that total
	// as Bytes bounds one response's.
	Add   func(n int64) int64
	Total int64
	// Deadline bounds each write and flush to the client, and the drain of
	// what is queued when the handler returns.
	Deadline time.Duration
}

// Queued is a ResponseWriter whose Write and Flush never wait for the
// client: they queue what the handler writes, and one goroutine of the
// response's own hands it to the real ResponseWriter in order, each write
// and flush within Limits.Deadline. So a handler that writes a stream
// while holding a lock others need (go-sdk writes each SSE event under its
// stream's lock, and notifies sessions one after another) is never held by
// a client that stops reading: only that client's response waits.
//
// Past the queue's bounds, or when a write to the client fails or times
// out, the response is cut: what is queued is dropped, the connection's
// write deadline is set to now (which ends a write that waits), cancel is
// called (which ends the handler's context, and with it a stream) and
// later writes return ErrCut. onCut, when set, is told why, once and on a
// goroutine of its own, for a cut that is the client's doing (not for a
// client that went away).
//
// The handler's status and headers reach the real writer at once: it
// buffers them and writes nothing to the network until the first body
// bytes, which the writer goroutine sends. Close must be called when the
// handler returns, before the real writer becomes invalid.
type Queued struct {
	w      http.ResponseWriter
	h      http.Header
	rc     *http.ResponseController
	lim    QueueLimits
	cancel context.CancelFunc
	onCut  func(why string)

	mu      sync.Mutex
	cond    sync.Cond
	q       []chunk
	queued  int64 // bytes in q and being written
	wrote   bool  // the status has reached w
	started bool  // the writer goroutine runs (or ran)
	closing bool  // the handler returned: write what is queued, then stop
	dead    bool  // cut, or the client is gone: no more writes
	err     error // what writes return once dead
	done    chan struct{}
	cutOnce sync.Once
}

// chunk is one Write, and whether a Flush came after it.
type chunk struct {
	b     []byte
	flush bool
}

// NewQueued wraps w. Call it on the handler's goroutine, before anything
// is written to w.
func NewQueued(w http.ResponseWriter, lim QueueLimits, cancel context.CancelFunc, onCut func(why string)) *Queued {
	q := &Queued{w: w, rc: http.NewResponseController(w), lim: lim, cancel: cancel, onCut: onCut, done: make(chan struct{})}
	q.cond.L = &q.mu
	// The header map, taken now: net/http then snapshots it at
	// WriteHeader, and the handler's later Header calls do not touch the
	// real writer while the writer goroutine uses it.
	q.h = w.Header()
	return q
}

// Header is the real writer's header map.
func (q *Queued) Header() http.Header { return q.h }

// WriteHeader passes the status to the real writer, which holds it until
// the first body bytes. Informational (1xx) statuses, which net/http would
// write at once, are dropped: the MCP handler sends none.
func (q *Queued) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.writeHeaderLocked(code)
}

// writeHeaderLocked: nothing is queued before the status has been passed,
// so the writer goroutine does not use w meanwhile.
func (q *Queued) writeHeaderLocked(code int) {
	if q.wrote {
		return
	}
	q.wrote = true
	q.w.WriteHeader(code)
}

// Write queues a copy of p for the client; it does not wait for it.
func (q *Queued) Write(p []byte) (int, error) {
	n := int64(len(p))
	q.mu.Lock()
	if q.dead {
		err := q.err
		q.mu.Unlock()
		return 0, err
	}
	q.writeHeaderLocked(http.StatusOK)
	if n == 0 {
		q.mu.Unlock()
		return 0, nil
	}
	var why string
	if q.queued > 0 {
		if q.queued+n > q.lim.Bytes {
			why = fmt.Sprintf("its client left %d bytes unread and %d more came, past a response's queue bound of %d bytes", q.queued, n, q.lim.Bytes)
		} else if q.lim.Add != nil {
			if total := q.lim.Add(0); total+n > q.lim.Total {
				why = fmt.Sprintf("its client left %d bytes unread while all clients' unread answers (%d bytes) passed their bound of %d bytes", q.queued, total, q.lim.Total)
			}
		}
	}
	if why != "" {
		q.cutLocked(ErrCut)
		q.mu.Unlock()
		q.finishCut(why)
		return 0, ErrCut
	}
	q.q = append(q.q, chunk{b: append([]byte(nil), p...)})
	q.queued += n
	if q.lim.Add != nil {
		q.lim.Add(n)
	}
	q.startLocked()
	q.cond.Signal()
	q.mu.Unlock()
	return len(p), nil
}

// FlushError asks the writer goroutine to flush after what is queued; it
// does not wait for it. It is what http.ResponseController.Flush calls.
func (q *Queued) FlushError() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead {
		return q.err
	}
	q.writeHeaderLocked(http.StatusOK)
	if len(q.q) > 0 {
		q.q[len(q.q)-1].flush = true
	} else {
		q.q = append(q.q, chunk{flush: true})
	}
	q.startLocked()
	q.cond.Signal()
	return nil
}

// Flush is http.Flusher's.
func (q *Queued) Flush() { _ = q.FlushError() }

// Unwrap is for http.ResponseController, for what Queued does not do
// itself (deadlines, hijacking). Writing to the unwrapped writer bypasses
// the queue, and races with it.
func (q *Queued) Unwrap() http.ResponseWriter { return q.w }

func (q *Queued) startLocked() {
	if !q.started {
		q.started = true
		go q.writeLoop()
	}
}

// writeLoop hands the queue to the real writer, in order, until the
// response is dead, or closing with nothing left.
func (q *Queued) writeLoop() {
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.q) == 0 && !q.closing && !q.dead {
			q.cond.Wait()
		}
		if q.dead || len(q.q) == 0 {
			q.mu.Unlock()
			return
		}
		c := q.q[0]
		q.q[0] = chunk{}
		q.q = q.q[1:]
		// Armed under mu: a cut, which sets the deadline to now under mu
		// too, cannot be undone by this.
		_ = q.rc.SetWriteDeadline(time.Now().Add(q.lim.Deadline))
		q.mu.Unlock()
		var err error
		if len(c.b) > 0 {
			_, err = q.w.Write(c.b)
		}
		if err == nil && c.flush {
			err = q.rc.Flush()
		}
		q.mu.Lock()
		q.queued -= int64(len(c.b))
		if q.lim.Add != nil {
			q.lim.Add(-int64(len(c.b)))
		}
		if q.dead {
			q.mu.Unlock()
			return
		}
		if err == nil {
			// Between writes no deadline is armed: a stream may idle.
			_ = q.rc.SetWriteDeadline(time.Time{})
			q.mu.Unlock()
			continue
		}
		q.cutLocked(err)
		q.mu.Unlock()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			q.finishCut(fmt.Sprintf("its client read nothing for %s", q.lim.Deadline))
		} else {
			q.finishCut("") // the client went away: nothing to report
		}
		return
	}
}

// cutLocked marks the response dead, drops what is queued and ends a
// write that waits.
func (q *Queued) cutLocked(err error) {
	if q.dead {
		return
	}
	q.dead, q.err = true, err
	var dropped int64
	for _, c := range q.q {
		dropped += int64(len(c.b))
	}
	q.q = nil
	q.queued -= dropped
	if q.lim.Add != nil {
		q.lim.Add(-dropped)
	}
	if q.started {
		_ = q.rc.SetWriteDeadline(time.Now())
	}
	q.cond.Broadcast()
}

// finishCut ends the handler's context and reports a cut, once.
func (q *Queued) finishCut(why string) {
	if q.cancel != nil {
		q.cancel()
	}
	if why != "" && q.onCut != nil {
		// On a goroutine of its own: a write may be cut while its caller
		// holds a lock others need, and reporting may write the disk.
		q.cutOnce.Do(func() { go q.onCut(why) })
	}
}

// Close is for when the handler has returned: it waits until what is
// queued has been written, for at most Limits.Deadline (past it the
// response is cut), and then arms the deadline for what the server writes
// after the handler (the end of a chunked body). The real writer is not
// used by Queued after Close returns.
func (q *Queued) Close() {
	q.mu.Lock()
	q.closing = true
	started := q.started
	q.cond.Broadcast()
	q.mu.Unlock()
	if started {
		t := time.AfterFunc(q.lim.Deadline, func() {
			q.mu.Lock()
			dead := q.dead
			q.cutLocked(ErrCut)
			q.mu.Unlock()
			if !dead {
				q.finishCut(fmt.Sprintf("its client did not read the end of its answer within %s", q.lim.Deadline))
			}
		})
		<-q.done
		t.Stop()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = true
	if q.err == nil {
		q.err = errClosed
		_ = q.rc.SetWriteDeadline(time.Now().Add(q.lim.Deadline))
	}
}

// Queued reports the bytes the response holds for its client now.
func (q *Queued) Queued() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

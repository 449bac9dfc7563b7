package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// JSON-RPC's codes for a message that is not JSON and one that is not a
// valid request.
const (
	parseError     = -32700
	invalidRequest = -32600
)

// lineFilter is what the session's transport (lineTransport) reads an
// agent connection through, a line at a time. It hands every line on
// unchanged, except three kinds it answers itself:
//
//   - a request whose id go-sdk cannot carry back (a fraction, an exponent,
//     an integer beyond ±2^53, a lone surrogate, null, a boolean, an object):
//     go-sdk would answer it under another id (123456789012345678901234567890
//     as -9223372036854775808) or end the session, and the client would wait
//     for an answer that never comes. It is answered with -32600 and a
//     message that says why, under the id exactly as sent, and is not run.
//     We refuse rather than echo: echoing means swapping the id for one
//     go-sdk can carry and swapping it back in every answer, a second id
//     space that must never collide with the client's own; and MCP itself
//     says a request id is a string or an integer, so no conforming client
//     loses anything. A batch holding such a request is refused whole, one
//     error per request in it. A response (from the client) with such an id
//     answers nothing the agent asked, so it is dropped.
//   - a line longer than rpcid.MaxLine, the bridge's limit too: answered
//     with -32600 under a null id (the id cannot be known without reading
//     it all), then the connection ends, since the rest of the line cannot
//     be told from the next message.
//   - a line that opens an object or array it does not close: MCP messages
//     are one line each (go-sdk's own stream decoder would wait for the
//     rest with every later line, a session wedged without a word).
//     Answered with -32700 under a null id, then the connection ends.
//
// It bounds what a client may ask at once, before go-sdk sees the request
// (the numbers are config.Sessions'):
//
//   - a request that would take the session's requests in flight (handed
//     on and not yet answered, owed) past maxInFlight, or a batch whose
//     requests would, is not run: answered with resource_exhausted (-32000,
//     retryable). Responses (to the agent's own requests, elicitation) and
//     notifications always pass, so a full session can finish what it has
//     in flight.
//   - a batch of more than maxBatch messages is refused whole, one error per
//     request in it.
//
// It also holds back the end of the input until every request it handed on
// has been answered (owed), or grace has passed, or done is closed: go-sdk
// would drop those answers (rpcid.Owed). An open-ended request, a
// subscriptions/listen that a 2026-07-28 client (Claude Code, Copilot CLI,
// the Inspector) opens for the session's life, is not waited for: it ends
// only when the client cancels it or leaves, and a client that has closed
// its input is gone, so waiting for it would hold every such session for
// the whole grace. It still counts among the requests in flight.
//
// Everything else, well-formed or not, is left to the transport and
// go-sdk, which answer or end the session as go-sdk's IOTransport does. The
// check is one scan of the line's top level (rpcid.Scan), no decoding, and
// a line that fits the read buffer is handed on from it without being
// copied here first.
type lineFilter struct {
	conn io.ReadWriteCloser // answers are written straight to it; a net.Conn serialises concurrent Writes
	br   *bufio.Reader
	log  *slog.Logger
	long []byte // a line longer than br's buffer, assembled
	err  error  // returned by next from then on
	msgs []rpcid.Message
	owed *rpcid.Owed     // nil: the end of the input is not held back, nor requests in flight bounded
	done <-chan struct{} // closed when the session ends: stop holding back

	grace time.Duration // how long the end of the input is held back at most
	ended func()        // nil, or called once the input has ended, before the wait (tests)

	maxInFlight int    // 0: no bound
	maxBatch    int    // 0: no bound
	firstLine   func() // called once, when the first whole line has been read
}

func newLineFilter(conn io.ReadWriteCloser, owed *rpcid.Owed, log *slog.Logger) *lineFilter {
	return &lineFilter{conn: conn, br: bufio.NewReaderSize(conn, 64<<10), log: log, owed: owed, grace: drainGrace}
}

// next returns the next line that goes on to go-sdk, valid until the next
// call; at the end of the input it first waits as drain says.
func (f *lineFilter) next() ([]byte, error) {
	for {
		if f.err != nil {
			if f.err == io.EOF {
				f.drain()
			}
			return nil, f.err
		}
		line, err := f.readLine()
		if f.firstLine != nil && len(line) > 0 && line[len(line)-1] == '\n' {
			f.firstLine()
			f.firstLine = nil
		}
		ok := len(line) > 0 && f.pass(line)
		if err != nil {
			f.err = err
		}
		if ok {
			return line, nil
		}
	}
}

func (f *lineFilter) Close() error { return f.conn.Close() }

// drain waits, once, until no answer is awaited (open-ended requests are
// not), grace has passed or done is closed.
func (f *lineFilter) drain() {
	o := f.owed
	if o == nil {
		return
	}
	f.owed = nil
	if f.ended != nil {
		f.ended()
	}
	t := time.NewTimer(f.grace)
	defer t.Stop()
	for o.Awaited() > 0 {
		select {
		case <-o.Drained():
		case <-t.C:
			f.log.Info("input ended with answers still owed after the grace", "owed", o.Awaited(), "grace", f.grace)
			return
		case <-f.done:
			return
		}
	}
}

// readLine returns the next line, newline included (the last one may lack
// it). The slice is valid until the next call.
func (f *lineFilter) readLine() ([]byte, error) {
	if cap(f.long) > 1<<20 {
		f.long = nil // do not keep a big line's buffer for the life of the session
	}
	b, err := f.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, err
	}
	f.long = append(f.long[:0], b...)
	for {
		b, err = f.br.ReadSlice('\n')
		f.long = append(f.long, b...)
		if len(f.long) > rpcid.MaxLine {
			msg := fmt.Sprintf("agent: message longer than %d bytes; the session ends", rpcid.MaxLine)
			f.log.Info("closing connection: message too long", "limit", rpcid.MaxLine)
			_, _ = f.conn.Write(append(rpcid.AppendError(nil, nil, invalidRequest, msg, invalidArgumentData), '\n'))
			f.long = nil
			return nil, fmt.Errorf("agent: message longer than %d bytes", rpcid.MaxLine)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return f.long, err
		}
	}
}

var invalidArgumentData = []byte(`{"error_code":"` + errcode.InvalidArgument + `"}`)

// pass reports whether line goes on to go-sdk; if not, it has been
// answered (or, for a response, dropped) here.
func (f *lineFilter) pass(line []byte) bool {
	msgs, batch, ok := rpcid.Scan(line, f.msgs)
	f.msgs = msgs
	if !ok {
		if rpcid.Split(line) {
			f.log.Info("closing connection: a message does not end on its line")
			_, _ = f.conn.Write(append(rpcid.AppendError(nil, nil, parseError,
				"agent: parse error: the message does not end on its line (each MCP message is one line); the session ends", invalidArgumentData), '\n'))
			f.err = errors.New("agent: a message does not end on its line")
			return false
		}
		return true
	}
	refuse := false
	for _, m := range msgs {
		if m.ID == nil {
			continue
		}
		switch v, _ := rpcid.Check(m.ID); v {
		case rpcid.Invalid:
			return true // not JSON: go-sdk refuses the whole line
		case rpcid.Refused, rpcid.RefusedNull:
			refuse = true
		}
	}
	if !refuse {
		if why := f.overBound(msgs, batch); why != "" {
			return f.refuseAll(msgs, batch, why)
		}
		if f.owed != nil {
			for _, m := range msgs {
				switch {
				case m.OpenEnded():
					f.owed.AddOpenEnded(m.ID)
				case m.Request():
					f.owed.Add(m.ID) // Check said Echoed: nothing else is left here
				}
			}
		}
		return true
	}
	var out []byte
	n := 0
	for _, m := range msgs {
		if !m.Request() {
			continue
		}
		v, why := rpcid.Check(m.ID)
		id := m.ID
		switch v {
		case rpcid.Echoed:
			why = "it came in a batch with a request whose id this server cannot carry back unchanged"
		case rpcid.RefusedNull:
			id = nil
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = rpcid.AppendError(out, id, invalidRequest, "agent: invalid request, not run: "+why, invalidArgumentData)
	}
	return f.answer(out, n, batch, "refused a request id")
}

// overBound says why the requests of one line may not run now, or "".
func (f *lineFilter) overBound(msgs []rpcid.Message, batch bool) string {
	if batch && f.maxBatch > 0 && len(msgs) > f.maxBatch {
		return fmt.Sprintf("resource_exhausted: a batch of %d messages is refused whole, not run: the bound is %d ([sessions] max_batch); send smaller batches", len(msgs), f.maxBatch)
	}
	if f.owed == nil || f.maxInFlight <= 0 {
		return ""
	}
	reqs := 0
	for _, m := range msgs {
		if m.Request() {
			reqs++
		}
	}
	if reqs == 0 {
		return "" // responses and notifications always pass
	}
	if n := f.owed.Count(); n+reqs > f.maxInFlight {
		return fmt.Sprintf("resource_exhausted: %d requests of this session are in flight and its bound is %d ([sessions] in_flight); not run, retry once an answer has come", n, f.maxInFlight)
	}
	return ""
}

// refuseAll answers every request of a line with a resource_exhausted error
// that says why, and runs none of them.
func (f *lineFilter) refuseAll(msgs []rpcid.Message, batch bool, why string) bool {
	var out []byte
	n := 0
	for _, m := range msgs {
		if !m.Request() {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		id := m.ID
		if v, _ := rpcid.Check(id); v != rpcid.Echoed {
			id = nil
		}
		out = rpcid.AppendError(out, id, busyCode, "agent: "+why, busyData)
	}
	return f.answer(out, n, batch, "refused requests over a bound")
}

// answer writes the n errors in out, as a batch if the line was one, for
// a line that does not go on to go-sdk; with none, the line (responses
// only) is dropped.
func (f *lineFilter) answer(out []byte, n int, batch bool, what string) bool {
	if n == 0 {
		f.log.Debug("dropped a line that answers nothing the agent asked or holds no request", "what", what)
		return false
	}
	if batch {
		out = append(append([]byte{'['}, out...), ']')
	}
	f.log.Debug(what, "requests", n)
	if _, err := f.conn.Write(append(out, '\n')); err != nil {
		f.err = err
	}
	return false
}

// Package bridge connects a client's stdin/stdout (an `ssh -T pi raspi-mcp
// stdio` session) to the agent socket. Where stdin and stdout are pipes or
// sockets, as sshd and MCP clients make them, it hands them to the agent and
// waits (Hand, internal/handover). Otherwise it copies MCP's
// newline-delimited JSON-RPC both ways (Run).
//
// Run is a byte bridge with one piece of knowledge: which requests are still
// unanswered. go-sdk v1.8.0 drops responses still in flight when its input
// reaches EOF (go-sdk issue #1061), so when the client closes stdin the bridge
// keeps the agent side open until every request it forwarded has its
// response, or a grace period ends, and only then half-closes.
//
// It counts only requests the agent will answer under the id they were
// sent with, and matches answers by value, not spelling: the agent and the
// bridge find ids the same way (internal/rpcid), so a request the agent
// answers under a null id, or takes for a notification, is never waited for.
package bridge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/rawio"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// MaxLine bounds one JSON-RPC message, its newline included; the agent
// applies the same limit.
const MaxLine = rpcid.MaxLine

// Grace is how long a session waits, after the client closed stdin, for the
// answers still owed to it, and then for the agent to close.
const Grace = 10 * time.Second

// Run copies until the agent closes its side or, after stdin ends, every
// forwarded request has been answered (or grace has passed). Only protocol
// bytes reach stdout. Run takes conn over and closes it; stdin and stdout
// stay open.
func Run(stdin io.Reader, stdout io.Writer, conn *net.UnixConn, grace time.Duration) error {
	in, out := stdin, stdout
	var closes, restores []func()
	defer func() {
		// All closed before any mode is put back: stdin and stdout may be
		// one socket, and share its mode.
		for _, f := range closes {
			f()
		}
		for _, f := range restores {
			f()
		}
	}()
	if f, ok := stdin.(*os.File); ok {
		rw, c, r := rawio.Stdio(f)
		in, closes, restores = rw, append(closes, c), append(restores, r)
	}
	if f, ok := stdout.(*os.File); ok {
		rw, c, r := rawio.Stdio(f)
		out, closes, restores = rw, append(closes, c), append(restores, r)
	}
	agent := rawio.TakeUnix(conn)
	defer agent.Close()
	o := newOwed()
	upDone := make(chan error, 1)
	go func() { upDone <- copyLines(in, agent, o.sent) }()
	downDone := make(chan error, 1)
	go func() { downDone <- copyLines(agent, out, o.Answered) }()

	select {
	case err := <-downDone:
		// The agent closed: nothing more can come back.
		return err
	case err := <-upDone:
		if err != nil {
			agent.Close()
			return fmt.Errorf("bridge: reading stdin: %w", err)
		}
	}
	// stdin ended: wait for outstanding responses, then half-close so the
	// agent ends the session, and copy whatever it still sends.
	timer := time.NewTimer(grace)
	defer timer.Stop()
wait:
	// An open subscriptions/listen is not awaited: it ends only when the
	// client leaves, which it just did.
	for o.Awaited() > 0 {
		select {
		case <-o.Drained():
		case err := <-downDone:
			return err
		case <-timer.C:
			break wait
		}
	}
	_ = agent.CloseWrite()
	select {
	case err := <-downDone:
		return err
	case <-time.After(grace):
		agent.Close()
		return errors.New("bridge: the agent did not close the session")
	}
}

// owed is the set of requests forwarded to the agent and not yet
// answered.
type owed struct {
	*rpcid.Owed
	upMsgs []rpcid.Message // sent's scan buffer (one goroutine reads stdin)
}

func newOwed() *owed { return &owed{Owed: rpcid.NewOwed()} }

// sent records the requests of a line from the client that the agent
// answers under the id as sent: those whose id it can carry back, and
// those it refuses with that id. Requests it answers under a null id and
// lines it cannot read (it ends the session) are not counted.
func (o *owed) sent(line []byte) {
	msgs, _, ok := rpcid.Scan(line, o.upMsgs)
	o.upMsgs = msgs
	if !ok {
		return
	}
	for _, m := range msgs {
		if !m.Request() {
			continue
		}
		if v, _ := rpcid.Check(m.ID); v == rpcid.Echoed || v == rpcid.Refused {
			if m.OpenEnded() {
				o.AddOpenEnded(m.ID)
			} else {
				o.Add(m.ID)
			}
		}
	}
}

// copyLines copies the newline-delimited messages of r to w, showing each
// to seen first. Lines are written whole and straight from the read
// buffer; lines read together are written together; and all is written
// before a read that may wait: a message is never held back, and a burst
// costs one write.
func copyLines(r io.Reader, w io.Writer, seen func([]byte)) error {
	var run []byte // lines handed over and not yet written: one stretch of the read buffer
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		_, err := w.Write(run)
		run = nil
		if err != nil {
			return err
		}
		if f, ok := w.(interface{ Flush() error }); ok {
			return f.Flush()
		}
		return nil
	}
	return eachLine(r, func(line []byte) error {
		seen(line)
		if n := len(run); n > 0 && cap(run) > n && &run[:n+1][n] == &line[0] {
			run = run[:n+len(line)] // the next line in the buffer
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		run = line
		return nil
	}, flush)
}

// eachLine calls fn with every non-blank newline-terminated line of r
// (newline included; a last line without one gets one), and idle before
// every read that may wait and before it returns. A line is handed over in
// place, without a copy, and stays as it is until idle is called. A line
// longer than MaxLine, newline included, is an error.
func eachLine(r io.Reader, fn func([]byte) error, idle func() error) error {
	const size = 64 << 10
	var (
		buf        = make([]byte, size)
		start, end int   // buf[start:end] is read and not yet handed over
		scanned    int   // buf[start:start+scanned] holds no newline
		rerr       error // from the last read, seen once its bytes are handed over
	)
	for {
		if i := bytes.IndexByte(buf[start+scanned:end], '\n'); i >= 0 {
			line := buf[start : start+scanned+i+1]
			start += scanned + i + 1
			scanned = 0
			if !blank(line) {
				if err := fn(line); err != nil {
					return err
				}
			}
			continue
		}
		scanned = end - start
		if scanned >= MaxLine {
			if err := idle(); err != nil {
				return err
			}
			return fmt.Errorf("bridge: message longer than %d bytes", MaxLine)
		}
		if rerr != nil {
			if rest := buf[start:end]; rerr == io.EOF && !blank(rest) {
				if err := fn(append(rest, '\n')); err != nil {
					return err
				}
			}
			if err := idle(); err != nil {
				return err
			}
			if rerr == io.EOF || errors.Is(rerr, net.ErrClosed) {
				return nil
			}
			return rerr
		}
		if err := idle(); err != nil {
			return err
		}
		// Make room: the partial line moves to the front; a buffer it
		// fills grows, up to MaxLine, and a grown one is let go once a
		// long line is through.
		switch {
		case start == end && len(buf) > size:
			buf = make([]byte, size)
			start, end = 0, 0
		case start == end:
			start, end = 0, 0
		case end == len(buf):
			if start == 0 {
				buf = append(make([]byte, 0, min(2*len(buf), MaxLine)), buf...)
				buf = buf[:cap(buf)]
			} else {
				end = copy(buf, buf[start:end])
				start = 0
			}
		}
		var n int
		n, rerr = r.Read(buf[end:])
		end += n
	}
}

func blank(line []byte) bool { return len(bytes.TrimSpace(line)) == 0 }

// Session serves one `raspi-mcp stdio` session over conn: stdin and stdout
// handed to the agent where they can be (Hand), copied otherwise (Run).
func Session(stdin, stdout *os.File, conn *net.UnixConn) error {
	if handed, err := Hand(stdin, stdout, conn); handed {
		return err
	}
	return Run(stdin, stdout, conn, Grace)
}

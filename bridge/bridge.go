// Package bridge copies MCP's newline-delimited JSON-RPC between a client's
// stdin/stdout (an `ssh -T pi raspi-mcp stdio` session) and the agent socket.
//
// It is a byte bridge with one piece of knowledge: which requests are still
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
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// MaxLine bounds one JSON-RPC message; the agent applies the same limit.
const MaxLine = rpcid.MaxLine

// Grace is how long a session waits, after the client closed stdin, for the
// answers still owed to it, and then for the agent to close.
const Grace = 10 * time.Second

// Run copies until the agent closes its side or, after stdin ends, every
// forwarded request has been answered (or grace has passed). Only protocol
// bytes reach stdout.
func Run(stdin io.Reader, stdout io.Writer, conn *net.UnixConn, grace time.Duration) error {
	var (
		mu      sync.Mutex
		pending = map[string]bool{}
		drained = make(chan struct{}, 1)
	)
	signal := func() {
		select {
		case drained <- struct{}{}:
		default:
		}
	}
	upDone := make(chan error, 1)
	go func() {
		upDone <- eachLine(stdin, func(line []byte) error {
			for _, id := range requestIDs(line) {
				mu.Lock()
				pending[id] = true
				mu.Unlock()
			}
			_, err := conn.Write(line)
			return err
		})
	}()
	downDone := make(chan error, 1)
	go func() {
		downDone <- eachLine(conn, func(line []byte) error {
			if _, err := stdout.Write(line); err != nil {
				return err
			}
			if f, ok := stdout.(interface{ Flush() error }); ok {
				if err := f.Flush(); err != nil {
					return err
				}
			}
			if ids := responseIDs(line); len(ids) > 0 {
				mu.Lock()
				for _, id := range ids {
					delete(pending, id)
				}
				n := len(pending)
				mu.Unlock()
				if n == 0 {
					signal()
				}
			}
			return nil
		})
	}()

	select {
	case err := <-downDone:
		// The agent closed: nothing more can come back.
		return err
	case err := <-upDone:
		if err != nil {
			conn.Close()
			return fmt.Errorf("bridge: reading stdin: %w", err)
		}
	}
	// stdin ended: wait for outstanding responses, then half-close so the
	// agent ends the session, and copy whatever it still sends.
	timer := time.NewTimer(grace)
	defer timer.Stop()
wait:
	for {
		mu.Lock()
		n := len(pending)
		mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-drained:
		case err := <-downDone:
			return err
		case <-timer.C:
			break wait
		}
	}
	_ = conn.CloseWrite()
	select {
	case err := <-downDone:
		return err
	case <-time.After(grace):
		conn.Close()
		return errors.New("bridge: the agent did not close the session")
	}
}

// eachLine calls fn with every newline-terminated message (newline
// included). A line that fits the reader's buffer is handed over in place,
// without a copy; fn must not keep it.
func eachLine(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte // a line longer than br's buffer, being put together
	for {
		chunk, err := br.ReadSlice('\n')
		line := chunk
		if len(buf) > 0 || err == bufio.ErrBufferFull {
			buf = append(buf, chunk...)
			line = buf
		}
		switch {
		case err == bufio.ErrBufferFull:
			if len(buf) > MaxLine {
				return fmt.Errorf("bridge: message longer than %d bytes", MaxLine)
			}
			continue
		case err == io.EOF:
			if len(bytes.TrimSpace(line)) > 0 {
				return fn(append(line[:len(line):len(line)], '\n'))
			}
			return nil
		case err != nil:
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if err := fn(line); err != nil {
				return err
			}
		}
		buf = buf[:0]
		if cap(buf) > 64<<10 {
			buf = nil // a rare long line does not keep its memory
		}
	}
}

// requestIDs are the keys (rpcid.Key) of the client requests in a line
// that the agent answers under the id as sent: those whose id it can carry
// back, and those it refuses with that id. Requests it answers under a null
// id and lines it cannot read (it ends the session) are not counted.
func requestIDs(line []byte) []string {
	msgs, _, ok := rpcid.Scan(line, nil)
	if !ok {
		return nil
	}
	var ids []string
	for _, m := range msgs {
		if !m.Request() {
			continue
		}
		if v, _ := rpcid.Check(m.ID); v == rpcid.Echoed || v == rpcid.Refused {
			ids = append(ids, rpcid.Key(m.ID))
		}
	}
	return ids
}

// responseIDs are the keys of the responses (an id, no method) in a line.
func responseIDs(line []byte) []string {
	msgs, _, ok := rpcid.Scan(line, nil)
	if !ok {
		return nil
	}
	var ids []string
	for _, m := range msgs {
		if !m.Method && m.ID != nil {
			ids = append(ids, rpcid.Key(m.ID))
		}
	}
	return ids
}

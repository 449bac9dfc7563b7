package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/segmentio/encoding/json"
)

// lineTransport is the MCP transport of a session on the agent socket:
// newline-delimited JSON-RPC, as mcp.IOTransport speaks it, read from the
// session's lineFilter and written to the session.
//
// It is ours rather than mcp.IOTransport for what a message costs. go-sdk
// v1.8.0 decodes every line it reads three times with a streaming decoder
// that allocates and zeroes a fresh 32 KiB buffer each time (a batch
// probe, the envelope, the method name; docs/go-sdk-json-allocations.md),
// and marshals every answer's envelope with encoding/json, which compacts
// the result it already compacted once more. Here the envelope is parsed
// once, with the same library (segmentio/encoding) and the same flags as
// go-sdk, straight from the line, and an answer's envelope is written
// around its result's bytes. What a well-formed line becomes, and which
// malformed lines end the session, is what go-sdk's IOTransport does
// (TestMalformedInputOnTheAgentSocket holds both to it), with one
// difference: a notification in a batch is not counted as owed an answer
// (go-sdk waits for answers to notifications, so a batch holding one is
// never answered, and two of them are refused as duplicate ids).
type lineTransport struct {
	in  *lineFilter
	out io.Writer // one Write per message, whole lines: the session strikes answers off what it owes
}

func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{in: t.in, out: t.out, incoming: make(chan lineMsgs), closed: make(chan struct{})}
	// Reads run on a goroutine of their own so that Close can end a Read
	// that waits, as the Connection contract asks.
	go c.readLoop()
	return c, nil
}

// lineMsgs is what one line held, or why reading stopped.
type lineMsgs struct {
	msgs  []jsonrpc.Message
	batch bool
	err   error
}

// lineConn is lineTransport's mcp.Connection.
type lineConn struct {
	in       *lineFilter
	out      io.Writer
	incoming chan lineMsgs
	queue    []jsonrpc.Message // the rest of the last batch; Read is not called concurrently

	mu      sync.Mutex // guards what follows
	initID  jsonrpc.ID // the initialize request's id, until it is answered
	version string     // the negotiated protocol version, once initialize is answered
	batches map[jsonrpc.ID]*answerBatch

	writeMu sync.Mutex // serialises writes; a slow reader holds up no Read
	buf     []byte

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// answerBatch collects the answers to the requests of one incoming batch,
// sent as one array when the last is in.
type answerBatch struct {
	pending int
	answers [][]byte
	slot    map[jsonrpc.ID]int
}

// Batches are not part of MCP from this version on (go-sdk's rule).
const batchlessVersion = "2025-06-18"

func (c *lineConn) readLoop() {
	for {
		var m lineMsgs
		line, err := c.in.next()
		if err != nil {
			m.err = err
		} else if m.msgs, m.batch, m.err = decodeLine(line); m.err == nil && len(m.msgs) == 0 {
			continue // a blank line: go-sdk's stream decoder skips it too
		}
		select {
		case c.incoming <- m:
		case <-c.closed:
			return
		}
		if m.err != nil {
			return
		}
	}
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	var m lineMsgs
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m = <-c.incoming:
	case <-c.closed:
		return nil, io.EOF
	}
	if m.err != nil {
		return nil, m.err
	}
	if m.batch {
		if err := c.addBatch(m.msgs); err != nil {
			return nil, err
		}
	} else if r, ok := m.msgs[0].(*jsonrpc.Request); ok && r.Method == "initialize" && r.IsCall() {
		c.mu.Lock()
		c.initID = r.ID
		c.mu.Unlock()
	}
	c.queue = m.msgs[1:]
	return m.msgs[0], nil
}

// addBatch records the requests of an incoming batch, whose answers go out
// together.
func (c *lineConn) addBatch(msgs []jsonrpc.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version >= batchlessVersion {
		return fmt.Errorf("agent: JSON-RPC batching is not supported in %s and later (session version: %s)", batchlessVersion, c.version)
	}
	b := &answerBatch{slot: map[jsonrpc.ID]int{}}
	for _, m := range msgs {
		r, ok := m.(*jsonrpc.Request)
		if !ok || !r.IsCall() {
			continue
		}
		if _, dup := b.slot[r.ID]; dup {
			return fmt.Errorf("agent: duplicate message id %v in a batch", r.ID.Raw())
		}
		if _, dup := c.batches[r.ID]; dup {
			return fmt.Errorf("agent: batch holds request id %v of a request still running", r.ID.Raw())
		}
		b.slot[r.ID] = len(b.answers)
		b.answers = append(b.answers, nil)
	}
	if len(b.answers) == 0 {
		return nil
	}
	b.pending = len(b.answers)
	if c.batches == nil {
		c.batches = map[jsonrpc.ID]*answerBatch{}
	}
	for id := range b.slot {
		c.batches[id] = b
	}
	return nil
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		// Requests and notifications to the client are rare: go-sdk's
		// encoder makes their lines.
		data, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		return c.writeLine(data)
	}
	batch := c.answered(resp)
	if batch == nil {
		return c.writeAnswer(resp)
	}
	b, err := appendResponse(nil, resp)
	if err != nil {
		return err
	}
	if b = c.collect(batch, resp.ID, b); b == nil {
		return nil // the batch still waits for other answers
	}
	return c.writeLine(b)
}

// answered notes an answer to initialize, and returns the batch resp
// belongs to, if any.
func (c *lineConn) answered(resp *jsonrpc.Response) *answerBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initID.IsValid() && resp.ID == c.initID {
		c.initID = jsonrpc.ID{}
		c.version = negotiated(resp)
	}
	return c.batches[resp.ID]
}

// collect keeps b, the answer to the request id of batch, and returns the
// batch's answer once it has all of them, nil before.
func (c *lineConn) collect(batch *answerBatch, id jsonrpc.ID, b []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.batches, id)
	batch.answers[batch.slot[id]] = b
	if batch.pending--; batch.pending > 0 {
		return nil
	}
	return append(append([]byte{'['}, bytes.Join(batch.answers, []byte{','})...), ']')
}

// writeAnswer writes resp on a line of its own.
func (c *lineConn) writeAnswer(resp *jsonrpc.Response) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	b, err := appendResponse(c.buf[:0], resp)
	if err != nil {
		return err
	}
	return c.flush(append(b, '\n'))
}

// writeLine writes data on a line of its own.
func (c *lineConn) writeLine(data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.flush(append(append(c.buf[:0], data...), '\n'))
}

// flush writes b, one whole line, in one Write; called with writeMu held.
func (c *lineConn) flush(b []byte) error {
	_, err := c.out.Write(b)
	c.buf = b
	if cap(b) > 64<<10 {
		c.buf = nil // a big answer's buffer is not kept for the session's life
	}
	return err
}

// negotiated is the protocol version an answer to initialize settles, as
// go-sdk reads it: 2025-03-26 if it names none.
func negotiated(resp *jsonrpc.Response) string {
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if resp.Error == nil {
		_, _ = json.Parse(resp.Result, &r, json.DontMatchCaseInsensitiveStructFields)
	}
	if r.ProtocolVersion == "" {
		return "2025-03-26"
	}
	return r.ProtocolVersion
}

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = c.in.Close()
	})
	return c.closeErr
}

func (c *lineConn) SessionID() string { return "" }

// maxDepth is how deeply a message may nest, go-sdk's limit: deeper input
// ends the session before anything recursive reads it.
const maxDepth = 1000

// decodeLine decodes one line: a message, or a batch of them; a blank
// line holds none.
func decodeLine(line []byte) ([]jsonrpc.Message, bool, error) {
	if err := checkDepth(line); err != nil {
		return nil, false, err
	}
	line = skipSpace(line)
	if len(line) == 0 {
		return nil, false, nil
	}
	if line[0] != '[' {
		m, err := decodeMessage(line, true)
		if err != nil {
			return nil, false, err
		}
		return []jsonrpc.Message{m}, false, nil
	}
	var raws []json.RawMessage
	rest, err := json.Parse(line, &raws, json.DontMatchCaseInsensitiveStructFields|json.DontCopyRawMessage)
	if err != nil {
		return nil, true, fmt.Errorf("agent: unmarshaling jsonrpc batch: %w", err)
	}
	if err := trailing(rest); err != nil {
		return nil, true, err
	}
	if len(raws) == 0 {
		return nil, true, errors.New("agent: empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := decodeMessage(raw, false)
		if err != nil {
			return nil, true, err
		}
		msgs = append(msgs, m)
	}
	return msgs, true, nil
}

// wireMessage is a JSON-RPC message as it arrives, go-sdk's wire form.
type wireMessage struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// decodeMessage decodes one message as go-sdk's jsonrpc.DecodeMessage does,
// without its decoder buffers. Params and Result are copies: the line's
// buffer is read into again while go-sdk still handles the request.
func decodeMessage(data []byte, whole bool) (jsonrpc.Message, error) {
	var w wireMessage
	rest, err := json.Parse(data, &w, json.DontMatchCaseInsensitiveStructFields)
	if err != nil {
		return nil, fmt.Errorf("agent: unmarshaling jsonrpc message: %w", err)
	}
	if whole {
		if err := trailing(rest); err != nil {
			return nil, err
		}
	}
	if w.VersionTag != "2.0" {
		return nil, fmt.Errorf("agent: invalid message version tag %q; expected %q", w.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 { // the key was there; its value may be ""
		var method string
		if _, err := json.Parse(w.Method, &method, json.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("agent: unmarshaling jsonrpc method: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("agent: invalid request: a response without an id")
	}
	r := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		r.Error = w.Error // not a typed nil
	}
	return r, nil
}

// trailing refuses what follows a line's message other than its line end,
// as go-sdk's reader does.
func trailing(rest []byte) error {
	if len(skipSpace(rest)) > 0 {
		return errors.New("agent: invalid trailing data after the message")
	}
	return nil
}

// checkDepth refuses input nested deeper than maxDepth.
func checkDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("agent: message nested deeper than %d", maxDepth)
			}
		case (b == '}' || b == ']') && depth > 0:
			depth--
		}
	}
	return nil
}

func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}

// appendResponse appends resp's wire form, the envelope written around the
// result's bytes (go-sdk compacted them as it made them).
func appendResponse(b []byte, resp *jsonrpc.Response) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0"`...)
	switch id := resp.ID.Raw().(type) {
	case nil:
	case int64:
		b = strconv.AppendInt(append(b, `,"id":`...), id, 10)
	case string:
		b = json.AppendEscape(append(b, `,"id":`...), id, 0)
	default:
		return nil, fmt.Errorf("agent: response id of type %T", id)
	}
	if len(resp.Result) > 0 {
		b = append(b, `,"result":`...)
		if bytes.IndexAny(resp.Result, "\r\n") < 0 {
			b = append(b, resp.Result...)
		} else {
			// Never seen (go-sdk makes results with encoding/json, which
			// compacts), but a line must stay one line.
			var c bytes.Buffer
			if err := json.Compact(&c, resp.Result); err != nil {
				return nil, fmt.Errorf("agent: response result: %w", err)
			}
			b = append(b, c.Bytes()...)
		}
	}
	if resp.Error != nil {
		var err error
		if b, err = json.Append(append(b, `,"error":`...), wireError(resp.Error), 0); err != nil {
			return nil, fmt.Errorf("agent: response error: %w", err)
		}
	}
	return append(b, '}'), nil
}

// wireError is err as go-sdk puts it on the wire: itself if it is a
// jsonrpc.Error, else its message with the code of a jsonrpc.Error it
// wraps.
func wireError(err error) *jsonrpc.Error {
	if w, ok := err.(*jsonrpc.Error); ok {
		return w
	}
	w := &jsonrpc.Error{Message: err.Error()}
	var wrapped *jsonrpc.Error
	if errors.As(err, &wrapped) {
		w.Code = wrapped.Code
	}
	return w
}

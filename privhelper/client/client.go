// Package client is the agent's side of the helper protocol.
//
// A Client dials the helper lazily, says hello once per connection and keeps
// the connection for later calls, which are serialised on it: one connection
// for the quick methods, one for those that wait on systemd, so that a
// minute-long daemon-reload holds up no GPIO write (proto.Class), and one
// for the approval button's wait, which may last many minutes. Any I/O error
// drops the connection so the next call redials: that is how the agent
// survives a helper restart without restarting itself. When the helper is
// down every call fails fast with a retryable "unavailable" *proto.Error
// naming the socket, so a tool call never hangs on a dead helper.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Defaults for Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultDialTimeout = 500 * time.Millisecond
	DefaultClientName  = "raspi-mcp"
)

// Options configures a Client.
type Options struct {
	Socket      string        // path of the helper's Unix socket
	ClientName  string        // sent in hello and logged by the helper, e.g. "raspi-mcp/0.1.0"
	Timeout     time.Duration // per call of a quick method; 0 means DefaultTimeout
	DialTimeout time.Duration // bounds connect plus hello; 0 means DefaultDialTimeout
	// SystemdTimeout and JobTimeout are the helper's bounds on its
	// proto.Systemd and proto.Job methods ([helper] systemd_timeout and
	// job_timeout, which the helper reads from the same config); 0 means
	// proto's defaults. A call of such a method waits that plus
	// proto.ReplyMargin (and never less than Timeout), so the helper's own
	// timeout error, naming the method and its bound, is what the caller
	// sees.
	SystemdTimeout, JobTimeout time.Duration
}

// Client is a connection to the helper, safe for concurrent use. Quick
// methods, the ones that wait on systemd and the approval wait each have
// their own connection (lane): a GPIO write or a status check never
// queues behind a daemon-reload that takes a minute on a loaded Pi Zero,
// nor behind a button.wait that takes as long as the owner does.
type Client struct {
	opts Options

	quick, slow, approval lane

	mu     sync.Mutex // guards each lane's conn, and closed; never held across I/O
	closed bool
}

// lane is one connection and the calls serialised on it.
type lane struct {
	// turn serialises calls on the lane's connection. It is a channel, not
	// a mutex, so a call waiting its turn still honours its context.
	turn   chan struct{}
	nextID uint64   // guarded by turn
	conn   net.Conn // guarded by Client.mu; nil until dialled and after any I/O error
}

func (c *Client) lane(cl proto.Class) *lane {
	switch cl {
	case proto.Quick:
		return &c.quick
	case proto.Approval:
		return &c.approval
	}
	return &c.slow
}

// New returns a Client. It does not dial; the first call does.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ClientName == "" {
		o.ClientName = DefaultClientName
	}
	return &Client{opts: o, quick: lane{turn: make(chan struct{}, 1)}, slow: lane{turn: make(chan struct{}, 1)},
		approval: lane{turn: make(chan struct{}, 1)}}
}

// Call invokes method m with req and returns its result. Parameters are
// validated locally first, with the same rules the helper applies. Errors
// from the helper are *proto.Error values returned as is; a helper that is
// down or unresponsive yields a *proto.Error with Code unavailable and
// Retryable set; a cancelled ctx yields an error wrapping context.Canceled.
func Call[Req, Resp any](ctx context.Context, c *Client, m proto.Method[Req, Resp], req Req) (Resp, error) {
	var out Resp
	if err := c.call(ctx, m.Name, m.Class, req, &out); err != nil {
		var zero Resp
		return zero, err
	}
	return out, nil
}

// call is Call without the types: Call is instantiated once per method, so
// everything that does not need Req and Resp is compiled here, once.
func (c *Client) call(ctx context.Context, name string, class proto.Class, req, out any) error {
	if v, ok := req.(proto.Validator); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	params, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("privhelper/client: encode %s params: %w", name, err)
	}
	timeout := c.Timeout(class)
	if w, ok := req.(proto.Waiter); ok && class == proto.Approval {
		timeout = c.ApprovalTimeout(w.Wait())
	}
	result, err := c.roundTrip(ctx, c.lane(class), name, class, timeout, params)
	if err != nil {
		return err
	}
	if err := proto.Decode(result, out); err != nil {
		return proto.Errorf(proto.CodeInternal, "privhelper/client: %s: bad result from helper at %s: %v", name, c.opts.Socket, err)
	}
	return nil
}

// Close closes the connections, interrupting calls in progress. Calls
// after Close fail with failed_precondition.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := []net.Conn{c.quick.conn, c.slow.conn, c.approval.conn}
	c.quick.conn, c.slow.conn, c.approval.conn = nil, nil, nil
	c.mu.Unlock()
	var errs []error
	for _, conn := range conns {
		if conn != nil {
			errs = append(errs, conn.Close())
		}
	}
	return errors.Join(errs...)
}

// Connected reports whether the client holds a connection that has passed
// hello. It says nothing about whether the helper is still there; the next
// call finds out.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quick.conn != nil || c.slow.conn != nil || c.approval.conn != nil
}

// Timeout is how long a call of a method of class cl waits for the
// helper's answer: Options.Timeout for a quick method, and for a method
// that waits on systemd the helper's bound on it plus proto.ReplyMargin,
// or Options.Timeout if that is longer.
func (c *Client) Timeout(cl proto.Class) time.Duration {
	if cl == proto.Quick {
		return c.opts.Timeout
	}
	if cl == proto.Approval {
		return c.ApprovalTimeout(proto.MaxButtonWait)
	}
	helper := proto.Bounds{Systemd: c.opts.SystemdTimeout, Job: c.opts.JobTimeout}.Of(cl)
	return max(c.opts.Timeout, helper+proto.ReplyMargin)
}

// ApprovalTimeout is how long a call of an Approval method whose request
// waits w waits for the helper's answer: the helper's bound on it
// (proto.ApprovalBound) plus proto.ReplyMargin, so the helper's "timeout"
// answer, or its own error, arrives before the client gives up.
func (c *Client) ApprovalTimeout(w time.Duration) time.Duration {
	return max(c.opts.Timeout, proto.ApprovalBound(w)+proto.ReplyMargin)
}

// roundTrip sends one request and returns the raw result. The approval
// lane does not queue: one wait for the owner at a time is all the helper
// serves, so a second is told at once, as the helper would tell it.
func (c *Client) roundTrip(ctx context.Context, l *lane, method string, class proto.Class, timeout time.Duration, params json.RawMessage) (json.RawMessage, error) {
	if class == proto.Approval {
		select {
		case l.turn <- struct{}{}:
		default:
			return nil, (&proto.Error{Code: proto.CodeUnavailable, Retryable: true,
				Message: fmt.Sprintf("privhelper/client: %s: another call of this agent waits for the approval button; try again when it is answered", method)}).
				With("method", method)
		}
	} else {
		select {
		case l.turn <- struct{}{}:
		case <-ctx.Done():
			return nil, c.ctxError(ctx, method)
		}
	}
	defer func() { <-l.turn }()

	conn, err := c.connect(ctx, l, method)
	if err != nil {
		return nil, err
	}
	l.nextID++
	id := l.nextID
	deadline := time.Now().Add(timeout)
	resp, err := exchange(ctx, conn, deadline, proto.Request{ID: id, Method: method, Params: params})
	if err != nil {
		c.drop(l, conn)
		return nil, c.ioError(ctx, method, err)
	}
	if resp.ID != id {
		c.drop(l, conn)
		if resp.ID == 0 && resp.Error != nil {
			return nil, resp.Error // connection-level error; the helper has closed
		}
		return nil, proto.Errorf(proto.CodeInternal, "privhelper/client: %s: helper at %s answered id %d to request %d", method, c.opts.Socket, resp.ID, id)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	if len(resp.Result) == 0 {
		return nil, proto.Errorf(proto.CodeInternal, "privhelper/client: %s: helper at %s sent neither result nor error", method, c.opts.Socket)
	}
	return resp.Result, nil
}

// connect returns the lane's live connection, dialling and saying hello if
// there is none or the helper has hung up since the last call. method is
// only for error messages. The caller holds l.turn.
func (c *Client) connect(ctx context.Context, l *lane, method string) (net.Conn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.closedError()
	}
	conn := l.conn
	c.mu.Unlock()
	if conn != nil {
		conn.SetDeadline(time.Time{}) // a cancelled call may have left it in the past
		if !peerGone(conn) {
			return conn, nil
		}
		// The helper closed the connection while we were idle (typically a
		// restart). Nothing was sent, so redialling now is safe and spares
		// the caller a spurious unavailable.
		c.drop(l, conn)
	}

	deadline := time.Now().Add(c.opts.DialTimeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, "unix", c.opts.Socket)
	if err != nil {
		return nil, c.ioError(ctx, method, err)
	}
	l.nextID++
	id := l.nextID
	params, err := json.Marshal(proto.HelloReq{Version: proto.Version, Client: c.opts.ClientName})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("privhelper/client: encode hello: %w", err)
	}
	resp, err := exchange(ctx, conn, deadline, proto.Request{ID: id, Method: proto.Hello.Name, Params: params})
	if err != nil {
		conn.Close()
		return nil, c.ioError(ctx, method+": hello", err)
	}
	if resp.Error != nil {
		conn.Close() // permission_denied, failed_precondition (version): the helper closes too
		return nil, resp.Error
	}
	var h proto.HelloResp
	if err := proto.Decode(resp.Result, &h); err != nil || resp.ID != id {
		conn.Close()
		return nil, proto.Errorf(proto.CodeInternal, "privhelper/client: bad hello reply from helper at %s (id %d, %v)", c.opts.Socket, resp.ID, err)
	}
	if h.Version != proto.Version {
		conn.Close()
		return nil, proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper/client: helper at %s speaks protocol version %d, client speaks version %d", c.opts.Socket, h.Version, proto.Version)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil, c.closedError()
	}
	l.conn = conn
	return conn, nil
}

// exchange writes req and reads one response, bounded by deadline and ctx.
// A write error does not stop the read: a helper that refused the peer has
// already queued its error frame, and that is a better answer than EPIPE.
func exchange(ctx context.Context, conn net.Conn, deadline time.Time, req proto.Request) (proto.Response, error) {
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	werr := proto.WriteFrame(conn, req)
	var resp proto.Response
	if rerr := proto.ReadFrame(conn, &resp); rerr != nil {
		if werr != nil {
			return resp, werr
		}
		return resp, rerr
	}
	return resp, nil
}

// drop forgets conn (if it is still the lane's current one) and closes it.
func (c *Client) drop(l *lane, conn net.Conn) {
	c.mu.Lock()
	if l.conn == conn {
		l.conn = nil
	}
	c.mu.Unlock()
	conn.Close()
}

// ioError classifies a dial or I/O failure: the caller's cancellation is
// reported as such, everything else means the helper is unavailable.
func (c *Client) ioError(ctx context.Context, method string, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return c.ctxError(ctx, method)
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return c.closedError()
	}
	return &proto.Error{
		Code:      proto.CodeUnavailable,
		Message:   fmt.Sprintf("privhelper/client: helper at %s is unavailable (%s): %v", c.opts.Socket, method, err),
		Details:   map[string]any{"socket": c.opts.Socket},
		Retryable: true,
	}
}

func (c *Client) ctxError(ctx context.Context, method string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &proto.Error{
			Code:      proto.CodeUnavailable,
			Message:   fmt.Sprintf("privhelper/client: %s via %s: %v", method, c.opts.Socket, ctx.Err()),
			Details:   map[string]any{"socket": c.opts.Socket},
			Retryable: true,
		}
	}
	return fmt.Errorf("privhelper/client: %s via %s: %w", method, c.opts.Socket, ctx.Err())
}

func (c *Client) closedError() error {
	return proto.Errorf(proto.CodeFailedPrecondition, "privhelper/client: client for %s is closed", c.opts.Socket)
}

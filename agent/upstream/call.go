package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Kind classifies an upstream failure for the agent's error mapping.
type Kind int

const (
	// Unavailable: not connected, circuit breaker open, or the connection
	// failed or dropped during the call. Maps to "unavailable".
	Unavailable Kind = iota + 1
	// Timeout: no answer within the per-call timeout. Cancellation was sent
	// upstream, but a write may already have taken effect.
	Timeout
	// Protocol: the upstream answered with a JSON-RPC error (unknown tool,
	// invalid params, ...). See Error.Code.
	Protocol
	// Canceled: the caller's context ended; the cancellation was sent on
	// (notifications/cancelled, and the HTTP request is aborted).
	Canceled
)

func (k Kind) String() string {
	switch k {
	case Unavailable:
		return "unavailable"
	case Timeout:
		return "timeout"
	case Protocol:
		return "protocol"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// Error is every error returned by a Client's calls. A tool result with
// isError set is not an Error: it is returned as a result, because the
// upstream worked and the model should read what it said.
type Error struct {
	Upstream string
	Op       string // e.g. `tools/call "devices_list"`
	Kind     Kind
	// Retryable says whether calling again is safe and may help: never for
	// a write whose effect is unknown.
	Retryable bool
	// MayHaveRun is false only when the request certainly never reached the
	// upstream (it was refused locally or the connection could not be made),
	// so even a write had no effect.
	MayHaveRun bool
	// Code is the JSON-RPC error code for Kind Protocol.
	Code int64
	// RetryAfter is, while the circuit breaker is open, how long until it
	// lets a trial call through.
	RetryAfter time.Duration
	msg        string
	Err        error
}

func (e *Error) Error() string {
	s := "upstream " + e.Upstream + ": "
	if e.Op != "" {
		s += e.Op + ": "
	}
	return s + e.msg
}

func (e *Error) Unwrap() error { return e.Err }

// CallOptions tunes one Call.
type CallOptions struct {
	// ReadOnly marks the tool as safe to repeat: transient failures
	// (Unavailable) are then retried at most twice with a short backoff.
	// Writes are never retried here, because a retry could run them twice.
	ReadOnly bool
	// Progress, if set, receives the upstream's progress notifications for
	// this call, in order, never after Call returns. It runs on the
	// connection's reader and must not block.
	Progress func(progress, total float64, message string)
}

const maxRetries = 2

// Call calls the upstream tool name (its upstream name, without the agent's
// prefix). A tool result with isError is returned as a result; every failure
// to get a result is an [*Error].
func (c *Client) Call(ctx context.Context, name string, args map[string]any, o CallOptions) (*mcp.CallToolResult, error) {
	var res *mcp.CallToolResult
	err := c.invoke(ctx, fmt.Sprintf("tools/call %q", name), o.ReadOnly, func(ctx context.Context, s *session) error {
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		if o.Progress != nil {
			tok, done := c.registerProgress(o.Progress)
			defer done()
			p.SetProgressToken(tok)
		}
		r, err := s.cs.CallTool(ctx, p)
		res = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// invoke runs fn against the current session with the per-call timeout,
// circuit breaker, classification and (for reads) bounded retries.
func (c *Client) invoke(ctx context.Context, op string, readOnly bool, fn func(context.Context, *session) error) error {
	for attempt := 0; ; attempt++ {
		e := c.attempt(ctx, op, readOnly, fn)
		if e == nil {
			return nil
		}
		if !readOnly || attempt >= maxRetries || e.Kind != Unavailable || !e.Retryable || e.RetryAfter > 0 {
			return e
		}
		// 100ms then 300ms, jittered; a reconnect that completes meanwhile
		// ends the wait early.
		d := time.Duration(100*(2*attempt+1)) * time.Millisecond
		d = d/2 + rand.N(d/2+1)
		c.mu.Lock()
		up := c.upCh
		if c.cur != nil {
			up = nil
		}
		c.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.newErr(op, Canceled, false, false, "canceled by the caller while waiting to retry", ctx.Err())
		case <-t.C:
		case <-up:
			t.Stop()
		}
	}
}

func (c *Client) attempt(ctx context.Context, op string, readOnly bool, fn func(context.Context, *session) error) *Error {
	if err := ctx.Err(); err != nil {
		return c.newErr(op, Canceled, false, false, "canceled by the caller before the call was sent", err)
	}
	s, trial, e := c.acquire(op)
	if e != nil {
		return e
	}
	tctx, cancelT := context.WithTimeoutCause(ctx, c.o.Timeout, errCallTimeout)
	defer cancelT()
	cctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.ctx, func() { cancel(errDropped) })
	defer stop()
	wt := new(wireTrace)
	cctx = context.WithValue(cctx, wireTraceKey{}, wt)

	start := time.Now()
	err := fn(cctx, s)
	dur := time.Since(start)
	if err == nil {
		c.settle(nil, trial, dur)
		return nil
	}
	e = c.classify(ctx, cctx, s, op, readOnly, err, wt)
	c.settle(e, trial, dur)
	if e.Kind == Unavailable || e.Kind == Timeout {
		s.sig.kick() // let the supervisor find out whether the session is still alive
	}
	return e
}

// classify turns an SDK error into an *Error. Context state is consulted
// before the error itself, because a cancelled call surfaces as whatever
// the transport saw when its request was aborted.
func (c *Client) classify(ctx, cctx context.Context, s *session, op string, readOnly bool, err error, wt *wireTrace) *Error {
	var mayHaveRun bool
	switch {
	case errors.Is(err, mcp.ErrSessionMissing):
		// The upstream restarted and no longer knows our session: it
		// refused the request without running it.
		mayHaveRun = false
	case s.kind == TransportStdio:
		// jsonrpc2 refuses new calls on a closing connection before writing.
		mayHaveRun = !errors.Is(err, mcp.ErrConnectionClosed)
	default:
		mayHaveRun = wt.wrote.Load()
	}
	switch {
	case ctx.Err() != nil:
		return c.newErr(op, Canceled, false, mayHaveRun,
			"canceled by the caller; cancellation was sent to the upstream", ctx.Err())
	case errors.Is(context.Cause(cctx), errCallTimeout):
		msg := fmt.Sprintf("no answer within %v", c.o.Timeout)
		switch {
		case !mayHaveRun:
			msg += " (the request did not reach the upstream)"
		case !readOnly:
			msg += "; cancellation was sent to the upstream, but the call may already have taken effect (outcome unknown; not retried)"
		default:
			msg += "; cancellation was sent to the upstream"
		}
		return c.newErr(op, Timeout, readOnly || !mayHaveRun, mayHaveRun, msg, context.DeadlineExceeded)
	case s.ctx.Err() != nil:
		msg := "the connection to the upstream dropped during the call"
		if !readOnly && mayHaveRun {
			msg += "; the call may have taken effect (outcome unknown)"
		}
		return c.newErr(op, Unavailable, readOnly || !mayHaveRun, mayHaveRun, msg, errors.Join(errDropped, err))
	}
	if werr := protocolError(err); werr != nil {
		cp := *werr
		cp.Message = c.scrub(cp.Message)
		e := c.newErr(op, Protocol, false, true,
			fmt.Sprintf("upstream rejected the request: %s (JSON-RPC %d)", cp.Message, cp.Code), &cp)
		e.Code = cp.Code
		return e
	}
	msg := "transport failure: " + c.scrub(err.Error())
	if !mayHaveRun {
		msg += " (the request did not reach the upstream)"
	} else if !readOnly {
		msg += "; the call may have taken effect (outcome unknown)"
	}
	return c.newErr(op, Unavailable, readOnly || !mayHaveRun, mayHaveRun, msg, err)
}

func (c *Client) newErr(op string, k Kind, retryable, mayHaveRun bool, msg string, err error) *Error {
	return &Error{Upstream: c.o.Name, Op: op, Kind: k, Retryable: retryable, MayHaveRun: mayHaveRun, msg: msg, Err: err}
}

// Codes the SDK's jsonrpc2 layer uses for its own transport conditions
// (client closing, server closing, rejected by transport). They come wrapped
// in the same error type as real upstream answers and must not be mistaken
// for them.
var transportCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// protocolError finds the upstream's JSON-RPC error in err's tree, if any.
func protocolError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error) bool
	walk = func(err error) bool {
		if err == nil {
			return false
		}
		if w, ok := err.(*jsonrpc.Error); ok && !transportCodes[w.Code] {
			found = w
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e) {
					return true
				}
			}
		case interface{ Unwrap() error }:
			return walk(u.Unwrap())
		}
		return false
	}
	walk(err)
	return found
}

// acquire returns the session to use, or the fast-fail error when there is
// none or the breaker is open. trial marks the single half-open probe call.
func (c *Client) acquire(op string) (s *session, trial bool, e *Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return nil, false, c.notConnectedLocked(op)
	}
	if c.open {
		now := time.Now()
		if now.Before(c.openUntil) || c.trial {
			wait := max(c.openUntil.Sub(now), 0)
			msg := fmt.Sprintf("circuit breaker open after %d consecutive failures (last: %s); ", c.failures, c.lastErr)
			if c.trial {
				msg += "a trial call is in progress"
				wait = max(wait, 100*time.Millisecond)
			} else {
				msg += fmt.Sprintf("next attempt in %v", wait.Round(time.Millisecond))
			}
			e := c.newErr(op, Unavailable, true, false, msg, errors.New("circuit breaker open"))
			e.RetryAfter = wait
			return nil, false, e
		}
		c.trial = true
		trial = true
	}
	return c.cur, trial, nil
}

func (c *Client) notConnectedLocked(op string) *Error {
	var msg string
	switch {
	case c.invalid != nil:
		msg = "misconfigured: " + c.invalid.Error()
		return c.newErr(op, Unavailable, false, false, msg, c.invalid)
	case c.stopped:
		msg = "not connected (client stopped)"
	case !c.attempted:
		msg = "not connected yet (connecting)"
	default:
		msg = "not connected"
		if c.lastErr != "" {
			msg += " (last error: " + c.lastErr + ")"
		}
		if !c.nextAttempt.IsZero() {
			msg += fmt.Sprintf("; reconnecting in %v", max(time.Until(c.nextAttempt), 0).Round(time.Millisecond))
		}
	}
	return c.newErr(op, Unavailable, true, false, msg, errors.New("not connected"))
}

// settle feeds an attempt's outcome to the breaker and the latency ring.
// Only failures that say "the upstream is not answering" count: a JSON-RPC
// error or an isError result is an answer.
func (c *Client) settle(e *Error, trial bool, dur time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e == nil || e.Kind == Protocol:
		c.lat[c.latN%latencyRing] = dur
		c.latN++
		c.latLast = dur
		if c.open {
			c.log.Info("upstream circuit breaker closed")
		}
		c.failures, c.open, c.trial = 0, false, false
	case e.Kind == Canceled:
		if trial {
			c.trial = false // no verdict: let another call try
		}
	default:
		c.failures++
		c.lastErr = c.scrubLocked(e.msg)
		c.lastErrAt = time.Now()
		if trial || (!c.open && c.failures >= c.o.BreakerThreshold) {
			c.open, c.trial = true, false
			c.openUntil = time.Now().Add(c.o.BreakerCooldown)
			c.log.Warn("upstream circuit breaker open", "failures", c.failures, "cooldown", c.o.BreakerCooldown, "error", c.lastErr)
		}
	}
}

// progressReg routes one call's progress notifications. Its mutex makes
// "never after Call returns" hold even when a notification is being
// delivered while the call completes.
type progressReg struct {
	mu   sync.Mutex
	fn   func(progress, total float64, message string)
	done bool
}

func (c *Client) registerProgress(fn func(float64, float64, string)) (token string, done func()) {
	token = "raspi-mcp-" + strconv.FormatUint(c.progSeq.Add(1), 10)
	reg := &progressReg{fn: fn}
	c.mu.Lock()
	c.progress[token] = reg
	c.mu.Unlock()
	return token, func() {
		c.mu.Lock()
		delete(c.progress, token)
		c.mu.Unlock()
		reg.mu.Lock()
		reg.done = true
		reg.mu.Unlock()
	}
}

func (c *Client) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	tok, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	c.mu.Lock()
	reg := c.progress[tok]
	c.mu.Unlock()
	if reg == nil {
		return // late, or not ours
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if !reg.done {
		reg.fn(req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}

// wireTrace records, through httptrace, whether a call's request was
// written to the network: the difference between "certainly not executed"
// and "outcome unknown".
type wireTrace struct{ wrote atomic.Bool }

type wireTraceKey struct{}

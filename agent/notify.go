package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/agent/upstream"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The client shows what the person should know without a model asking:
// its own call was refused, the root helper or a LAN upstream went away or
// came back. These go out as notifications/message, at the level each
// session chose with logging/setLevel (none until it chooses, as the SDK
// does). That is the 2025-11-25 era's channel; 2026-07-28 deprecates
// logging, and a client of that era gets a message only for a request that
// asked for a log level in its _meta.
//
// Long tools (Spec.Slow) report progress every second while they run when
// the client sent a progress token, so a client can show that the call is
// alive rather than time it out.

// loggerName is the logger our notifications carry.
const loggerName = "raspi-mcp"

// watch is the helper and upstream state last seen, and how often to look.
type watch struct {
	every    time.Duration
	mu       sync.Mutex
	helperUp *bool                     // nil until the first look
	upstream map[string]upstream.State // by upstream name
}

// helper reports whether the root helper answered at the last look, and
// whether there has been one.
func (w *watch) helper() (up, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.helperUp == nil {
		return false, false
	}
	return *w.helperUp, true
}

func newWatch() *watch {
	return &watch{every: 5 * time.Second, upstream: map[string]upstream.State{}}
}

// watchEvents looks at the helper and the upstreams until ctx ends and tells
// every session when one goes down or comes back.
func (a *Agent) watchEvents(ctx context.Context) {
	tick := time.NewTicker(a.watch.every)
	defer tick.Stop()
	for {
		a.lookOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lookOnce compares the helper's and each upstream's state with the last look.
func (a *Agent) lookOnce(ctx context.Context) {
	w := a.watch
	if a.helper != nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := client.Call(pctx, a.helper, proto.Status, proto.StatusReq{})
		cancel()
		if ctx.Err() != nil {
			return
		}
		up := err == nil
		w.mu.Lock()
		was := w.helperUp
		w.helperUp = &up
		w.mu.Unlock()
		switch {
		case !up && (was == nil || *was):
			a.broadcast(ctx, mcp.LoggingLevel("error"), map[string]any{"event": "helper_down",
				"message":  fmt.Sprintf("the root helper does not answer (%v): changes to the device fail until it is back", err),
				"fix_hint": "on the device: sudo systemctl restart raspi-mcp-helper"})
		case up && was != nil && !*was:
			a.broadcast(ctx, mcp.LoggingLevel("notice"), map[string]any{"event": "helper_up", "message": "the root helper answers again"})
		}
	}
	for _, d := range a.lan.domains {
		st := d.client.Status().State
		w.mu.Lock()
		was, seen := w.upstream[d.cfg.Name]
		w.upstream[d.cfg.Name] = st
		w.mu.Unlock()
		if seen && was == st || st == upstream.StateConnecting {
			continue
		}
		switch {
		case st == upstream.StateUp && seen && was != upstream.StateConnecting:
			a.broadcast(ctx, mcp.LoggingLevel("notice"), map[string]any{"event": "upstream_up", "upstream": d.cfg.Name,
				"message": fmt.Sprintf("LAN server %s is reachable again; its tools are back", d.cfg.Name)})
		case st == upstream.StateDown || st == upstream.StateBreakerOpen:
			a.broadcast(ctx, mcp.LoggingLevel("warning"), map[string]any{"event": "upstream_down", "upstream": d.cfg.Name, "state": string(st),
				"message": fmt.Sprintf("LAN server %s is %s: its tools fail until it is back", d.cfg.Name, st)})
		}
	}
}

// broadcast sends one message to every session; each session's level decides.
func (a *Agent) broadcast(ctx context.Context, level mcp.LoggingLevel, data map[string]any) {
	for ss := range a.server.Sessions() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = ss.Log(sctx, &mcp.LoggingMessageParams{Level: level, Logger: loggerName, Data: data})
		cancel()
	}
}

// tellDenied shows the person that the client's own call was refused, with
// the reason, next to what the model reads in the result. Calls made inside
// the agent (change_commit's) have no request and are told by their caller.
func (a *Agent) tellDenied(ctx context.Context, t *tool.Tool, c *tool.Call, decision string, e *tool.Error) {
	if c.Request() == nil || c.Session == nil || e == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = c.Session.Log(sctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel("warning"), Logger: loggerName, Data: map[string]any{
		"event": "call_denied", "tool": t.Name(), "decision": decision, "code": e.Code, "message": e.Message,
		"correlation_id": c.CorrelationID,
	}})
}

// progress reports, for a slow tool whose caller sent a progress token, a
// heartbeat every second until the returned stop is called, which sends the
// last one. Progress only grows, as the protocol wants; the total is unknown.
func (a *Agent) progress(ctx context.Context, t *tool.Tool, c *tool.Call) (stop func()) {
	if !t.Slow() || c.ProgressToken == nil || c.Session == nil {
		return func() {}
	}
	ss, tok := c.Session, c.ProgressToken
	send := func(n int, msg string) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = ss.NotifyProgress(sctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: msg})
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		n := 0
		send(n, t.Name()+" started")
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				n++
				send(n, fmt.Sprintf("%s finished after %s", t.Name(), time.Since(start).Round(100*time.Millisecond)))
				return
			case <-tick.C:
				n++
				send(n, fmt.Sprintf("%s running for %s", t.Name(), time.Since(start).Round(time.Second)))
			}
		}
	}()
	return func() { close(done); <-finished }
}

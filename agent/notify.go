package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
// came back. Every such event is a line in the agent log (stderr, so the
// journal, and the ring logs_get_recent_app_logs reads). A client of the
// 2025-11-25 era (a session that ran the initialize handshake) also gets
// it as notifications/message, at the level the session chose with
// logging/setLevel (none until it chooses, as the SDK does). A client of
// the 2026-07-28 era never does: that revision deprecates logging/setLevel
// and notifications/message, so the agent sends none in it (go-sdk would,
// for a request whose _meta names a log level); what a call's caller must
// know is in the call's result.
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

// broadcast writes one event to the agent log and sends it to every
// session of the 2025-11-25 era; each session's level decides.
func (a *Agent) broadcast(ctx context.Context, level mcp.LoggingLevel, data map[string]any) {
	a.logEvent(ctx, level, data)
	for ss := range a.server.Sessions() {
		if !legacyLogging(ss, nil) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = ss.Log(sctx, &mcp.LoggingMessageParams{Level: level, Logger: loggerName, Data: data})
		cancel()
	}
}

// legacyLogging is whether notifications/message is a channel to the
// client of ss (and of req, the request being served, when there is one):
// only in the 2025-11-25 era and before. A request's era is its own
// (_meta, else the session's handshake); a session's is whether it ran
// the initialize handshake, which the 2026-07-28 era has none of.
func legacyLogging(ss *mcp.ServerSession, req *mcp.CallToolRequest) bool {
	if req != nil {
		v := req.ProtocolVersion()
		return v != "" && v < "2026-07-28"
	}
	return ss != nil && ss.InitializeParams() != nil
}

// logEvent writes an event meant for the person as a line of the agent
// log, at the slog level of its MCP level: message as the line's message,
// the other fields as attributes.
func (a *Agent) logEvent(ctx context.Context, level mcp.LoggingLevel, data map[string]any) {
	lv := slog.LevelInfo
	switch level {
	case "debug":
		lv = slog.LevelDebug
	case "warning":
		lv = slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		lv = slog.LevelError
	}
	if !a.log.Enabled(ctx, lv) {
		return
	}
	msg, _ := data["message"].(string)
	attrs := make([]any, 0, 2*len(data))
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if k != "message" {
			attrs = append(attrs, k, data[k])
		}
	}
	a.log.Log(ctx, lv, msg, attrs...)
}

// tellDenied shows the person that the client's own call was refused, with
// the reason, next to what the model reads in the result. Calls made inside
// the agent (change_commit's) have no request and are told by their caller.
func (a *Agent) tellDenied(ctx context.Context, t *tool.Tool, c *tool.Call, decision string, e *tool.Error) {
	if c.Request() == nil || c.Session == nil || e == nil {
		return
	}
	data := map[string]any{"event": "call_denied", "tool": t.Name(), "decision": decision, "code": e.Code, "message": e.Message,
		"correlation_id": c.CorrelationID}
	if tp := c.Traceparent(); tp != "" {
		data[tool.MetaTraceparent] = tp
	}
	a.logEvent(ctx, "warning", data)
	if !legacyLogging(c.Session, c.Request()) {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = c.Session.Log(sctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel("warning"), Logger: loggerName, Data: data})
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

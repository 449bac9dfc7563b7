package tool

import (
	"context"
	"log/slog"
)

// A client inside a distributed trace sends the W3C Trace Context of its
// span in the request's _meta, under the key "traceparent" (SEP-414: the
// one un-prefixed key family of _meta, as OpenTelemetry's MCP conventions
// name it; tracestate and baggage are not kept). The agent starts no
// spans of its own: it records the caller's traceparent in the call's
// audit record and in its log line, so a trace found in the client's
// tracing system leads to what happened on the Pi, and back.

// MetaTraceparent is the _meta key of a request's W3C traceparent.
const MetaTraceparent = "traceparent"

// TraceparentFrom returns meta's traceparent when it is a well-formed W3C
// traceparent of version 00 (55 characters:
// 2 hex version, 32 hex trace id, 16 hex parent id, 2 hex flags, joined
// by '-', lowercase, neither id all zeros), else "". A malformed one is
// ignored, never an error: tracing is the client's business, and the call
// goes ahead exactly as without it.
func TraceparentFrom(meta map[string]any) string {
	s, ok := meta[MetaTraceparent].(string)
	if !ok || !validTraceparent(s) {
		return ""
	}
	return s
}

// validTraceparent checks the version-00 form. A later version may be
// longer; it is not recorded until the agent knows its form.
func validTraceparent(s string) bool {
	if len(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s[:2] == "00" && s[3:35] != "00000000000000000000000000000000" && s[36:52] != "0000000000000000"
}

// Traceparent is the W3C traceparent the client sent with the call, ""
// when none (or a malformed one) came, or the call was made inside the
// agent.
func (c *Call) Traceparent() string {
	if c.request == nil || c.request.Params == nil {
		return ""
	}
	return TraceparentFrom(c.request.Params.Meta)
}

// logCall writes the call's line in the agent log: at info when the client
// sent a traceparent (it traces the call, so it may come looking for it),
// at debug otherwise, so untraced calls cost nothing at the default level.
func (p *Pipeline) logCall(ctx context.Context, t *Tool, c *Call, decision string, o outcome) {
	tp, level := c.Traceparent(), slog.LevelDebug
	if tp != "" {
		level = slog.LevelInfo
	}
	if !p.o.Log.Enabled(ctx, level) {
		return
	}
	attrs := []any{"tool", t.ID(), "correlation_id", c.CorrelationID, "decision", decision, "duration_ms", ms(o.dur)}
	if o.err != nil {
		attrs = append(attrs, "error_code", o.err.Code)
	}
	if o.auditRef != "" {
		attrs = append(attrs, "audit_ref", o.auditRef)
	}
	if tp != "" {
		attrs = append(attrs, MetaTraceparent, tp)
	}
	p.o.Log.Log(ctx, level, "call", attrs...)
}

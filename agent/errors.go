package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Error codes of spec 002 §9.1, the whole vocabulary a model sees. They are
// the helper protocol's codes, so helper errors pass through unchanged.
const (
	CodeInvalidArgument    = proto.CodeInvalidArgument
	CodePermissionDenied   = proto.CodePermissionDenied
	CodeUnauthenticated    = "unauthenticated" // HTTP tokens only; the helper never says it
	CodeNotFound           = proto.CodeNotFound
	CodeFailedPrecondition = proto.CodeFailedPrecondition
	CodeResourceExhausted  = proto.CodeResourceExhausted
	CodeUnavailable        = proto.CodeUnavailable
	CodeInternal           = proto.CodeInternal
)

// ToolError is an error a model can act on: it is returned as
// {"error": ToolError} in structuredContent with isError set.
type ToolError struct {
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Details   map[string]any  `json:"details"`
	Retryable bool            `json:"retryable"`
	FixHint   string          `json:"fix_hint"`
	Next      []SuggestedCall `json:"suggested_next_tool_calls"`
}

// SuggestedCall is a tool call that would make progress after an error.
type SuggestedCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments,omitempty"`
	Why       string         `json:"why,omitempty"`
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// errf builds a ToolError; details, hints and suggestions are added with the With methods.
func errf(code, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...), Details: map[string]any{}, Next: []SuggestedCall{}}
}

func (e *ToolError) with(k string, v any) *ToolError { e.Details[k] = v; return e }
func (e *ToolError) hint(h string) *ToolError        { e.FixHint = h; return e }
func (e *ToolError) retry() *ToolError               { e.Retryable = true; return e }
func (e *ToolError) next(c SuggestedCall) *ToolError { e.Next = append(e.Next, c); return e }
func (e *ToolError) details(d map[string]any) *ToolError {
	for k, v := range d {
		e.Details[k] = v
	}
	return e
}

// toToolError turns any error from a handler into the public shape. Helper
// errors keep their code; anything unexpected becomes "internal" with a
// generic message, so no internals or stack traces reach a client.
func toToolError(err error) (te *ToolError, internal bool) {
	if errors.As(err, &te) {
		return te, false
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		te = errf(pe.Code, "%s", pe.Message).details(pe.Details)
		te.Retryable = pe.Retryable
		if h, ok := te.Details["fix_hint"].(string); ok {
			te.FixHint = h
			delete(te.Details, "fix_hint")
		}
		if pe.Code == CodeUnavailable {
			te.Retryable = true
			te.FixHint = "the root helper (raspi-mcp-helper) is not reachable: check `raspi-mcp status` or `systemctl status raspi-mcp-helper`, then retry"
		}
		return te, false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return errf(CodeUnavailable, "the operation timed out").retry(), false
	}
	if errors.Is(err, context.Canceled) {
		return errf(CodeUnavailable, "the call was cancelled").retry(), false
	}
	return errf(CodeInternal, "internal error; the agent log has the details"), true
}

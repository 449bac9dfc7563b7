package tool

import "fmt"

// Error is an error a model can act on. A failed call is a result with
// isError set whose text block is a summary line ("error CODE: message")
// followed by {"error": Error} as JSON, and whose _meta.error holds the
// same object for programs. It is never in structuredContent: clients built
// on the TypeScript SDK validate structuredContent against the tool's
// outputSchema even when isError is set, so an error object there would turn
// a clear refusal into a schema-validation failure on the client.
//
// Its Code is one of internal/errcode's. Every error leaves the pipeline
// with a FixHint and, wherever a next call exists, a SuggestedCall: a model
// should never have to guess.
type Error struct {
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

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errf builds an Error; details, hints and suggestions are added with With,
// WithDetails, Hint, Retry and Suggest, which return e to chain.
func Errf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Details: map[string]any{}, Next: []SuggestedCall{}}
}

// With sets one detail.
func (e *Error) With(k string, v any) *Error { e.Details[k] = v; return e }

// Hint sets the fix hint.
func (e *Error) Hint(h string) *Error { e.FixHint = h; return e }

// Retry marks the error retryable.
func (e *Error) Retry() *Error { e.Retryable = true; return e }

// Suggest adds a suggested next call.
func (e *Error) Suggest(c SuggestedCall) *Error { e.Next = append(e.Next, c); return e }

// WithDetails sets every detail of d.
func (e *Error) WithDetails(d map[string]any) *Error {
	for k, v := range d {
		e.Details[k] = v
	}
	return e
}

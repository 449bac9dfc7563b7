package proto

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxClientLen caps HelloReq.Client; it only ever holds "name/version".
const MaxClientLen = 64

// Validate checks the client name. The version is deliberately not checked
// here: a mismatch is the helper's failed_precondition, not a bad argument.
func (r HelloReq) Validate() error {
	if r.Client == "" {
		return invalid("client", r.Client, "proto: hello client name is empty")
	}
	return checkText("client", r.Client, MaxClientLen)
}

// Validate accepts every StatusReq; it exists so all params look alike.
func (StatusReq) Validate() error { return nil }

// Validate checks the action enum, the delay bounds and the reason text.
func (r PowerScheduleReq) Validate() error {
	switch r.Action {
	case ActionReboot, ActionPoweroff:
	default:
		return invalid("action", r.Action,
			fmt.Sprintf("proto: power action %q is not one of %q, %q", r.Action, ActionReboot, ActionPoweroff))
	}
	if r.DelaySeconds < 0 || r.DelaySeconds > MaxDelaySeconds {
		return invalid("delay_seconds", r.DelaySeconds,
			fmt.Sprintf("proto: delay_seconds %d is outside 0..%d", r.DelaySeconds, MaxDelaySeconds)).
			With("min", 0).With("max", MaxDelaySeconds)
	}
	if !r.At.IsZero() {
		now := time.Now()
		switch {
		case r.DelaySeconds != 0:
			return invalid("at", r.At, "proto: give delay_seconds or at, not both")
		case r.At.Before(now.Add(-5*time.Second)) || r.At.After(now.Add(MaxAhead)):
			return invalid("at", r.At, fmt.Sprintf("proto: at %s is not between now and %s ahead", r.At.UTC().Format(time.RFC3339), MaxAhead))
		}
	}
	return checkText("reason", r.Reason, MaxReasonLen)
}

// Validate accepts every PowerCancelReq.
func (PowerCancelReq) Validate() error { return nil }

// Validate accepts every PowerStateReq.
func (PowerStateReq) Validate() error { return nil }

// checkText enforces the rules for free text that ends up in the helper's log
// or a wall message: valid UTF-8, at most max runes, and no control, format or
// line/paragraph-separator characters, since those could forge log lines or
// reorder what an operator reads (bidi overrides are format characters).
func checkText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return invalid(field, s, fmt.Sprintf("proto: %s %q is not valid UTF-8", field, s))
	}
	if n := utf8.RuneCountInString(s); n > max {
		return invalid(field, n, fmt.Sprintf("proto: %s is %d characters, more than %d", field, n, max)).With("max", max)
	}
	for i, c := range s {
		if unicode.IsControl(c) || unicode.In(c, unicode.Cf, unicode.Zl, unicode.Zp) {
			return invalid(field, s, fmt.Sprintf("proto: %s contains control character %U at byte %d", field, c, i))
		}
	}
	return nil
}

// invalid builds the invalid_argument error every Validate returns.
func invalid(field string, value any, msg string) *Error {
	return &Error{Code: CodeInvalidArgument, Message: msg, Details: map[string]any{"field": field, "value": value}}
}

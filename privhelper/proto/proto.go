// Package proto is the wire protocol between the unprivileged raspi-mcp agent
// and the root helper (raspi-mcp-helper). Laptop mode, the self-test and the
// tests speak it too, to the same helper server on a simulated board
// (internal/simrig), so there is one protocol and no test-only shortcut.
//
// It is deliberately stdlib-only and small: both sides import the same typed
// method table, so a method's wire name, its parameter type and its result type
// are written down exactly once. The helper runs as root, so everything here
// errs on the side of refusing: frames are size-capped before any allocation,
// JSON is decoded strictly (unknown fields and trailing data are errors) and
// every parameter type carries its own Validate, which the helper calls before
// it acts and the agent may call before it sends.
package proto

import (
	"encoding/json"
	"fmt"
	"time"
)

// Version is the protocol version. It is bumped on any incompatible change,
// including adding a field to an existing message, because decoding is strict
// on both sides. The helper refuses a hello carrying any other version.
// Adding a method with types of its own is not such a change: a helper
// without it answers not_found, which the caller reports, and an agent
// without it never sends it; so the button methods (issue 30) came
// without a bump.
const Version = 2

// MaxMessage is the largest frame body, in bytes, either side will read or
// write. Nothing the protocol carries comes close; the cap exists so a peer
// cannot make the root helper allocate arbitrary memory.
const MaxMessage = 64 << 10

// Method is one entry of the typed method table. Req and Resp are the
// parameter and result types; Name is the wire name; Class says how long
// it may take (class.go), which sizes both the helper's bound on its
// handler and the client's wait. Values of Method are only ever declared
// in this package's table and never mutated.
type Method[Req, Resp any] struct {
	Name  string
	Class Class
}

// String returns the wire name.
func (m Method[Req, Resp]) String() string { return m.Name }

// The method table's core; its hardware, operations and audit-witness parts
// are in hardware.go, ops.go and witness.go. A method is declared only in this
// package and listed in Methods, so client and server cannot disagree about
// names, types or classes: the helper's tests check that it serves exactly Names, and the
// fuzz tests reach every method's Validate through its NewRequest. The one
// hand-kept table a new method needs is in privhelper/switches_test.go: the
// write switch that gates it (switchGates, with a request the allowlists
// permit), or why none does (ungated).
var (
	Hello  = Method[HelloReq, HelloResp]{"hello", Quick}
	Status = Method[StatusReq, StatusResp]{"status", Quick}
	// The power methods are calls to systemd-logind over D-Bus: as slow as
	// the bus and logind are on a loaded board, hence Systemd.
	PowerSchedule = Method[PowerScheduleReq, PowerScheduleResp]{"power.schedule", Systemd}
	PowerCancel   = Method[PowerCancelReq, PowerCancelResp]{"power.cancel", Systemd}
	PowerState    = Method[PowerStateReq, PowerStateResp]{"power.state", Systemd}
)

// Names returns the wire names of every method in the table, in table order.
// It returns a fresh slice on each call so callers cannot alter the table.
func Names() []string {
	var names []string
	for _, m := range Methods() {
		names = append(names, m.Name)
	}
	return names
}

// Methods returns every method's name and class, in table order, as a
// fresh slice.
func Methods() []Info {
	ms := append([]Info{Hello.Info(), Status.Info(), PowerSchedule.Info(), PowerCancel.Info(), PowerState.Info()}, hardwareMethods()...)
	ms = append(ms, opsMethods()...)
	ms = append(ms, configMethods()...)
	ms = append(ms, updateMethods()...)
	ms = append(ms, aptMethods()...)
	ms = append(ms, buttonMethods()...)
	return append(ms, AuditWitness.Info())
}

// HelloReq is the first request on every connection.
type HelloReq struct {
	Version int    `json:"version"`
	Client  string `json:"client"` // e.g. "raspi-mcp/0.1.0"; logged by the helper
}

// HelloResp answers a successful hello.
type HelloResp struct {
	Version int    `json:"version"`
	Helper  string `json:"helper"` // e.g. "raspi-mcp-helper/0.1.0"
	PID     int    `json:"pid"`
}

// StatusReq asks the helper to describe itself. It has no parameters.
type StatusReq struct{}

// StatusResp describes the running helper.
type StatusResp struct {
	Helper    string    `json:"helper"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Backend   string    `json:"backend"` // "linux" or "sim"
	Methods   []string  `json:"methods"`
}

// Power actions accepted by PowerScheduleReq.
const (
	ActionReboot   = "reboot"
	ActionPoweroff = "poweroff"
)

// Limits on PowerScheduleReq.
const (
	MaxDelaySeconds = 600                // ten minutes: long enough to warn users, short enough to stay visible
	MaxAhead        = 7 * 24 * time.Hour // the farthest ahead At may be ("reboot at 3 a.m.")
	MaxReasonLen    = 200                // in characters (runes)
)

// PowerScheduleReq asks the helper to reboot or power off after a delay.
// A new schedule replaces any pending one, as logind does.
type PowerScheduleReq struct {
	Action       string    `json:"action"`        // ActionReboot or ActionPoweroff
	DelaySeconds int       `json:"delay_seconds"` // 0..MaxDelaySeconds
	At           time.Time `json:"at"`            // instead of a delay: a time up to MaxAhead from now; zero for none
	Reason       string    `json:"reason"`        // free text for the helper's log, at most MaxReasonLen runes
}

// PowerScheduleResp reports what was scheduled and when it will happen.
type PowerScheduleResp struct {
	Action string    `json:"action"`
	At     time.Time `json:"at"`
}

// PowerCancelReq cancels a pending power action. It has no parameters.
type PowerCancelReq struct{}

// PowerCancelResp reports whether something was cancelled.
type PowerCancelResp struct {
	Cancelled bool   `json:"cancelled"`
	Action    string `json:"action"` // the action that was cancelled, "" if none
}

// PowerStateReq asks for the pending power action, if any.
type PowerStateReq struct{}

// PowerStateResp reports the pending power action.
type PowerStateResp struct {
	Scheduled bool      `json:"scheduled"`
	Action    string    `json:"action"`
	At        time.Time `json:"at"`
}

// Request is the envelope of every client-to-helper frame.
type Request struct {
	ID     uint64          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Response is the envelope of every helper-to-client frame. Exactly one of
// Result and Error is set. ID echoes the request; ID 0 marks a
// connection-level error (refused peer, bad frame) after which the helper
// closes the connection.
type Response struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error codes. They mirror the gRPC canonical codes the rest of raspi-mcp
// uses, so the agent can map them onto tool errors without a lookup table.
const (
	CodeInvalidArgument    = "invalid_argument"
	CodePermissionDenied   = "permission_denied"
	CodeNotFound           = "not_found"
	CodeFailedPrecondition = "failed_precondition"
	CodeResourceExhausted  = "resource_exhausted"
	CodeUnavailable        = "unavailable"
	CodeInternal           = "internal"
)

// Error is a typed error that crosses the wire unchanged: the helper returns
// it in Response.Error and the client hands the same value to its caller.
type Error struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details,omitempty"`
	Retryable bool           `json:"retryable,omitempty"`
}

// Error implements error as "code: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error with the given code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns e after adding one detail; it exists so call sites can build an
// error in one expression. It mutates e, which is always freshly made.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = make(map[string]any)
	}
	e.Details[key] = value
	return e
}

// Validator is implemented by parameter types that can check themselves.
// Validate returns nil or an *Error with CodeInvalidArgument.
type Validator interface {
	Validate() error
}

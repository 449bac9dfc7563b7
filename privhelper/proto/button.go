package proto

import (
	"fmt"
	"time"
)

// The approval button (issue 30): a push button on a GPIO input that the
// root helper holds for its life ([guard.button]), so the Pi's owner can
// approve or decline a risky call on the device itself, where no MCP client
// reaches. The agent's broker waits on it with button.wait; the helper
// answers with what the owner did.
var (
	// ButtonWait waits for the owner's press. Its class is Approval: the
	// bound is the request's own timeout (ButtonWaitReq.Wait) plus a
	// margin, and the client carries it on a lane of its own, so a
	// two-minute wait holds up no other call.
	ButtonWait = Method[ButtonWaitReq, ButtonWaitResp]{"button.wait", Approval}
	// ButtonStatus says whether a button is wired and healthy.
	ButtonStatus = Method[ButtonStatusReq, ButtonStatusResp]{"button.status", Quick}
	// ButtonPress presses the simulated board's button (laptop mode,
	// `raspi-mcp sim press`); a helper on a real board answers not_found.
	ButtonPress = Method[ButtonPressReq, ButtonPressResp]{"button.press", Quick}
)

// buttonMethods lists the button methods for Methods.
func buttonMethods() []Info {
	return []Info{ButtonWait.Info(), ButtonStatus.Info(), ButtonPress.Info()}
}

// Bounds of ButtonWaitReq.
const (
	MinButtonWait = time.Second      // less is no time for a person to reach the Pi
	MaxButtonWait = 30 * time.Minute // [guard] approval_timeout's own upper bound
	MaxCallIDLen  = 64               // an approval id; it only ever reaches the helper's log
)

// Presses ButtonWaitResp.Press reports.
const (
	PressShort   = "short"   // approve
	PressLong    = "long"    // decline (also a hold whose release was never seen)
	PressTimeout = "timeout" // nobody pressed in time: a decline too
)

// Button health states ButtonStatusResp.State reports.
const (
	ButtonOK       = "ok"
	ButtonStuck    = "stuck"    // reads pressed at start, or held for long while nobody asked
	ButtonBouncing = "bouncing" // many edges shorter than the debounce lately: a worn contact or noise
	ButtonMissing  = "missing"  // the line could not be requested (wrong pin or chip, held by another program)
	ButtonUnwired  = "unwired"  // no [guard.button] pin
)

// ButtonWaitReq waits for one press.
type ButtonWaitReq struct {
	Call      string `json:"call"`       // the approval id, for the helper's log
	TimeoutMS int64  `json:"timeout_ms"` // MinButtonWait..MaxButtonWait
}

// ButtonWaitResp is what the owner did.
type ButtonWaitResp struct {
	Press    string `json:"press"` // PressShort, PressLong or PressTimeout
	WaitedMS int64  `json:"waited_ms"`
}

// ButtonStatusReq has no parameters.
type ButtonStatusReq struct{}

// ButtonStatusResp describes the button as the helper holds it.
type ButtonStatusResp struct {
	Wired   bool   `json:"wired"`
	Pin     int    `json:"pin"` // -1 when unwired
	LED     int    `json:"led"` // -1 for none
	State   string `json:"state"`
	Detail  string `json:"detail"`
	Waiting bool   `json:"waiting"` // a button.wait is under way
}

// ButtonPressReq presses the simulated button: short, or held past
// [guard.button] long_press.
type ButtonPressReq struct {
	Long bool `json:"long"`
}

// ButtonPressResp says what was pressed.
type ButtonPressResp struct {
	Press  string `json:"press"`   // PressShort or PressLong
	HeldMS int64  `json:"held_ms"` // how long the simulated finger stayed down
}

// Validate checks the call id and the timeout.
func (r ButtonWaitReq) Validate() error {
	if r.Call == "" {
		return invalid("call", r.Call, "proto: button.wait call id is empty")
	}
	if err := checkText("call", r.Call, MaxCallIDLen); err != nil {
		return err
	}
	lo, hi := MinButtonWait.Milliseconds(), MaxButtonWait.Milliseconds()
	if r.TimeoutMS < lo || r.TimeoutMS > hi {
		return invalid("timeout_ms", r.TimeoutMS, fmt.Sprintf("proto: timeout_ms %d is outside %d..%d", r.TimeoutMS, lo, hi)).
			With("min", lo).With("max", hi)
	}
	return nil
}

// Wait is how long the request may wait for the owner: what its Approval
// bound is made from on both sides.
func (r ButtonWaitReq) Wait() time.Duration { return time.Duration(r.TimeoutMS) * time.Millisecond }

// Validate accepts every ButtonStatusReq.
func (ButtonStatusReq) Validate() error { return nil }

// Validate accepts every ButtonPressReq.
func (ButtonPressReq) Validate() error { return nil }

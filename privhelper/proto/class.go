package proto

import (
	"fmt"
	"time"
)

// Class is how long a method may legitimately take, and so which bound the
// helper puts on its handler and the client on its wait. Every method in
// the table names its class; both sides read it from there, so they cannot
// disagree about which methods are slow.
type Class uint8

const (
	// Quick methods touch only what the helper owns or reads directly
	// (GPIO, PWM, I²C, a file, /proc): milliseconds, and a few seconds
	// mean something is stuck. Their bound stays short.
	Quick Class = iota
	// Systemd methods wait on a daemon whose time grows with the whole
	// system rather than with the request: systemd's unit-file changes
	// and daemon-reload, logind, the start job of a transient unit, apt's
	// cache. On a loaded Pi Zero a daemon-reload with many units alone
	// takes longer than a quick bound.
	Systemd
	// Job methods wait for a unit's start, stop, restart or reload job,
	// which systemd itself bounds by the unit's TimeoutStartSec or
	// TimeoutStopSec (90 s by default).
	Job
	// Approval methods wait for a person at the device (button.wait):
	// as long as the request itself says (Waiter), which no fixed bound
	// fits, so both sides bound it by the request's own wait plus
	// ApprovalMargin (ApprovalBound), and the client gives it a
	// connection of its own.
	Approval
)

// String is the class's name in logs and errors.
func (c Class) String() string {
	switch c {
	case Quick:
		return "quick"
	case Systemd:
		return "systemd"
	case Job:
		return "job"
	case Approval:
		return "approval"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Classes lists every class, for tests and tables.
func Classes() []Class { return []Class{Quick, Systemd, Job, Approval} }

// Default bounds of the helper's handlers, per class ([helper]
// systemd_timeout and job_timeout set the last two; the quick one is
// fixed).
const (
	// DefaultQuickTimeout stays below the agent's default helper.timeout
	// (10 s), so a caller sees the helper's error rather than its own
	// client giving up.
	DefaultQuickTimeout = 8 * time.Second
	// DefaultSystemdTimeout is sized for a Pi Zero: a daemon-reload there
	// with a hundred units, under load, has been seen to take more than
	// 8 s, and systemd's own default for anything it waits on is 90 s
	// (DefaultTimeoutStartSec); a reload slower than that is a stuck
	// systemd, not a slow one.
	DefaultSystemdTimeout = 90 * time.Second
	// DefaultJobTimeout covers a start or stop job to the end of
	// systemd's own bound on it (TimeoutStartSec/TimeoutStopSec, 90 s by
	// default) plus 30 s for the job to get through systemd's queue on a
	// loaded Pi Zero. A unit with a longer TimeoutStartSec keeps running
	// past it: the job stays queued in systemd, and the error says so.
	DefaultJobTimeout = 120 * time.Second
)

// ReplyMargin is how much longer than the helper's bound the client waits
// for a Systemd or Job method, so that the helper's own timeout error
// (which names the method and the bound) reaches the caller rather than a
// bare client timeout: after an abandoned wait the helper still reads the
// unit's state (at most 5 s, hw/units) before it answers.
const ReplyMargin = 10 * time.Second

// ApprovalMargin is how much longer than its own wait the helper lets an
// Approval method run: the wait ends by itself at the request's timeout
// and answers "timeout"; the margin only covers releasing the line's
// watch and showing the outcome, so a wait that overruns it is stuck.
const ApprovalMargin = 5 * time.Second

// Waiter is the parameter type of an Approval method: it says how long the
// call may wait for a person.
type Waiter interface {
	Wait() time.Duration
}

// ApprovalBound is the helper's bound on an Approval method whose request
// waits w: w plus ApprovalMargin, with w capped at MaxButtonWait so no
// request can hold a handler longer than that.
func ApprovalBound(w time.Duration) time.Duration {
	return min(max(w, 0), MaxButtonWait) + ApprovalMargin
}

// Bounds are the helper's bounds on a handler, per class. A zero field
// means that class's default.
type Bounds struct {
	Quick, Systemd, Job time.Duration
}

// Of returns the bound of class c.
func (b Bounds) Of(c Class) time.Duration {
	pick := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	switch c {
	case Systemd:
		return pick(b.Systemd, DefaultSystemdTimeout)
	case Job:
		return pick(b.Job, DefaultJobTimeout)
	case Approval:
		// The cap: a request's own bound (ApprovalBound) is shorter.
		return ApprovalBound(MaxButtonWait)
	}
	return pick(b.Quick, DefaultQuickTimeout)
}

// Info is a method's name and class, without its types; NewRequest makes
// its parameter type.
type Info struct {
	Name       string
	Class      Class
	newRequest func() Validator
}

// Info returns m's name and class, and how to make its parameter type.
func (m Method[Req, Resp]) Info() Info {
	return Info{Name: m.Name, Class: m.Class, newRequest: m.NewRequest}
}

// NewRequest returns a new zero Req, as a pointer that params decode into
// and whose Validate the helper calls: what a table-driven test (the fuzzer)
// needs of every method without a hand-kept list of their types. It is nil
// if *Req is not a Validator, which the fuzz tests report.
func (m Method[Req, Resp]) NewRequest() Validator {
	v, _ := any(new(Req)).(Validator)
	return v
}

// NewRequest returns a new zero parameter of the method, as
// Method.NewRequest does; nil for an Info not made by Method.Info.
func (i Info) NewRequest() Validator {
	if i.newRequest == nil {
		return nil
	}
	return i.newRequest()
}

// ClassOf returns the class of the method named name, and false for a name
// not in the table.
func ClassOf(name string) (Class, bool) {
	for _, m := range Methods() {
		if m.Name == name {
			return m.Class, true
		}
	}
	return Quick, false
}

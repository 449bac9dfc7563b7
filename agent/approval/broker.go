// Package approval holds the calls that wait for the owner's approval on
// the device itself: a button on a GPIO pin (held by the root helper), or
// `raspi-mcp approve` at the Pi's console. Neither is reachable from an MCP
// client, so an approval here is something no model can give itself.
//
// The Broker is the pipeline's tool.DeviceApprover. Each call that needs
// the device waits in it under a small number, bound to the call it was
// made for (principal, tool, arguments and plan); an answer is used once,
// a call that is not answered in time is declined, and nothing of a wait
// survives the agent: a restart declines it (see Broker.Recover).
package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
)

// MaxWaiting bounds the calls that wait for the console at once: a client
// that floods risky calls costs itself refusals, not the agent's memory.
const MaxWaiting = 8

// Button is the approval button, as the root helper holds it.
type Button interface {
	// Wait blocks until a press that starts after the call, and returns
	// "short" (approve), "long" (decline) or "timeout". id names the
	// call in the helper's log.
	Wait(ctx context.Context, id string, timeout time.Duration) (press string, err error)
}

// Journal keeps a note of each wait on disk while it lasts, so a wait the
// agent's restart cut short is declined and audited at the next start.
// nil: waits are not noted (tests, laptop mode without a store).
type Journal interface {
	Begin(w Waiting) error
	End(id string) error
}

// Waiting is one call waiting for the device, as the console shows it.
type Waiting struct {
	ID          string    `json:"id"`
	Principal   string    `json:"principal"`
	Role        string    `json:"role"`
	Tool        string    `json:"tool"`
	Name        string    `json:"name"`
	Risk        string    `json:"risk"`
	Arguments   string    `json:"arguments"`
	Plan        string    `json:"plan,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Intent      string    `json:"intent,omitempty"`
	Why         string    `json:"why"`
	Transport   string    `json:"transport"`
	Bind        string    `json:"bind"`
	Since       time.Time `json:"since"`
	Expires     time.Time `json:"expires"`
	Correlation string    `json:"correlation_id,omitempty"`
}

// Approver is who answers at the console, from the socket's peer
// credentials.
type Approver struct {
	Name string
	UID  int
}

// verdict is an answer to one wait.
type verdict struct {
	ok       bool
	channel  string
	approver string
	msg      string
}

type entry struct {
	w      Waiting
	answer chan verdict // buffered 1: the first answer wins
}

// Options configure a Broker.
type Options struct {
	// Guard is [guard] in force (timeouts, approvers, the button's pin).
	Guard func() config.Guard
	// Button is the helper's button; nil when none is wired or reachable.
	Button  Button
	Journal Journal
	Log     *slog.Logger
	// Console is how the person at the Pi is told to approve, e.g.
	// "sudo raspi-mcp approve"; "" uses that.
	Console string
	// Press, when set, is the command that presses a simulated button
	// (laptop mode), named where a person would press the real one.
	Press string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Broker holds the waits. Its zero value is not usable; see New.
type Broker struct {
	o        Options
	mu       sync.Mutex
	next     int
	waiting  map[string]*entry
	buttonOn bool // a call waits for the button now
	changed  chan struct{}
}

// New is a broker with no call waiting.
func New(o Options) *Broker {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Console == "" {
		o.Console = "sudo raspi-mcp approve"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Broker{o: o, waiting: map[string]*entry{}, changed: make(chan struct{})}
}

// buttonWired reports whether waits use the button.
func (b *Broker) buttonWired() bool { return b.o.Button != nil && b.o.Guard().Button.Wired() }

// Await puts r to the device and waits for an answer, the timeout, or
// ctx's end (the client gave up). It never runs the call; the pipeline
// does, when Approved.
func (b *Broker) Await(ctx context.Context, r tool.ApprovalRequest, tell func(string)) tool.ApprovalOutcome {
	g := b.o.Guard()
	timeout := g.ApprovalTimeout.D()
	start := b.o.Now()
	e, button, refused := b.enter(r, start, timeout)
	if refused != nil {
		return tool.ApprovalOutcome{Err: refused}
	}
	defer b.leave(e.w.ID, button)
	if b.o.Journal != nil {
		defer func() {
			if err := b.o.Journal.End(e.w.ID); err != nil {
				b.o.Log.Error("approval: clearing a wait failed", "id", e.w.ID, "err", err)
			}
		}()
	}
	tell(b.instructions(e.w, g, button))
	b.o.Log.Info("approval: a call waits for the device", "id", e.w.ID, "tool", r.Tool, "principal", r.Principal.Name, "why", r.Why)

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if button {
		// The helper times its wait out by itself; its context ends when
		// this wait does, not at the same deadline, so that a read timing
		// out on the helper's connection is never taken for a broken
		// button.
		bctx, stop := context.WithCancel(ctx)
		defer stop()
		go b.pressFor(bctx, e, timeout)
	}
	var v verdict
	select {
	case v = <-e.answer:
	case <-wctx.Done():
		waited := b.o.Now().Sub(start)
		if ctx.Err() != nil {
			return tool.ApprovalOutcome{Declined: true, Waited: waited,
				Err: tool.Errf(errcode.PermissionDenied, "%s: the client stopped waiting for the approval on the device; it did not run", r.Name).
					With("tool", r.Tool).With("approval_id", e.w.ID).Hint("call again when the person is at the Pi")}
		}
		return tool.ApprovalOutcome{Declined: true, Waited: waited,
			Err: tool.Errf(errcode.PermissionDenied, "%s was not approved on the device within %s; counted as a decline, it did not run", r.Name, timeout).
				With("tool", r.Tool).With("approval_id", e.w.ID).With("approval", "timeout").
				Hint("ask the person to be at the Pi, then call it again; they approve with the button or `" + b.o.Console + "`")}
	}
	out := tool.ApprovalOutcome{Approved: v.ok, Channel: v.channel, Approver: v.approver, Waited: b.o.Now().Sub(start)}
	if !v.ok {
		out.Declined = true
		out.Err = tool.Errf(errcode.PermissionDenied, "%s was declined on the device (%s); it did not run", r.Name, v.msg).
			With("tool", r.Tool).With("approval_id", e.w.ID).With("channel", v.channel).
			Hint("do not call it again unless the person asks you to; ask them what they want instead")
	}
	return out
}

// enter registers a wait, or refuses it: too many waiting, or the button
// already taken by another call.
func (b *Broker) enter(r tool.ApprovalRequest, now time.Time, timeout time.Duration) (*entry, bool, *tool.Error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	button := b.buttonWired()
	if button && b.buttonOn {
		return nil, false, tool.Errf(errcode.Unavailable, "%s needs the approval button, and another call waits for it", r.Name).
			With("tool", r.Tool).Retry().
			Hint("one call waits for the button at a time: try again when the person has answered the one that waits")
	}
	if len(b.waiting) >= MaxWaiting {
		return nil, false, tool.Errf(errcode.ResourceExhausted, "%s: %d calls already wait for an approval on the device", r.Name, len(b.waiting)).
			With("tool", r.Tool).With("limit", MaxWaiting).Retry().
			Hint("wait until the person has answered those, then call again")
	}
	b.next++
	id := strconv.Itoa(b.next)
	e := &entry{answer: make(chan verdict, 1), w: Waiting{ID: id, Principal: r.Principal.Name, Role: r.Principal.Role.String(),
		Tool: r.Tool, Name: r.Name, Risk: r.Risk.String(), Arguments: r.Arguments, Plan: r.Plan, Reason: r.Reason, Intent: r.Intent,
		Why: r.Why, Transport: r.Transport, Bind: r.Bind, Since: now, Expires: now.Add(timeout), Correlation: r.CorrelationID}}
	// Noted before anyone can see it: a wait the console could answer
	// is always one a restart would find. Approvals are rare; the one
	// small write under the lock costs nothing else.
	if b.o.Journal != nil {
		if err := b.o.Journal.Begin(e.w); err != nil {
			b.o.Log.Error("approval: noting a wait failed", "id", id, "err", err)
			return nil, false, tool.Errf(errcode.Unavailable, "the agent could not note the wait for an approval: %v", err).
				With("tool", r.Tool).Hint("`raspi-mcp status` on the Pi shows the database's problem")
		}
	}
	b.waiting[id] = e
	b.buttonOn = b.buttonOn || button
	b.notifyLocked()
	return e, button, nil
}

func (b *Broker) leave(id string, button bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.waiting, id)
	if button {
		b.buttonOn = false
	}
	b.notifyLocked()
}

// notifyLocked wakes whoever watches the list (Changed).
func (b *Broker) notifyLocked() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Changed is closed at the next change of what waits.
func (b *Broker) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// pressFor waits for the button on one call's behalf. A helper that fails
// (restarted, the line lost) declines the call: a wait the person cannot
// answer must not stand.
func (b *Broker) pressFor(ctx context.Context, e *entry, timeout time.Duration) {
	press, err := b.o.Button.Wait(ctx, e.w.ID, timeout)
	switch {
	case ctx.Err() != nil:
		return // answered at the console, timed out, or the client left
	case err != nil:
		b.o.Log.Warn("approval: the button wait failed; the call is declined", "id", e.w.ID, "err", err)
		b.answer(e, verdict{channel: tool.ChannelButton, msg: "the button could not be read: " + err.Error()})
	case press == "short":
		b.answer(e, verdict{ok: true, channel: tool.ChannelButton, approver: tool.ChannelButton})
	case press == "long":
		b.answer(e, verdict{channel: tool.ChannelButton, approver: tool.ChannelButton, msg: "a long press of the button"})
	}
}

func (b *Broker) answer(e *entry, v verdict) bool {
	select {
	case e.answer <- v:
		return true
	default:
		return false // answered already
	}
}

// instructions is the message the model relays to the person.
func (b *Broker) instructions(w Waiting, g config.Guard, button bool) string {
	left := w.Expires.Sub(w.Since).Round(time.Second)
	if button {
		where := fmt.Sprintf("press the button on GPIO %d", g.Button.Pin)
		if b.o.Press != "" {
			where = fmt.Sprintf("press the simulated button on GPIO %d (`%s`)", g.Button.Pin, b.o.Press)
		}
		return fmt.Sprintf("%s waits for the owner's approval on the Pi (call %s): %s to approve (hold it %s to decline), or run `%s %s` on the Pi. It is declined in %s.",
			w.Name, w.ID, where, g.Button.LongPress.D(), b.o.Console, w.ID, left)
	}
	return fmt.Sprintf("%s waits for the owner's approval on the Pi (call %s): run `%s %s` there (or `%s` to see what waits). It is declined in %s.",
		w.Name, w.ID, b.o.Console, w.ID, b.o.Console, left)
}

// List is what waits now, oldest first.
func (b *Broker) List() []Waiting {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Waiting, 0, len(b.waiting))
	for _, e := range b.waiting {
		out = append(out, e.w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// Errors of Decide.
var (
	ErrUnknown = errors.New("no call waits under this number: it was answered, timed out, or never asked")
	ErrOwnCall = errors.New("nobody approves their own call except root: another approver, or root (sudo), answers it")
	ErrChanged = errors.New("the call under this number is not the one you were shown")
)

// Decide answers wait id as approver at the console: approve or deny.
// bind, when not "", must be the Bind the approver was shown, so an
// answer cannot land on another call. The requesting principal may not
// approve its own call (root may: the owner at the console).
func (b *Broker) Decide(id string, approve bool, who Approver, bind string) error {
	b.mu.Lock()
	e, ok := b.waiting[id]
	b.mu.Unlock()
	if !ok {
		return ErrUnknown
	}
	if bind != "" && bind != e.w.Bind {
		return ErrChanged
	}
	if approve && who.UID != 0 && who.Name == e.w.Principal {
		return ErrOwnCall
	}
	v := verdict{ok: approve, channel: tool.ChannelConsole + ":" + who.Name, approver: who.Name}
	if !approve {
		v.msg = "denied at the console by " + who.Name
	}
	if !b.answer(e, v) {
		return ErrUnknown
	}
	b.o.Log.Info("approval: answered at the console", "id", id, "approve", approve, "approver", who.Name, "uid", who.UID)
	return nil
}

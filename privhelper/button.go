package privhelper

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The approval button (issue 30, [guard.button]): the helper requests its
// lines at start and holds them for its life, re-requesting them when a
// reload changes [guard.button]. It serves one button.wait at a time; the
// agent's broker decides what the press approves. Nothing of a wait is
// kept: a helper restart drops the connection, and the agent's call fails.

// Health bounds of the button (button.status).
const (
	stuckAfter     = 10 * time.Second // held this long with no wait under way: stuck
	bounceWindow   = time.Minute      // how far back sub-debounce edges count
	bouncingEdges  = 10               // that many in the window: bouncing
	classifyPeriod = 10 * time.Millisecond
)

// LED patterns: a slow blink while a call waits, steady for a second on
// approve, fast blinks on decline, then off.
var (
	ledWaiting = ledPattern{steps: []ledStep{{true, 250 * time.Millisecond}, {false, 750 * time.Millisecond}}, repeat: true}
	ledApprove = ledPattern{steps: []ledStep{{true, time.Second}}}
	ledDecline = ledPattern{steps: []ledStep{{true, 100 * time.Millisecond}, {false, 100 * time.Millisecond},
		{true, 100 * time.Millisecond}, {false, 100 * time.Millisecond}, {true, 100 * time.Millisecond}, {false, 100 * time.Millisecond},
		{true, 100 * time.Millisecond}, {false, 100 * time.Millisecond}, {true, 100 * time.Millisecond}}}
)

type ledStep struct {
	on bool
	d  time.Duration
}

type ledPattern struct {
	steps  []ledStep
	repeat bool
}

// buttonUnit is the button as the helper holds it.
type buttonUnit struct {
	opener gpio.ButtonOpener
	log    *slog.Logger

	mu       sync.Mutex
	cfg      config.Button
	btn      gpio.Button // nil when unwired or missing
	openErr  error       // why btn is nil although wired
	atOpen   bool        // read pressed when requested
	level    bool        // the level the edges say, for health
	since    time.Time   // when level began
	lastEdge time.Time
	bounces  []time.Time    // sub-debounce edges within bounceWindow
	sub      chan gpio.Edge // the waiting call's feed; nil when none waits
	ledStop  chan struct{}  // ends the LED pattern running, if any
	ledDone  chan struct{}  // closed when that pattern has let go of the LED
}

// newButtonUnit requests the lines of cfg; a failure leaves it missing.
func newButtonUnit(o gpio.ButtonOpener, cfg config.Button, log *slog.Logger) *buttonUnit {
	u := &buttonUnit{opener: o, log: log}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.openLocked(cfg)
	return u
}

// openLocked releases the lines held, if any, and requests cfg's. A wait
// under way ends: its lines are gone. u.mu is held.
func (u *buttonUnit) openLocked(cfg config.Button) {
	if u.btn != nil {
		u.stopLEDLocked()
		u.btn.Close()
	}
	if u.sub != nil {
		close(u.sub)
		u.sub = nil
	}
	u.cfg, u.btn, u.openErr, u.bounces = cfg, nil, nil, nil
	if !cfg.Wired() {
		return
	}
	b, err := u.opener.OpenButton(gpio.ButtonConfig{Pin: cfg.Pin, Pull: gpio.Pull(cfg.Pull), ActiveLow: cfg.ActiveLow,
		Debounce: cfg.Debounce.D(), LED: cfg.LED})
	if err != nil {
		u.openErr = err
		u.log.Error("privhelper: approval button missing: its line cannot be requested", "pin", cfg.Pin, "led", cfg.LED, "err", err)
		return
	}
	pressed, err := b.Pressed()
	if err != nil {
		b.Close()
		u.openErr = err
		u.log.Error("privhelper: approval button missing: its line cannot be read", "pin", cfg.Pin, "err", err)
		return
	}
	u.btn, u.atOpen, u.level, u.since, u.lastEdge = b, pressed, pressed, time.Now(), time.Time{}
	if pressed {
		u.log.Warn("privhelper: approval button reads pressed at start: stuck, or wired the other way round (guard.button.active_low)", "pin", cfg.Pin)
	}
	u.log.Info("privhelper: approval button held", "pin", cfg.Pin, "led", cfg.LED, "pull", cfg.Pull, "active_low", cfg.ActiveLow)
	go u.watch(b)
}

// reopen re-requests the lines when [guard.button] changed.
func (u *buttonUnit) reopen(cfg config.Button) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if cfg == u.cfg {
		return
	}
	u.log.Info("privhelper: config reload: guard.button changed; requesting its lines again", "pin", cfg.Pin, "led", cfg.LED)
	u.openLocked(cfg)
}

// close releases the lines.
func (u *buttonUnit) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.openLocked(config.Button{Pin: -1, LED: -1})
}

// watch follows b's edges for its life: the health record, and the
// waiting call's feed.
func (u *buttonUnit) watch(b gpio.Button) {
	for e := range b.Edges() {
		u.mu.Lock()
		if u.btn != b {
			u.mu.Unlock()
			return
		}
		if !u.lastEdge.IsZero() && e.Time.Sub(u.lastEdge) < u.cfg.Debounce.D() {
			u.bounces = append(u.bounces, e.Time)
		}
		u.lastEdge = e.Time
		if e.Pressed != u.level {
			u.level, u.since = e.Pressed, e.Time
			if !e.Pressed {
				u.atOpen = false
			}
		}
		if u.sub != nil {
			select {
			case u.sub <- e:
			default: // the waiting call is far behind; a press lost is a timeout, never an approval
			}
		}
		u.mu.Unlock()
	}
}

// busy is the one refusal of a second wait.
func busyButton(call string) *proto.Error {
	return (&proto.Error{Code: proto.CodeUnavailable, Retryable: true,
		Message: fmt.Sprintf("privhelper: button.wait for call %q: another call waits for the approval button; try again when it is answered", call)}).
		With("call", call)
}

// wait is button.wait.
func (u *buttonUnit) wait(ctx context.Context, r proto.ButtonWaitReq) (proto.ButtonWaitResp, error) {
	u.mu.Lock()
	if err := u.usableLocked(); err != nil {
		u.mu.Unlock()
		return proto.ButtonWaitResp{}, err
	}
	if u.sub != nil {
		u.mu.Unlock()
		return proto.ButtonWaitResp{}, busyButton(r.Call)
	}
	b, cfg := u.btn, u.cfg
	sub := make(chan gpio.Edge, 256)
	u.sub = sub
	start := time.Now()
	atStart, err := b.Pressed()
	if err != nil {
		u.sub = nil
		u.mu.Unlock()
		return proto.ButtonWaitResp{}, proto.Errorf(proto.CodeUnavailable, "privhelper: button.wait: reading the approval button: %v", err).With("pin", cfg.Pin)
	}
	u.ledLocked(b, ledWaiting)
	u.mu.Unlock()
	u.log.Info("privhelper: waiting for the approval button", "call", r.Call, "timeout_ms", r.TimeoutMS, "pressed_at_start", atStart)

	rule := gpio.PressRule{Debounce: cfg.Debounce.D(), LongPress: cfg.LongPress.D()}
	end := start.Add(r.Wait())
	deadline := time.NewTimer(r.Wait())
	defer deadline.Stop()
	tick := time.NewTicker(classifyPeriod)
	defer tick.Stop()
	var edges []gpio.Edge
	press, final := gpio.PressNone, false
	var failed error
	for press == gpio.PressNone && !final && failed == nil {
		select {
		case e, ok := <-sub:
			if !ok {
				failed = proto.Errorf(proto.CodeUnavailable, "privhelper: button.wait: the approval button was requested again by a config reload while call %q waited", r.Call)
				continue
			}
			edges = append(edges, e)
			continue
		case <-tick.C:
		case <-deadline.C:
			final = true
		case <-ctx.Done():
			failed = ctx.Err()
			continue
		}
		now := time.Now()
		if final {
			now = end
			drain(sub, &edges)
		}
		press = rule.Classify(atStart, edges, start, now, final)
	}

	u.mu.Lock()
	if u.sub == sub {
		u.sub = nil
	}
	out := ledDecline
	switch {
	case failed != nil:
		out = ledPattern{}
	case press == gpio.PressShort:
		out = ledApprove
	case press == gpio.PressNone:
		out = ledPattern{} // timeout: off
	}
	if u.btn == b {
		u.ledLocked(b, out)
	}
	u.mu.Unlock()
	waited := time.Since(start)
	if failed != nil {
		u.log.Info("privhelper: approval button wait ended unanswered", "call", r.Call, "waited_ms", waited.Milliseconds(), "err", failed)
		return proto.ButtonWaitResp{}, failed
	}
	resp := proto.ButtonWaitResp{Press: string(press), WaitedMS: waited.Milliseconds()}
	if press == gpio.PressNone {
		resp.Press = proto.PressTimeout
	}
	u.log.Info("privhelper: approval button answered", "call", r.Call, "press", resp.Press, "waited_ms", resp.WaitedMS)
	return resp, nil
}

// drain moves what sub holds into edges without waiting.
func drain(sub chan gpio.Edge, edges *[]gpio.Edge) {
	for {
		select {
		case e, ok := <-sub:
			if !ok {
				return
			}
			*edges = append(*edges, e)
		default:
			return
		}
	}
}

// usableLocked is why no wait can start, or nil. u.mu is held.
func (u *buttonUnit) usableLocked() error {
	switch {
	case !u.cfg.Wired():
		return proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: no approval button is wired: [guard.button] pin is -1 in the helper's config").With("config_key", "[guard.button] pin")
	case u.btn == nil:
		return (&proto.Error{Code: proto.CodeUnavailable, Retryable: true,
			Message: fmt.Sprintf("privhelper: the approval button on GPIO%d is missing: %v", u.cfg.Pin, u.openErr)}).With("pin", u.cfg.Pin)
	}
	return nil
}

// status is button.status.
func (u *buttonUnit) status() proto.ButtonStatusResp {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := proto.ButtonStatusResp{Wired: u.cfg.Wired(), Pin: u.cfg.Pin, LED: u.cfg.LED, Waiting: u.sub != nil}
	if !st.Wired {
		st.Pin, st.LED = -1, -1
		st.State, st.Detail = proto.ButtonUnwired, "no [guard.button] pin is set"
		return st
	}
	if u.btn == nil {
		st.State, st.Detail = proto.ButtonMissing, fmt.Sprintf("GPIO%d cannot be requested: %v", u.cfg.Pin, u.openErr)
		return st
	}
	now := time.Now()
	u.bounces = slices.DeleteFunc(u.bounces, func(t time.Time) bool { return now.Sub(t) > bounceWindow })
	pressed, err := u.btn.Pressed()
	if err != nil {
		st.State, st.Detail = proto.ButtonMissing, fmt.Sprintf("GPIO%d cannot be read: %v", u.cfg.Pin, err)
		return st
	}
	if pressed != u.level { // an edge lost: trust the line
		u.level, u.since = pressed, now
	}
	switch {
	case pressed && u.atOpen:
		st.State, st.Detail = proto.ButtonStuck, fmt.Sprintf("GPIO%d has read pressed since the helper requested it: a stuck button, or guard.button.active_low the wrong way round", u.cfg.Pin)
	case pressed && u.sub == nil && now.Sub(u.since) > stuckAfter:
		st.State, st.Detail = proto.ButtonStuck, fmt.Sprintf("GPIO%d has read pressed for %s with no call waiting", u.cfg.Pin, now.Sub(u.since).Round(time.Second))
	case len(u.bounces) >= bouncingEdges:
		st.State, st.Detail = proto.ButtonBouncing, fmt.Sprintf("GPIO%d made %d edges shorter than the debounce (%s) in the last %s: a worn contact or a noisy line",
			u.cfg.Pin, len(u.bounces), u.cfg.Debounce.D(), bounceWindow)
	default:
		st.State, st.Detail = proto.ButtonOK, fmt.Sprintf("GPIO%d held; pull %s, active_low %v", u.cfg.Pin, u.cfg.Pull, u.cfg.ActiveLow)
	}
	return st
}

// ledLocked starts p on b's LED, ending the pattern before. An empty
// pattern leaves the LED off. u.mu is held.
func (u *buttonUnit) ledLocked(b gpio.Button, p ledPattern) {
	u.stopLEDLocked()
	b.SetLED(false)
	if len(p.steps) == 0 || u.cfg.LED < 0 {
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	u.ledStop, u.ledDone = stop, done
	go func() {
		defer close(done)
		defer b.SetLED(false)
		for {
			for _, s := range p.steps {
				b.SetLED(s.on)
				t := time.NewTimer(s.d)
				select {
				case <-stop:
					t.Stop()
					return
				case <-t.C:
				}
			}
			if !p.repeat {
				return
			}
		}
	}()
}

// stopLEDLocked ends the pattern running and waits until its last
// SetLED(false) is done: else that write could land after the next
// pattern's first, cutting an approval's steady second short.
func (u *buttonUnit) stopLEDLocked() {
	if u.ledStop != nil {
		close(u.ledStop)
		<-u.ledDone
		u.ledStop, u.ledDone = nil, nil
	}
}

// press is the simulated board's finger (button.press).
func (u *buttonUnit) press(ctx context.Context, r proto.ButtonPressReq) (proto.ButtonPressResp, error) {
	u.mu.Lock()
	err := u.usableLocked()
	b, _ := u.btn.(*gpio.SimButton)
	cfg := u.cfg
	u.mu.Unlock()
	if err != nil {
		return proto.ButtonPressResp{}, err
	}
	if b == nil {
		return proto.ButtonPressResp{}, proto.Errorf(proto.CodeNotFound, "privhelper: button.press: only the simulated board's button can be pressed by a call")
	}
	// Long enough to pass the debounce, short of a long press; or past
	// long_press by a margin the classifier cannot miss.
	hold, what := cfg.Debounce.D()+min(100*time.Millisecond, (cfg.LongPress.D()-cfg.Debounce.D())/2), proto.PressShort
	if r.Long {
		hold, what = cfg.LongPress.D()+200*time.Millisecond, proto.PressLong
	}
	b.SetLevel(true)
	t := time.NewTimer(hold)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	b.SetLevel(false)
	if err := ctx.Err(); err != nil {
		return proto.ButtonPressResp{}, err
	}
	return proto.ButtonPressResp{Press: what, HeldMS: hold.Milliseconds()}, nil
}

// registerButton serves the button methods to a helper with a button
// backend; button.press only to the simulated board's.
func (s *Server) registerButton() {
	if s.hw.Button == nil {
		return
	}
	s.button = newButtonUnit(s.hw.Button, s.rules().policy.Config.Guard.Button, s.log)
	handle(s.mux, proto.ButtonWait, s.button.wait)
	handle(s.mux, proto.ButtonStatus, func(context.Context, proto.ButtonStatusReq) (proto.ButtonStatusResp, error) {
		return s.button.status(), nil
	})
	if _, sim := s.hw.Button.(*gpio.SimButtons); sim {
		handle(s.mux, proto.ButtonPress, s.button.press)
	}
}

// Close releases what the server holds for its life: the approval
// button's lines.
func (s *Server) Close() {
	if s.button != nil {
		s.button.close()
	}
}

// reserved refuses a GPIO method on a pin [guard.button] holds, whatever
// [gpio] pins says: no tool may see or drive the owner's approval.
func (s *Server) reserved(pin int) error {
	if slices.Contains(s.rules().policy.Config.Guard.ReservedPins(), pin) {
		return proto.Errorf(proto.CodePermissionDenied,
			"privhelper: GPIO%d is reserved by guard.button (the approval button or its LED): no call may configure, read or write it", pin).
			With("pin", pin).With("config_key", "[guard.button]")
	}
	return nil
}

// watchPeer cancels the returned context when the peer hangs up while an
// Approval method waits, so an agent that went away frees the button at
// once rather than at the wait's end. stop ends the watch and reports
// whether the connection may go on: false when the peer hung up or sent
// something while it should have been waiting for the answer.
func watchPeer(ctx context.Context, conn *net.UnixConn) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, err := conn.Read(b[:])
		done <- n == 0 && os.IsTimeout(err)
		cancel()
	}()
	return ctx, func() bool {
		conn.SetReadDeadline(time.Unix(1, 0))
		ok := <-done
		conn.SetReadDeadline(time.Time{})
		cancel()
		return ok
	}
}

package agent

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/approval"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// said reports whether an event of that name said text.
func (m *messages) said(event, text string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.events {
		if msg, _ := e["message"].(string); e["event"] == event && strings.Contains(msg, text) {
			return true
		}
	}
	return false
}

// deviceAnswers answers, as root at the console, every call that comes to
// wait for the device until stop is called: approve or deny. It returns
// how many it answered.
func deviceAnswers(t testing.TB, r *rig, approve bool) (stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for {
			ch := r.a.approvals.Changed()
			for _, w := range r.a.approvals.List() {
				if err := r.a.approvals.Decide(w.ID, approve, approval.Approver{Name: "root", UID: 0}, w.Bind); err == nil {
					n++
				}
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() int { cancel(); return <-done }
}

// onDevice puts critical calls to the device, as the default config does.
func onDevice(c *config.Config) { c.Guard.Critical = config.ChannelDevice }

// press presses the simulated board's approval button once a call waits
// for it, as the person at the Pi would.
func press(t *testing.T, r *rig, long bool) {
	t.Helper()
	for len(r.a.approvals.List()) == 0 {
		select {
		case <-r.a.approvals.Changed():
		case <-time.After(hangGuard):
			t.Error("no call came to wait for the button")
			return
		}
	}
	// The helper counts only presses that start after its wait began;
	// the wait begins just after the call shows up here.
	deadline := time.Now().Add(hangGuard)
	for {
		st, err := client.Call(context.Background(), r.helper, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err == nil && st.Waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the helper never waited for the button: %+v %v", st, err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := client.Call(context.Background(), r.helper, proto.ButtonPress, proto.ButtonPressReq{Long: long}); err != nil {
		t.Error(err)
	}
}

// TestShutdownWaitsForTheButton is issue 30's proof on the simulated
// board: a critical call waits; a press schedules it, a long press
// declines it, no press refuses it after the timeout, and the client is
// told what to do meanwhile.
func TestShutdownWaitsForTheButton(t *testing.T) {
	t.Parallel() // it mostly waits (a timeout, a scrape): beside the others
	r := newRig(t, func(c *config.Config) {
		onDevice(c)
		c.Guard.ApprovalTimeout = config.Duration(5 * time.Second)
	})
	var msgs messages
	s := r.serveMany()(msgs.options(), "2025-11-25")
	if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	scheduled := func() int {
		n := 0
		for _, e := range r.pw.Events() {
			if e.Event == "scheduled" {
				n++
			}
		}
		return n
	}
	// No token, no confirm, and a client that cannot ask: the button alone.
	done := make(chan struct{})
	go func() { defer close(done); press(t, r, false) }()
	res, sc, rec := callOnce(t, r, s, "system_shutdown", shutdownArgs)
	<-done
	if res.IsError || sc["scheduled"] != true || rec.Decision != store.DecisionAllow || rec.Channel != "button" || rec.Approver != "button" {
		t.Fatalf("pressed: %v, record %+v", sc, rec)
	}
	if scheduled() != 1 {
		t.Fatalf("logind saw %v", r.pw.Events())
	}
	if !msgs.said("approval_waiting", "GPIO 26") {
		t.Errorf("the client was not told to press the button: %v", msgs.events)
	}
	if _, err := client.Call(context.Background(), r.helper, proto.PowerCancel, proto.PowerCancelReq{}); err != nil {
		t.Fatal(err)
	}
	// A long press declines: nothing scheduled, one record.
	go func() { press(t, r, true) }()
	res, sc, rec = callOnce(t, r, s, "system_shutdown", shutdownArgs)
	if !res.IsError || rec.Decision != store.DecisionDeclined || rec.Channel != "button" || scheduled() != 1 {
		t.Fatalf("long press: %v, record %+v, logind %v", sc, rec, r.pw.Events())
	}
	// No press: refused when the time runs out.
	res, sc, rec = callOnce(t, r, s, "system_shutdown", shutdownArgs)
	e := sc["error"].(map[string]any)
	if !res.IsError || rec.Decision != store.DecisionDeclined || e["details"].(map[string]any)["approval"] != "timeout" || rec.WaitedMS < 4000 {
		t.Fatalf("no press: %v, record %+v", sc, rec)
	}
	if scheduled() != 1 {
		t.Fatalf("a refused shutdown reached logind: %v", r.pw.Events())
	}
}

// TestWideningConfigNeedsTheDevice: with critical lowered to the client,
// a config change that widens a power still needs the device. Neither an
// accepted elicitation nor a change token gets it through; root at the
// console does. Each refusal changes nothing and leaves one record.
func TestWideningConfigNeedsTheDevice(t *testing.T) {
	t.Parallel() // it mostly waits (a timeout, a scrape): beside the others
	r := newRig(t, func(c *config.Config) {
		gpioWritesOff(c)
		c.System.MinPowerInterval = config.Duration(10 * time.Minute)
		c.Guard.ApprovalTimeout = config.Duration(5 * time.Second)
	})
	unchanged := func(what string) {
		t.Helper()
		if r.a.conf().GPIO.Writes || r.a.conf().System.MinPowerInterval.D() != 10*time.Minute {
			t.Fatalf("%s changed the config", what)
		}
		if _, err := os.Stat(mcpDropIn(r)); err == nil {
			t.Fatalf("%s wrote the drop-in", what)
		}
	}
	// The person at the client says yes; nobody is at the Pi.
	s := r.serveMany()(person("accept", map[string]any{"confirm": true}), "2025-11-25")
	res, sc, rec := callOnce(t, r, s, "manage_config_apply", map[string]any{"toml": gpioWritesOnTOML, "reason": "let me write"})
	if !res.IsError || rec.Decision != store.DecisionDeclined || rec.Elicitation != "" || rec.WaitedMS < 4000 {
		t.Fatalf("elicitation alone: %v, record %+v", sc, rec)
	}
	unchanged("an elicitation")
	// A change token, and a deny at the console.
	_, prep := r.asSession(s, "change_prepare", map[string]any{"tool": "manage_config_apply", "arguments": map[string]any{"toml": gpioWritesOnTOML}})
	stop := deviceAnswers(t, r, false)
	res, sc = r.asSession(s, "change_commit", map[string]any{"token": prep["token"]})
	stop()
	if !res.IsError || !strings.Contains(sc["error"].(map[string]any)["message"].(string), "declined on the device") {
		t.Fatalf("token alone: %v", sc)
	}
	unchanged("a change token")
	// A lowered safety floor goes to the device too.
	stop = deviceAnswers(t, r, false)
	res, sc, _ = callOnce(t, r, s, "manage_config_apply", map[string]any{"toml": "[system]\nmin_power_interval = \"0s\"\n", "reason": "reboot faster"})
	stop()
	if !res.IsError {
		t.Fatalf("floor lowered: %v", sc)
	}
	unchanged("a lowered floor")
	// Root at the console approves: applied, and the record says so.
	stop = deviceAnswers(t, r, true)
	res, sc, rec = callOnce(t, r, s, "manage_config_apply", map[string]any{"toml": gpioWritesOnTOML, "reason": "let me write"})
	stop()
	if res.IsError || !r.a.conf().GPIO.Writes || rec.Channel != "console:root" || rec.Approver != "root" {
		t.Fatalf("approved at the console: %v, record %+v", sc, rec)
	}
	// Narrowing goes through the client as before: the person's yes.
	res, sc, rec = callOnce(t, r, s, "manage_config_apply", map[string]any{"toml": "", "reason": "writes off again"})
	if res.IsError || r.a.conf().GPIO.Writes || rec.Channel != "client:elicitation" {
		t.Fatalf("narrowing: %v, record %+v", sc, rec)
	}
}

// A helper that restarts while a call waits for its button declines the
// call, audited: a wait the person can no longer answer must not stand.
func TestHelperRestartDeclinesTheWait(t *testing.T) {
	r := newRig(t, onDevice)
	s := r.serveWith(nil)
	go func() {
		for len(r.a.approvals.List()) == 0 {
			<-r.a.approvals.Changed()
		}
		c := r.helper
		for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if st, err := client.Call(context.Background(), c, proto.ButtonStatus, proto.ButtonStatusReq{}); err == nil && st.Waiting {
				break
			}
		}
		r.killHelper()
		r.startHelper()
	}()
	res, sc, rec := callOnce(t, r, s, "system_shutdown", shutdownArgs)
	if !res.IsError || rec.Decision != store.DecisionDeclined || len(r.pw.Events()) != 0 {
		t.Fatalf("helper restarted during the wait: %v, record %+v, logind %v", sc, rec, r.pw.Events())
	}
}

// A wait the agent's stop cut short is declined and audited at the next
// start, from the note the broker kept in the store.
func TestAgentRestartDeclinesTheWait(t *testing.T) {
	r := newRig(t, onDevice)
	note := approval.Waiting{ID: "7", Principal: "alice", Role: "admin", Tool: "system.shutdown", Name: "system_shutdown",
		Bind: "sha256:x", Since: time.Now().Add(-time.Minute), Correlation: "c-1234"}
	b, _ := json.Marshal(note)
	if err := r.db.PutApprovalWait(note.ID, b); err != nil {
		t.Fatal(err)
	}
	before := r.auditCount()
	r.a.declineLeftWaits() // what New does at start
	if n := r.auditCount() - before; n != 1 {
		t.Fatalf("%d records for the cut wait, want 1", n)
	}
	recs, _, _ := r.db.QueryAudit(storeQuery(1))
	if rec := recs[0]; rec.Decision != store.DecisionDeclined || rec.Tool != "system.shutdown" || rec.Principal != "alice" || rec.WaitedMS < 59000 {
		t.Fatalf("record %+v", rec)
	}
	if left, _ := r.db.TakeApprovalWaits(); len(left) != 0 {
		t.Fatalf("notes left: %v", left)
	}
}

// Both protocol eras wait alike: the device's answer is not an input
// request the client could answer itself.
func TestDeviceApprovalInBothEras(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, onDevice)
			// A client that would say yes if asked: it never is.
			s := r.serveMany()(person("accept", map[string]any{"confirm": true}), era)
			done := make(chan struct{})
			go func() { defer close(done); press(t, r, false) }()
			res, sc, rec := callOnce(t, r, s, "system_shutdown", shutdownArgs)
			<-done
			if res.IsError || sc["scheduled"] != true || rec.Channel != "button" || rec.Elicitation != "" {
				t.Fatalf("%s: %v, record %+v", era, sc, rec)
			}
		})
	}
}

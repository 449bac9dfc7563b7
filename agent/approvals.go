package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/approval"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Approvals on the device (agent/approval): the broker the pipeline waits
// in, the console socket `raspi-mcp approve` talks to, the notes that let a
// restart decline what was waiting, and what the client is told meanwhile.

// newApprovals is the broker of this agent. button is the helper's button,
// nil when the agent has no helper.
func (a *Agent) newApprovals(button approval.Button) *approval.Broker {
	var j approval.Journal
	if a.store != nil {
		j = waitNotes{a.store}
	}
	o := approval.Options{
		Guard:   func() config.Guard { return a.conf().Guard },
		Button:  button,
		Journal: j,
		Log:     a.log,
		Console: a.consoleCommand(),
	}
	if a.mode == "sim" {
		o.Press = "raspi-mcp sim press"
	}
	return approval.New(o)
}

// consoleCommand is what the person runs at the Pi to approve.
func (a *Agent) consoleCommand() string {
	if a.mode == "sim" {
		return "raspi-mcp approve" // laptop mode: the CLI finds the laptop's agent
	}
	return "sudo raspi-mcp approve"
}

// ServeConsole answers `raspi-mcp approve` on ln until ctx ends.
func (a *Agent) ServeConsole(ctx context.Context, ln *net.UnixListener) error {
	c := &approval.Console{B: a.approvals, Guard: func() config.Guard { return a.conf().Guard }, Log: a.log, AgentUID: os.Getuid()}
	if os.Getuid() == 0 {
		c.AgentUID = -1 // an agent run as root (a test VM): root is the owner
	}
	return c.Serve(ctx, ln)
}

// waitNotes keep the broker's notes in the agent's database.
type waitNotes struct{ db *store.DB }

func (n waitNotes) Begin(w approval.Waiting) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return n.db.PutApprovalWait(w.ID, b)
}

func (n waitNotes) End(id string) error { return n.db.DeleteApprovalWait(id) }

// declineLeftWaits audits, as declined, every call that waited for the
// device when the agent last stopped: the person never answered it, and
// it never ran.
func (a *Agent) declineLeftWaits() {
	if a.store == nil {
		return
	}
	left, err := a.store.TakeApprovalWaits()
	if err != nil {
		a.log.Error("approval: reading the waits a restart cut short", "err", err)
		return
	}
	for id, note := range left {
		var w approval.Waiting
		if err := json.Unmarshal(note, &w); err != nil {
			a.log.Error("approval: a wait's note does not decode", "id", id, "err", err)
			continue
		}
		now := time.Now()
		te := tool.Errf(errcode.PermissionDenied, "%s waited for an approval on the device when the agent stopped; declined, it did not run", w.Name).
			With("tool", w.Tool).With("approval_id", w.ID)
		rec := tool.Record{Time: now.UTC(), CorrelationID: w.Correlation, Principal: w.Principal, Role: w.Role, Tool: w.Tool,
			Decision: tool.DecisionDeclined, Reason: w.Reason, Intent: w.Intent, DurationMS: now.Sub(w.Since).Milliseconds(),
			WaitedMS: now.Sub(w.Since).Milliseconds()}
		if _, err := a.pipe.Record(rec, map[string]any{"approval_id": w.ID, "bind": w.Bind}, nil, te); err != nil {
			a.log.Error("approval: auditing a wait a restart cut short", "id", id, "err", err)
		}
	}
}

// tellWaiting tells the client of a call that waits for the device what
// the person should do: once as a line of the agent log and (2025-11-25
// era only, notify.go) a notifications/message, and as progress every few
// seconds for a caller that sent a progress token (which also keeps a
// client's request timeout from running out while the person walks to the
// Pi, where the client resets it on progress).
func (a *Agent) tellWaiting(ctx context.Context, t *tool.Tool, c *tool.Call, msg string) (stop func()) {
	if c.Session == nil {
		return func() {}
	}
	ss, tok := c.Session, c.ProgressToken
	data := map[string]any{"event": "approval_waiting", "tool": t.Name(), "message": msg, "correlation_id": c.CorrelationID}
	if tp := c.Traceparent(); tp != "" {
		data[tool.MetaTraceparent] = tp
	}
	a.logEvent(ctx, "notice", data)
	// notifications/message in the 2025-11-25 era only (notify.go).
	if legacyLogging(ss, c.Request()) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = ss.Log(sctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel("notice"), Logger: loggerName, Data: data})
		cancel()
	}
	if tok == nil {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		start := time.Now()
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for n := 0; ; n++ {
			m := msg
			if n > 0 {
				m = fmt.Sprintf("still waiting for the approval on the device (%s): %s", time.Since(start).Round(time.Second), msg)
			}
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = ss.NotifyProgress(pctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n), Message: m})
			cancel()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// helperButton is the approval button as the root helper holds it.
type helperButton struct{ c *client.Client }

func (b helperButton) Wait(ctx context.Context, id string, timeout time.Duration) (string, error) {
	timeout = min(max(timeout, proto.MinButtonWait), proto.MaxButtonWait)
	res, err := client.Call(ctx, b.c, proto.ButtonWait, proto.ButtonWaitReq{Call: id, TimeoutMS: timeout.Milliseconds()})
	if err != nil {
		return "", err
	}
	return res.Press, nil
}

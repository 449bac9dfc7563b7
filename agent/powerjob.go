package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// powerWatch keeps the queued power action and logind in step. logind holds
// the real schedule; the queue is what survives anything else:
//   - the action is due and logind no longer has it: it happened (this is
//     usually the first look after the reboot). It is recorded as the last
//     power action, which the rate limit counts from, and audited.
//   - it is still ahead and logind has lost it (a helper or logind restart):
//     it is scheduled again, and audited.
//   - logind has a different action (someone ran shutdown -r by hand): the
//     queue lets go of ours rather than fight the owner.
type powerWatch struct {
	store    *store.DB // the queued action
	helper   *client.Client
	flush    func() error // writes the sampler's buffered samples
	auditJob func(rec tool.Record, in, out any) error
	log      *slog.Logger
	wakeC    chan struct{}
	retry    time.Duration
	grace    time.Duration // how long past due logind may still show the action
	lead     time.Duration // how long before the action the samples are flushed
	// flushedFor is the due time of the action whose pre-flush ran, so a
	// wake-up in the lead window does not flush twice.
	flushedFor time.Time
}

func (a *Agent) newPowerWatch() *powerWatch {
	return &powerWatch{store: a.store, helper: a.helper, flush: a.sampler.Flush, auditJob: a.auditJob, log: a.log, wakeC: make(chan struct{}, 1), retry: 5 * time.Second, grace: 30 * time.Second, lead: 30 * time.Second}
}

func (w *powerWatch) wake() {
	select {
	case w.wakeC <- struct{}{}:
	default:
	}
}

func (w *powerWatch) run(ctx context.Context) {
	poll(ctx, w.log, "power job", w.retry, w.wakeC, w.check)
}

// check looks once and says when to look again.
func (w *powerWatch) check(ctx context.Context) (time.Duration, error) {
	j, ok, err := w.store.PendingPower()
	if err != nil || !ok {
		return time.Hour, err
	}
	st, err := client.Call(ctx, w.helper, proto.PowerState, proto.PowerStateReq{})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	same := st.Scheduled && st.Action == j.Action && st.At.Sub(j.At).Abs() < time.Second
	switch {
	case same && now.Before(j.At.Add(-w.lead)):
		// Wake up in time to write the buffered samples first.
		return max(j.At.Add(-w.lead).Sub(now), time.Second), nil
	case same && now.Before(j.At.Add(w.grace)):
		if now.Before(j.At) && !w.flushedFor.Equal(j.At) {
			// A clean shutdown stops the agent, which flushes too; this
			// covers one that kills it instead.
			w.flushedFor = j.At
			if err := w.flush(); err != nil {
				w.log.Error("flushing samples before the "+j.Action, "err", err)
			}
		}
		return max(time.Until(j.At.Add(w.grace)), time.Second), nil
	case same:
		// Overdue and still pending: logind has it, nothing for us to do
		// but look again.
		return time.Minute, nil
	case st.Scheduled:
		w.log.Warn("another power action was scheduled outside raspi-mcp; dropping ours", "ours", j.Action, "ours_at", j.At, "theirs", st.Action, "theirs_at", st.At)
		return time.Hour, w.finish(j, false, "replaced outside raspi-mcp by "+st.Action+" at "+st.At.UTC().Format(time.RFC3339))
	case now.Before(j.At.Add(-time.Second)):
		if _, err := client.Call(ctx, w.helper, proto.PowerSchedule, proto.PowerScheduleReq{Action: j.Action, At: j.At, Reason: j.Reason}); err != nil {
			return 0, err
		}
		w.log.Info("power action re-scheduled after logind lost it", "action", j.Action, "at", j.At)
		w.audit(j, "re-scheduled: logind had lost it")
		return max(time.Until(j.At.Add(w.grace)), time.Second), nil
	}
	return time.Hour, w.finish(j, true, "took effect")
}

func (w *powerWatch) finish(j store.PowerJob, done bool, what string) error {
	if err := w.store.FinishPower(done, j.At); err != nil {
		return err
	}
	w.audit(j, what)
	return nil
}

// audit records what became of the job, as its own principal.
func (w *powerWatch) audit(j store.PowerJob, what string) {
	id := "system.reboot"
	if j.Action == proto.ActionPoweroff {
		id = "system.shutdown"
	}
	rec := tool.Record{Time: time.Now().UTC(), CorrelationID: j.CorrelationID, Principal: j.Principal,
		Tool: id, Reason: "scheduled " + j.Action + " " + what, Message: "due " + j.At.UTC().Format(time.RFC3339)}
	if err := w.auditJob(rec, j, map[string]any{"job_id": j.ID, "result": what}); err != nil {
		w.log.Error("audit append failed", "job", j.ID, "err", err)
	}
}

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

// reverter ends GPIO leases. The queue is the jobs bucket, not memory, so a
// lease ends even if the agent or the helper restarted meanwhile: on start an
// overdue revert runs at once, and a revert the helper could not take is
// retried until it can.
type reverter struct {
	store    *store.DB // the leases' queue
	helper   *client.Client
	auditJob func(rec tool.Record, in, out any) error
	log      *slog.Logger
	wakeC    chan struct{}
	retry    time.Duration
}

func (a *Agent) newReverter() *reverter {
	return &reverter{store: a.store, helper: a.helper, auditJob: a.auditJob, log: a.log, wakeC: make(chan struct{}, 1), retry: 2 * time.Second}
}

// wake makes the loop re-read the queue (a new lease may be the soonest).
func (r *reverter) wake() {
	select {
	case r.wakeC <- struct{}{}:
	default:
	}
}

func (r *reverter) run(ctx context.Context) {
	for {
		next := time.Hour
		list, err := r.store.ListGPIOReverts()
		if err != nil {
			r.log.Error("reading gpio reverts", "err", err)
			next = r.retry
		}
		for _, rv := range list {
			wait := time.Until(rv.Due)
			if wait > 0 {
				next = min(next, wait)
				continue
			}
			if err := r.revert(ctx, rv); err != nil {
				r.log.Warn("gpio revert failed; retrying", "pin", rv.Pin, "err", err)
				next = min(next, r.retry)
			}
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.wakeC:
		case <-t.C:
		}
		t.Stop()
	}
}

// revert writes the pin back and audits it as the lease's own principal.
func (r *reverter) revert(ctx context.Context, rv store.GPIORevert) error {
	// A newer write may have replaced or ended this lease meanwhile.
	cur, ok, err := r.store.GPIORevertOf(rv.Pin)
	if err != nil || !ok || !cur.Due.Equal(rv.Due) {
		return err
	}
	start := time.Now()
	_, err = client.Call(ctx, r.helper, proto.GPIOWrite, proto.GPIOWriteReq{Pin: rv.Pin, Value: rv.Value})
	if err != nil {
		return err
	}
	if err := r.store.DeleteGPIORevert(rv.Pin); err != nil {
		return err
	}
	return r.auditJob(tool.Record{Time: start.UTC(), CorrelationID: rv.CorrelationID, Principal: rv.Principal,
		Tool: "gpio.write_pin", Reason: "lease ended: revert", DurationMS: ms(time.Since(start)),
		Message: "late by " + time.Since(rv.Due).Round(time.Millisecond).String()}, rv, map[string]any{"pin": rv.Pin, "value": rv.Value})
}

// auditJob records what a queued job did on its own, after the call that
// queued it: as that call's principal, with role "system", always allowed.
func (a *Agent) auditJob(rec tool.Record, in, out any) error {
	rec.Role, rec.Decision = "system", "allow"
	_, err := a.pipe.Record(rec, in, out, nil)
	return err
}

package agent

import (
	"context"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/approval"
)

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

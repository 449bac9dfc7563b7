package agent

import (
	"context"
	"log/slog"
	"time"
)

// poll runs check until ctx ends: again when the duration it returned has
// passed, at once on a wake, and after retry when it failed (logged, with
// what it was checking). The power-job and self-update watchers are this
// loop around their own check.
func poll(ctx context.Context, log *slog.Logger, what string, retry time.Duration, wake <-chan struct{}, check func(context.Context) (time.Duration, error)) {
	for {
		next, err := check(ctx)
		if err != nil {
			log.Warn(what+" check failed; retrying", "err", err)
			next = retry
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

package daemon

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// parentPoll is how often a laptop-mode helper checks that its agent lives.
const parentPoll = time.Second

// stopWithParent calls stop once the process parent, which started this one,
// has gone (the helper has been re-parented). In laptop mode the agent starts the
// helper as its child; on Linux the kernel also signals the child when the
// parent dies (Pdeathsig), but macOS has no such thing, and a helper left
// behind by a killed agent would keep the socket the next `serve --sim`
// needs. It returns when ctx ends.
func stopWithParent(ctx context.Context, parent int, stop context.CancelFunc, log *slog.Logger) {
	t := time.NewTicker(parentPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != parent {
				log.Warn("the agent that started this helper is gone; stopping", "parent_pid", parent)
				stop()
				return
			}
		}
	}
}

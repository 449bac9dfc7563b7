// Package sdnotify tells systemd a daemon is ready and keeps its watchdog fed.
// Outside systemd (no NOTIFY_SOCKET) every call is a no-op, so laptop mode
// and tests need no special casing.
package sdnotify

import (
	"context"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Ready sends READY=1 with a status line.
func Ready(status string) {
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady+"\nSTATUS="+status)
}

// Stopping sends STOPPING=1.
func Stopping() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) }

// Watchdog pings systemd at half the unit's WatchdogSec while healthy returns
// nil, until ctx ends. A failing check stops the pings so systemd restarts us.
func Watchdog(ctx context.Context, healthy func() error) {
	every, err := daemon.SdWatchdogEnabled(false)
	if err != nil || every == 0 {
		return
	}
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if healthy == nil || healthy() == nil {
				_, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog)
			}
		}
	}
}

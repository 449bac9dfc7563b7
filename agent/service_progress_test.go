package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// The tools that wait on a helper method bounded as slow (proto.Systemd or
// proto.Job: a daemon-reload, a unit's job, logind, apt's cache) are Slow:
// a client that sent a progress token hears a heartbeat while systemd
// takes its time instead of timing the call out (issue 28).
func TestSystemdToolsAreSlowAndReportProgress(t *testing.T) {
	r := newRig(t, nil)
	for _, name := range []string{"service_control_service", "service_set_enabled", "system_reboot", "system_shutdown",
		"system_cancel_scheduled_power_action", "manage_update_server"} {
		tl, ok := r.a.tools.Lookup(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		if !tl.Slow() {
			t.Errorf("%s waits on systemd through the helper but is not Slow", name)
		}
	}
	for _, m := range []proto.Info{proto.ServiceControl.Info(), proto.ServiceEnable.Info(), proto.PowerSchedule.Info(), proto.UpdatePlan.Info()} {
		if m.Class == proto.Quick {
			t.Errorf("%s is quick: its tool's heartbeat would outlive no bound", m.Name)
		}
	}

	var m messages
	s := r.serveMany()(m.options(), "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for i, call := range []struct {
		name string
		args map[string]any
	}{
		{"service_set_enabled", map[string]any{"service_name": "nginx", "enabled": false, "confirm": true, "reason": "progress"}},
		{"service_control_service", map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "progress"}},
	} {
		tok := "svc-" + call.name
		p := &mcp.CallToolParams{Name: call.name, Arguments: call.args}
		p.SetProgressToken(tok)
		res, err := s.CallTool(ctx, p)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", call.name, err, res)
		}
		var mine []*mcp.ProgressNotificationParams
		waitFor(t, call.name+"'s finish progress", time.Minute, func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			mine = slices.DeleteFunc(slices.Clone(m.progress), func(n *mcp.ProgressNotificationParams) bool { return n.ProgressToken != tok })
			return slices.ContainsFunc(mine, func(n *mcp.ProgressNotificationParams) bool { return strings.Contains(n.Message, "finished") })
		})
		// Notifications may be handled out of order; their values order them.
		slices.SortFunc(mine, func(a, b *mcp.ProgressNotificationParams) int { return int(a.Progress - b.Progress) })
		if len(mine) < 2 || !strings.Contains(mine[0].Message, "started") || !strings.Contains(mine[len(mine)-1].Message, "finished") {
			t.Fatalf("call %d (%s): progress %+v, want started ... finished", i, call.name, mine)
		}
		for j := 1; j < len(mine); j++ {
			if mine[j].Progress == mine[j-1].Progress {
				t.Fatalf("%s: two notifications with progress %v", call.name, mine[j].Progress)
			}
		}
	}
}

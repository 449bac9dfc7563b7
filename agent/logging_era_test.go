package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the person should know (here: the client's own call refused) is a
// line of the agent log in both protocol eras; notifications/message
// carries it in the 2025-11-25 era only, never in 2026-07-28, even to a
// request whose _meta asks for a log level.
func TestEventsAreLoggedAndNotifiedOnlyInTheLegacyEra(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			r := newRig(t, nil)
			var m messages
			s := r.serveMany()(m.options(), era)
			p := &mcp.CallToolParams{Name: "service_control_service", Arguments: map[string]any{"service_name": "nginx", "action": "restart"},
				Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
			if era == "2025-11-25" {
				if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
			} else {
				p.Meta[mcp.MetaKeyLogLevel] = "debug"
			}
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			// A high-risk call without confirm is refused by policy.
			res, err := s.CallTool(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if _, e := decodeResult[serviceControlOut](t, res); e == nil || e.Code != CodeFailedPrecondition {
				t.Fatalf("restart without confirm: %+v", e)
			}
			logged := func() bool {
				for _, e := range r.appLog.Entries(slog.LevelWarn, "agent", 100) {
					if strings.Contains(e.Attrs, "event=call_denied") && strings.Contains(e.Attrs, "traceparent=00-4bf92f") {
						return true
					}
				}
				return false
			}
			if !logged() {
				t.Fatalf("no call_denied line with the traceparent in the agent log: %+v", r.appLog.Entries(slog.LevelDebug, "", 100))
			}
			if era == "2025-11-25" {
				waitFor(t, "the denial message", 60*time.Second, func() bool { return m.has("call_denied") })
				return
			}
			// The session's last answer comes after anything the agent sent
			// for the call on the same connection.
			if _, err := s.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.events) != 0 {
				t.Fatalf("notifications/message in the 2026-07-28 era: %v", m.events)
			}
		})
	}
}

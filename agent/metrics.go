package agent

import "context"

func (a *Agent) registerMetrics() {
	add(a.tools, Spec[NoArgs, HealthSnapshot]{
		ID: "metrics.get_realtime_metrics", Title: "Realtime metrics",
		Description: "The same snapshot as system_get_health_snapshot (spec 002 §4.1): CPU, memory, disk, temperature, throttling.",
		Rule:        Rule{MinRole: RoleRead},
		OutProps:    healthProps,
		Run:         func(ctx context.Context, _ *Call, _ NoArgs) (HealthSnapshot, error) { return a.health(ctx) },
		Summary:     func(_ NoArgs, h HealthSnapshot) string { return healthLine(h) },
	})
}

package agent

func (a *Agent) registerMetrics() {
	add(a.tools, a.healthSpec("metrics.get_realtime_metrics", "Realtime metrics",
		"The same snapshot as system_get_health_snapshot (spec 002 §4.1): CPU, memory, disk, temperature, throttling."))
}

package agent

import "testing"

// TestCatalogLookupNamesRegisteredTools walks every branch of the catalog's
// lookup (errors.go) from a tool that reaches it and wants the read tool it
// names: a branch naming a tool the catalog no longer has would otherwise
// go quiet, as the lookup drops what the registry does not know.
func TestCatalogLookupNamesRegisteredTools(t *testing.T) {
	r := newRig(t, nil)
	l := catalogLookup{r.a.tools}
	for _, c := range []struct {
		from, param string
		args        map[string]any
		want        string
	}{
		{"gpio.write_pin", "pin", nil, "gpio.list_pins"},
		{"service.get_status", "service_name", map[string]any{"service_name": "nginx"}, "service.list_services"},
		{"process.send_signal", "pid", nil, "process.list_processes"},
		{"metrics.stop_sampling_job", "job_id", nil, "metrics.list_sampling_jobs"},
		{"manage.apply_os_updates", "plan_hash", nil, "manage.preview_os_updates"},
		{"manage.cancel_job", "job_id", nil, "manage.list_jobs"},
		{"metrics.query_history", "metrics", nil, "metrics.get_realtime_metrics"},
		{"sensors.read", "", nil, "sensors.list"},
		{"i2c.read", "address", map[string]any{"bus": 1}, "i2c.scan_bus"},
		{"i2c.read", "address", nil, "i2c.list_buses"},
		{"i2c.write", "", nil, "i2c.list_buses"},
		{"change.commit", "token", nil, "system.get_capabilities"},
		{"metrics.get_samples", "", nil, "metrics.list_sampling_jobs"},
	} {
		from, ok := r.a.tools.Get(c.from)
		if !ok {
			t.Fatalf("no tool %s to start from", c.from)
		}
		s, ok := l.lookupFor(from, c.param, c.args)
		if !ok || s.Tool != r.a.wire(c.want) {
			t.Errorf("lookup for %s %q = %q, %v; want %s", c.from, c.param, s.Tool, ok, r.a.wire(c.want))
		}
	}
}

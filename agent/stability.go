package agent

// Stability says how settled a tool's contract is (alpha, beta, stable), as
// system_get_capabilities reports it so a client knows what it may rely on.
// It is decided here, in one table, rather than tool by tool:
//
//   - stable: the tools the tool catalog lists for the first release (spec
//     002 §2.2, and system.get_network_info of its addendum's phase 1),
//     whose parameter and result schemas the contract test compares with
//     the catalog's;
//   - beta: the tools the catalog plans for a later phase ("Phase 2+"), and
//     the tools this project adds beyond the catalog (history queries,
//     summaries, the journal, sensors, change tokens, job queue): their
//     shape may still change.
//
// A tool not listed is beta: a new tool starts out unsettled.
var stableTools = map[string]bool{
	"system.get_basic_info": true, "system.get_health_snapshot": true, "system.reboot": true, "system.shutdown": true,
	"system.get_capabilities": true, "system.get_network_info": true,
	"metrics.get_realtime_metrics": true, "metrics.start_sampling_job": true, "metrics.stop_sampling_job": true, "metrics.get_samples": true,
	"network.get_status": true,
	"gpio.list_pins":     true, "gpio.configure_pin": true, "gpio.read_pin": true, "gpio.write_pin": true, "gpio.set_pwm": true,
	"i2c.list_buses": true, "i2c.scan_bus": true, "i2c.read": true, "i2c.write": true,
	"camera.take_photo":     true,
	"service.list_services": true, "service.get_status": true, "service.control_service": true, "service.set_enabled": true,
	"process.list_processes": true, "process.get_process_details": true,
	"logs.get_recent_app_logs": true, "logs.get_recent_audit_logs": true,
	"manage.get_server_status": true,
}

func stabilityOf(id string) string {
	if stableTools[id] {
		return "stable"
	}
	return "beta"
}

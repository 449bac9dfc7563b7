package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

func names(sc map[string]any, list, key string) []string {
	var out []string
	items, _ := sc[list].([]any)
	for _, it := range items {
		out = append(out, fmt.Sprint(it.(map[string]any)[key]))
	}
	return out
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func (r *rig) unitState(name string) string {
	r.t.Helper()
	d, err := r.units.Get(context.Background(), name)
	if err != nil {
		r.t.Fatal(err)
	}
	return d.ActiveState
}

func TestListServicesFiltersAndPages(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "service_list_services", map[string]any{})
	if res.IsError {
		t.Fatal(sc)
	}
	all := names(sc, "services", "name")
	if !slices.Contains(all, "nginx.service") || !slices.Contains(all, "dbus.service") {
		t.Fatalf("services = %v", all)
	}
	if !slices.Contains(strs(sc["failed"]), "backup.service") {
		t.Fatalf("failed = %v, want backup.service", sc["failed"])
	}
	if int(sc["total_count"].(float64)) != len(all) || sc["has_more"] != false {
		t.Fatalf("total %v has_more %v for %d listed", sc["total_count"], sc["has_more"], len(all))
	}

	_, sc = r.as(admin, "service_list_services", map[string]any{"state": "failed"})
	if got := names(sc, "services", "name"); !slices.Equal(got, []string{"backup.service"}) {
		t.Fatalf("state failed: %v", got)
	}
	_, sc = r.as(admin, "service_list_services", map[string]any{"pattern": "nginx"})
	if got := names(sc, "services", "name"); !slices.Equal(got, []string{"nginx.service"}) {
		t.Fatalf("pattern nginx: %v", got)
	}
	_, sc = r.as(admin, "service_list_services", map[string]any{"enabled": false, "pattern": "motion*"})
	if got := names(sc, "services", "name"); !slices.Equal(got, []string{"motion.service"}) {
		t.Fatalf("disabled motion*: %v", got)
	}

	_, p1 := r.as(admin, "service_list_services", map[string]any{"limit": 2})
	_, p2 := r.as(admin, "service_list_services", map[string]any{"limit": 2, "offset": 2})
	if p1["has_more"] != true || p1["returned_count"].(float64) != 2 || !slices.Equal(names(p2, "services", "name"), all[2:min(4, len(all))]) {
		t.Fatalf("pages: %v then %v, all %v", names(p1, "services", "name"), names(p2, "services", "name"), all)
	}
	for _, s := range p1["services"].([]any) {
		m := s.(map[string]any)
		if m["name"] == "nginx.service" && m["changeable"] != true {
			t.Fatalf("nginx is in the laptop allow list but not changeable: %v", m)
		}
	}

	res, sc = r.as(admin, "service_list_services", map[string]any{"pattern": "[nginx"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad glob: %v", sc)
	}
}

func TestServiceStatusNotFoundAndLogs(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "service_get_status", map[string]any{"service_name": "dbus"})
	if res.IsError {
		t.Fatal(sc)
	}
	if sc["name"] != "dbus.service" || sc["status"] != "active" {
		t.Fatalf("dbus: %v", sc)
	}
	if deps := strs(sc["active_dependents"]); !slices.Contains(deps, "bluetooth.service") {
		t.Fatalf("active_dependents = %v", deps)
	}
	res, sc = r.as(admin, "service_get_status", map[string]any{"service_name": "no-such-thing"})
	if errCode(res, sc) != CodeNotFound {
		t.Fatalf("missing unit: %v", sc)
	}
	res, sc = r.as(admin, "service_get_status", map[string]any{"service_name": "-h"})
	if errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("option-like name: %v", sc)
	}

	// A restart writes journal lines the status then shows.
	if res, sc = r.as(admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "test"}); res.IsError {
		t.Fatal(sc)
	}
	_, sc = r.as(admin, "service_get_status", map[string]any{"service_name": "nginx", "log_lines": 5})
	if logs := sc["recent_logs"].([]any); len(logs) == 0 {
		t.Fatalf("no journal lines after a restart: %v", sc)
	}

	r.cfg.Logs.JournalUnits = []string{"ssh*"}
	_, sc = r.as(admin, "service_get_status", map[string]any{"service_name": "nginx", "log_lines": 5})
	if len(sc["recent_logs"].([]any)) != 0 || sc["logs_note"] == nil {
		t.Fatalf("journal outside [logs] journal_units was shown: %v", sc)
	}
}

func TestControlServiceGuardsDryRunAndSuccess(t *testing.T) {
	r := newRig(t, nil)
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	stop := map[string]any{"service_name": "nginx.service", "action": "stop"}

	if res, sc := r.as(reader, "service_control_service", stop); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("read role: %v", sc)
	}
	if res, sc := r.as(operator, "service_control_service", stop); errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("no confirm: %v", sc)
	}
	n := r.auditCount()
	res, sc := r.as(operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "dry_run": true})
	if res.IsError || sc["dry_run"] != true || r.unitState("nginx.service") != "active" || r.auditCount() != n+1 {
		t.Fatalf("dry run: %v (nginx %s)", sc, r.unitState("nginx.service"))
	}
	res, sc = r.as(operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "confirm": true, "reason": "maintenance"})
	if res.IsError || sc["previous_status"] != "active" || sc["status"] != "inactive" || sc["job_result"] != "done" {
		t.Fatalf("stop: %v", sc)
	}
	if got := r.unitState("nginx.service"); got != "inactive" {
		t.Fatalf("nginx is %s after stop", got)
	}
	res, sc = r.as(operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "start", "confirm": true, "reason": "back"})
	if res.IsError || sc["previous_status"] != "inactive" || sc["status"] != "active" {
		t.Fatalf("start: %v", sc)
	}

	// Off switch: refused before anything reaches the helper.
	r.cfg.Service.Control = false
	if res, sc := r.as(admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "confirm": true, "reason": "x"}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("control off: %v", sc)
	}
	if got := r.unitState("nginx.service"); got != "active" {
		t.Fatalf("nginx is %s after a refused stop", got)
	}
}

func TestStopOutsideAllowListIsRefusedByAgentAndHelper(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "service_control_service", map[string]any{"service_name": "ssh", "action": "stop", "confirm": true, "reason": "x"})
	if errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("agent: %v", sc)
	}
	// The helper has its own copy of the allow list: bypass the agent.
	_, err := client.Call(context.Background(), r.helper, proto.ServiceControl, proto.ServiceControlReq{Unit: "ssh.service", Action: "stop"})
	var pe *proto.Error
	if !errorsAs(err, &pe) || pe.Code != proto.CodePermissionDenied {
		t.Fatalf("helper: %v", err)
	}
	_, err = client.Call(context.Background(), r.helper, proto.ServiceEnable, proto.ServiceEnableReq{Unit: "ssh.service", Enabled: false})
	if !errorsAs(err, &pe) || pe.Code != proto.CodePermissionDenied {
		t.Fatalf("helper enable: %v", err)
	}
	if got := r.unitState("ssh.service"); got != "active" {
		t.Fatalf("ssh is %s", got)
	}
}

func TestStopWithActiveDependents(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]any{"service_name": "dbus", "action": "stop", "confirm": true, "reason": "test"}
	res, sc := r.as(admin, "service_control_service", args)
	if errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("dependents: %v", sc)
	}
	deps := strs(sc["error"].(map[string]any)["details"].(map[string]any)["dependent_services"])
	if !slices.Contains(deps, "bluetooth.service") || !slices.Contains(deps, "avahi-daemon.service") {
		t.Fatalf("dependent_services = %v", deps)
	}
	args["force"] = true
	if res, sc := r.as(operator, "service_control_service", args); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("force as operator: %v", sc)
	}
	if res, sc := r.as(admin, "service_control_service", args); errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("force without confirm_breaking_dependencies: %v", sc)
	}
	if got := r.unitState("dbus.service"); got != "active" {
		t.Fatalf("dbus is %s after refusals", got)
	}
	// The helper repeats the check when not told force.
	_, err := client.Call(context.Background(), r.helper, proto.ServiceControl, proto.ServiceControlReq{Unit: "dbus.service", Action: "stop"})
	var pe *proto.Error
	if !errorsAs(err, &pe) || pe.Code != proto.CodeFailedPrecondition {
		t.Fatalf("helper without force: %v", err)
	}
	args["confirm_breaking_dependencies"] = true
	res, sc = r.as(admin, "service_control_service", args)
	if res.IsError || sc["status"] != "inactive" || len(sc["dependents_affected"].([]any)) != 2 {
		t.Fatalf("forced stop: %v", sc)
	}
}

func TestSetEnabledAndValidate(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]any{"service_name": "motion", "enabled": true}
	if res, sc := r.as(operator, "service_set_enabled", args); errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("no confirm: %v", sc)
	}
	args["dry_run"] = true
	if res, sc := r.as(operator, "service_set_enabled", args); res.IsError || sc["previous_unit_file_state"] != "disabled" {
		t.Fatalf("dry run: %v", sc)
	}
	delete(args, "dry_run")
	args["confirm"], args["reason"] = true, "start at boot"
	res, sc := r.as(operator, "service_set_enabled", args)
	if res.IsError || sc["unit_file_state"] != "enabled" || sc["previous_unit_file_state"] != "disabled" {
		t.Fatalf("enable: %v", sc)
	}
	d, _ := r.units.Get(context.Background(), "motion.service")
	if d.UnitFileState != "enabled" {
		t.Fatalf("motion unit file state %q", d.UnitFileState)
	}
	args["enabled"] = false
	if res, sc = r.as(operator, "service_set_enabled", args); res.IsError || sc["unit_file_state"] != "disabled" {
		t.Fatalf("disable: %v", sc)
	}

	res, sc = r.as(operator, "service_validate_unit_file", map[string]any{"service_name": "nginx"})
	if res.IsError || sc["valid"] != true {
		t.Fatalf("validate nginx: %v", sc)
	}
	// dbus.service is static: it has no [Install] section to enable it with.
	res, sc = r.as(admin, "service_set_enabled", map[string]any{"service_name": "dbus", "enabled": true, "confirm": true, "reason": "x"})
	if errCode(res, sc) != CodeFailedPrecondition {
		t.Fatalf("enable a static unit: %v", sc)
	}
	if res, sc = r.as(admin, "service_set_enabled", map[string]any{"service_name": "ssh", "enabled": false, "confirm": true, "reason": "x"}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("outside allow list: %v", sc)
	}
}

func TestServiceNamespaceOff(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Service.Enabled = false })
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"service_list_services", map[string]any{}},
		{"service_get_status", map[string]any{"service_name": "nginx"}},
		{"service_validate_unit_file", map[string]any{"service_name": "nginx"}},
	} {
		if res, sc := r.as(admin, call.tool, call.args); errCode(res, sc) != CodePermissionDenied {
			t.Errorf("%s with [service] off: %v", call.tool, sc)
		}
	}
}

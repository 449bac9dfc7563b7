package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

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
	list := func(args map[string]any) serviceListOut {
		t.Helper()
		out, e := callAs[serviceListOut](t, r, admin, "service_list_services", args)
		if e != nil {
			t.Fatal(e)
		}
		return out
	}
	unitNames := func(l serviceListOut) []string {
		return pluck(l.Services, func(s serviceSummary) string { return s.Name })
	}
	sc := list(map[string]any{})
	all := unitNames(sc)
	if !slices.Contains(all, "nginx.service") || !slices.Contains(all, "dbus.service") {
		t.Fatalf("services = %v", all)
	}
	if !slices.Contains(sc.Failed, "backup.service") {
		t.Fatalf("failed = %v, want backup.service", sc.Failed)
	}
	if sc.TotalCount != len(all) || sc.HasMore {
		t.Fatalf("total %v has_more %v for %d listed", sc.TotalCount, sc.HasMore, len(all))
	}

	if got := unitNames(list(map[string]any{"state": "failed"})); !slices.Equal(got, []string{"backup.service"}) {
		t.Fatalf("state failed: %v", got)
	}
	if got := unitNames(list(map[string]any{"pattern": "nginx"})); !slices.Equal(got, []string{"nginx.service"}) {
		t.Fatalf("pattern nginx: %v", got)
	}
	if got := unitNames(list(map[string]any{"enabled": false, "pattern": "motion*"})); !slices.Equal(got, []string{"motion.service"}) {
		t.Fatalf("disabled motion*: %v", got)
	}

	p1 := list(map[string]any{"limit": 2})
	p2 := list(map[string]any{"limit": 2, "offset": 2})
	if !p1.HasMore || p1.ReturnedCount != 2 || !slices.Equal(unitNames(p2), all[2:min(4, len(all))]) {
		t.Fatalf("pages: %v then %v, all %v", unitNames(p1), unitNames(p2), all)
	}
	for _, s := range p1.Services {
		if s.Name == "nginx.service" && !s.Changeable {
			t.Fatalf("nginx is in the laptop allow list but not changeable: %+v", s)
		}
	}

	_, e := callAs[serviceListOut](t, r, admin, "service_list_services", map[string]any{"pattern": "[nginx"})
	wantErr(t, e, CodeInvalidArgument, nil) // bad glob
}

func TestServiceStatusNotFoundAndLogs(t *testing.T) {
	r := newRig(t, nil)
	status := func(args map[string]any) serviceDetail {
		t.Helper()
		out, e := callAs[serviceDetail](t, r, admin, "service_get_status", args)
		if e != nil {
			t.Fatal(e)
		}
		return out
	}
	sc := status(map[string]any{"service_name": "dbus"})
	if sc.Name != "dbus.service" || sc.Status != "active" {
		t.Fatalf("dbus: %+v", sc)
	}
	if deps := sc.ActiveDependents; !slices.Contains(deps, "bluetooth.service") {
		t.Fatalf("active_dependents = %v", deps)
	}
	_, e := callAs[serviceDetail](t, r, admin, "service_get_status", map[string]any{"service_name": "no-such-thing"})
	wantErr(t, e, CodeNotFound, nil) // missing unit
	_, e = callAs[serviceDetail](t, r, admin, "service_get_status", map[string]any{"service_name": "-h"})
	wantErr(t, e, CodeInvalidArgument, nil) // option-like name

	// A restart writes journal lines the status then shows.
	if _, e := callAs[serviceControlOut](t, r, admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "restart", "confirm": true, "reason": "test"}); e != nil {
		t.Fatal(e)
	}
	if sc = status(map[string]any{"service_name": "nginx", "log_lines": 5}); len(sc.RecentLogs) == 0 {
		t.Fatalf("no journal lines after a restart: %+v", sc)
	}

	r.cfg.Logs.JournalUnits = []string{"ssh*"}
	if sc = status(map[string]any{"service_name": "nginx", "log_lines": 5}); len(sc.RecentLogs) != 0 || sc.LogsNote == "" {
		t.Fatalf("journal outside [logs] journal_units was shown: %+v", sc)
	}
}

func TestControlServiceGuardsDryRunAndSuccess(t *testing.T) {
	r := newRig(t, nil)
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	stop := map[string]any{"service_name": "nginx.service", "action": "stop"}

	_, e := callAs[serviceControlOut](t, r, reader, "service_control_service", stop)
	wantErr(t, e, CodePermissionDenied, nil) // read role
	_, e = callAs[serviceControlOut](t, r, operator, "service_control_service", stop)
	wantErr(t, e, CodeFailedPrecondition, nil) // no confirm
	n := r.auditCount()
	sc, e := callAs[serviceControlOut](t, r, operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "dry_run": true})
	if e != nil || !sc.DryRun || r.unitState("nginx.service") != "active" || r.auditCount() != n+1 {
		t.Fatalf("dry run: %+v %v (nginx %s)", sc, e, r.unitState("nginx.service"))
	}
	sc, e = callAs[serviceControlOut](t, r, operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "confirm": true, "reason": "maintenance"})
	if e != nil || sc.PreviousStatus != "active" || sc.Status != "inactive" || sc.JobResult != "done" {
		t.Fatalf("stop: %+v %v", sc, e)
	}
	if got := r.unitState("nginx.service"); got != "inactive" {
		t.Fatalf("nginx is %s after stop", got)
	}
	sc, e = callAs[serviceControlOut](t, r, operator, "service_control_service", map[string]any{"service_name": "nginx", "action": "start", "confirm": true, "reason": "back"})
	if e != nil || sc.PreviousStatus != "inactive" || sc.Status != "active" {
		t.Fatalf("start: %+v %v", sc, e)
	}

	// Off switch: refused before anything reaches the helper.
	r.cfg.Service.Control = false
	_, e = callAs[serviceControlOut](t, r, admin, "service_control_service", map[string]any{"service_name": "nginx", "action": "stop", "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, nil) // control off
	if got := r.unitState("nginx.service"); got != "active" {
		t.Fatalf("nginx is %s after a refused stop", got)
	}
}

func TestStopOutsideAllowListIsRefusedByAgentAndHelper(t *testing.T) {
	r := newRig(t, nil)
	_, e := callAs[serviceControlOut](t, r, admin, "service_control_service", map[string]any{"service_name": "ssh", "action": "stop", "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, nil) // the agent's allow list
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
	_, e := callAs[serviceControlOut](t, r, admin, "service_control_service", args)
	wantErr(t, e, CodeFailedPrecondition, nil) // active dependents
	deps := strs(e.Details["dependent_services"])
	if !slices.Contains(deps, "bluetooth.service") || !slices.Contains(deps, "avahi-daemon.service") {
		t.Fatalf("dependent_services = %v", deps)
	}
	args["force"] = true
	_, e = callAs[serviceControlOut](t, r, operator, "service_control_service", args)
	wantErr(t, e, CodePermissionDenied, nil) // force as operator
	_, e = callAs[serviceControlOut](t, r, admin, "service_control_service", args)
	wantErr(t, e, CodeFailedPrecondition, nil) // force without confirm_breaking_dependencies
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
	sc, e := callAs[serviceControlOut](t, r, admin, "service_control_service", args)
	if e != nil || sc.Status != "inactive" || len(sc.DependentsStopped) != 2 {
		t.Fatalf("forced stop: %+v %v", sc, e)
	}
}

func TestSetEnabledAndValidate(t *testing.T) {
	r := newRig(t, nil)
	args := map[string]any{"service_name": "motion", "enabled": true}
	_, e := callAs[serviceEnableOut](t, r, operator, "service_set_enabled", args)
	wantErr(t, e, CodeFailedPrecondition, nil) // no confirm
	args["dry_run"] = true
	if sc, e := callAs[serviceEnableOut](t, r, operator, "service_set_enabled", args); e != nil || sc.PreviousUnitFileState != "disabled" {
		t.Fatalf("dry run: %+v %v", sc, e)
	}
	delete(args, "dry_run")
	args["confirm"], args["reason"] = true, "start at boot"
	sc, e := callAs[serviceEnableOut](t, r, operator, "service_set_enabled", args)
	if e != nil || sc.UnitFileState != "enabled" || sc.PreviousUnitFileState != "disabled" {
		t.Fatalf("enable: %+v %v", sc, e)
	}
	d, _ := r.units.Get(context.Background(), "motion.service")
	if d.UnitFileState != "enabled" {
		t.Fatalf("motion unit file state %q", d.UnitFileState)
	}
	args["enabled"] = false
	if sc, e = callAs[serviceEnableOut](t, r, operator, "service_set_enabled", args); e != nil || sc.UnitFileState != "disabled" {
		t.Fatalf("disable: %+v %v", sc, e)
	}

	v, e := callAs[serviceValidateOut](t, r, operator, "service_validate_unit_file", map[string]any{"service_name": "nginx"})
	if e != nil || !v.Valid {
		t.Fatalf("validate nginx: %+v %v", v, e)
	}
	// dbus.service is static: it has no [Install] section to enable it with.
	_, e = callAs[serviceEnableOut](t, r, admin, "service_set_enabled", map[string]any{"service_name": "dbus", "enabled": true, "confirm": true, "reason": "x"})
	wantErr(t, e, CodeFailedPrecondition, nil) // enable a static unit
	_, e = callAs[serviceEnableOut](t, r, admin, "service_set_enabled", map[string]any{"service_name": "ssh", "enabled": false, "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, nil) // outside allow list
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
		t.Run(call.tool, func(t *testing.T) {
			// The outputs differ; an error result carries none, so any will do.
			_, e := callAs[any](t, r, admin, call.tool, call.args)
			wantErr(t, e, CodePermissionDenied, nil) // [service] off
		})
	}
}

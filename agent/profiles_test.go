package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
)

// sensorsProfile is the profile of a fleet front that reads and drives the
// board's sensors and pins, and nothing else.
var sensorsProfile = config.Profile{Toolsets: []string{"system", "metrics", "gpio", "i2c", "sensors"}}

func withSensors(c *config.Config) {
	c.Profiles = map[string]config.Profile{"sensors": sensorsProfile}
}

// listedNames is what a session is listed of resources (URIs and
// templates) and prompts.
func listedNames(t *testing.T, s *mcp.ClientSession) (resources, prompts map[string]bool) {
	t.Helper()
	ctx := context.Background()
	resources, prompts = map[string]bool{}, map[string]bool{}
	for x, err := range s.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		resources[x.URI] = true
	}
	for x, err := range s.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		resources[x.URITemplate] = true
	}
	for x, err := range s.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts[x.Name] = true
	}
	return resources, prompts
}

// A principal's lists follow its profile as they follow its role: a
// sensors operator is listed the tools of those namespaces (and change_*)
// alone, a read-only admin only reads; resources and prompts follow the
// tools they show or are for.
func TestProfileShapesLists(t *testing.T) {
	r := newRig(t, withSensors)
	sensors := operator
	sensors.Profile = "sensors"
	roAdmin := admin
	roAdmin.Profile = config.ProfileReadOnly
	for _, era := range eras {
		s := r.sessionIn(t, sensors, era, nil)
		got := listedTools(t, s)
		diff(t, era+" sensors' tools", mayNames(r, sensors), got)
		for name := range got {
			tl, _ := r.a.tools.Lookup(name)
			ns, _, _ := strings.Cut(tl.ID(), ".")
			if ns != "change" && !slices.Contains(sensorsProfile.Toolsets, ns) {
				t.Errorf("%s: %s listed to sensors", era, name)
			}
		}
		for _, n := range []string{"gpio_write_pin", "system_get_basic_info", "sensors_read"} {
			if !got[n] {
				t.Errorf("%s: %s not listed to sensors", era, n)
			}
		}
		if got["logs_get_recent_audit_logs"] || got["service_list_services"] {
			t.Errorf("%s: logs or service tools listed to sensors", era)
		}
		res, prompts := listedNames(t, s)
		if !res["raspi://gpio/pins"] || !res["raspi://health"] || res["raspi://audit/recent"] || res["raspi://service/{unit}"] || res["raspi://journal/{unit}{?lines}"] {
			t.Errorf("%s: sensors' resources %v", era, res)
		}
		if !prompts["safe_gpio_change"] || !prompts["diagnose_throttling"] || prompts["triage_failed_unit"] || prompts["why_did_it_reboot"] {
			t.Errorf("%s: sensors' prompts %v", era, prompts)
		}

		ro := r.sessionIn(t, roAdmin, era, nil)
		got = listedTools(t, ro)
		diff(t, era+" read-only admin's tools", mayNames(r, roAdmin), got)
		for name := range got {
			if tl, _ := r.a.tools.Lookup(name); tl.Rule().Risk != tool.RiskRead {
				t.Errorf("%s: %s (risk %s) listed to a read-only admin", era, name, tl.Rule().Risk)
			}
		}
		if !got["logs_get_recent_audit_logs"] || got["change_prepare"] || len(got) >= len(listedTools(t, r.sessionIn(t, admin, era, nil))) {
			t.Errorf("%s: read-only admin's tools %v", era, got)
		}
		if _, prompts := listedNames(t, ro); prompts["safe_gpio_change"] || !prompts["triage_failed_unit"] {
			t.Errorf("%s: read-only admin's prompts %v", era, prompts)
		}
	}
}

// Outside its profile a call is refused with the profile and what it
// allows, changes nothing and is audited as a denial; inside, it runs.
func TestProfileRefusesCalls(t *testing.T) {
	r := newRig(t, withSensors)
	roAdmin := admin
	roAdmin.Profile = config.ProfileReadOnly
	before := r.auditCount()
	_, e := callAs[GPIOWriteOut](t, r, roAdmin, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "gpio.write_pin", "profile": "read-only", "read_only": true, "toolsets": []any{"*"}})
	if level17(t, r) != 0 {
		t.Fatal("a read-only admin drove the pin")
	}
	// Not even a dry run, nor the way round through change_prepare.
	_, e = callAs[GPIOWriteOut](t, r, roAdmin, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "dry_run": true})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "gpio.write_pin", "profile": "read-only", "read_only": true, "toolsets": []any{"*"}})
	_, e = callAs[changePrepareOut](t, r, roAdmin, "change_prepare", map[string]any{"tool": "system_shutdown"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "change.prepare", "profile": "read-only", "read_only": true, "toolsets": []any{"*"}})
	if _, e := callAs[gpioListOut](t, r, roAdmin, "gpio_list_pins", nil); e != nil {
		t.Fatalf("a read under read-only: %v", e)
	}
	recs, _, err := r.db.QueryAudit(storeQuery(10))
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, rec := range recs {
		if rec.Principal == roAdmin.Name && rec.Decision == store.DecisionDeny && rec.ErrorCode == CodePermissionDenied {
			denied++
		}
	}
	if denied != 3 || r.auditCount() < before+3 {
		t.Errorf("%d denials audited, want 3: %+v", denied, recs)
	}

	sensors := operator
	sensors.Profile = "sensors"
	_, e = callAs[map[string]any](t, r, sensors, "logs_get_recent_audit_logs", map[string]any{"limit": 1})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "logs.get_recent_audit_logs", "profile": "sensors", "read_only": false, "toolsets": []any{"system", "metrics", "gpio", "i2c", "sensors"}})
	if !strings.Contains(e.Message, "toolsets system, metrics, gpio, i2c, sensors") {
		t.Errorf("the refusal does not say what the profile allows: %s", e.Message)
	}
	if _, e := callAs[GPIOWriteOut](t, r, sensors, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"}); e != nil || level17(t, r) != 1 {
		t.Fatalf("a write inside the profile: %v, pin %d", e, level17(t, r))
	}
}

// The profile's definition is read at every decision: a reload that
// changes it changes the next call and the lists of the sessions that hold
// it, which hear tools/list_changed.
func TestProfileReloadTellsSessions(t *testing.T) {
	r := newRig(t, withSensors)
	sensors := operator
	sensors.Profile = "sensors"
	changed := make(chan struct{}, 10)
	s := r.sessionIn(t, sensors, "2025-11-25", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if listedTools(t, s)["logs_get_recent_audit_logs"] {
		t.Fatal("logs listed to sensors before the reload")
	}
	next := *r.a.conf()
	next.Profiles = map[string]config.Profile{"sensors": {Toolsets: append(slices.Clone(sensorsProfile.Toolsets), "logs")}}
	r.a.swap(next)
	select {
	case <-changed:
	case <-time.After(hangGuard):
		t.Fatal("no tools/list_changed after the profile took logs in")
	}
	if !listedTools(t, s)["logs_get_recent_audit_logs"] {
		t.Fatal("logs not listed to sensors after the reload")
	}
	if _, e := callAs[map[string]any](t, r, sensors, "logs_get_recent_audit_logs", map[string]any{"limit": 1}); e != nil {
		t.Fatalf("a call the reloaded profile allows: %v", e)
	}
	// The profile taken out of the file: its holders may do nothing.
	next = *r.a.conf()
	next.Profiles = map[string]config.Profile{}
	r.a.swap(next)
	_, e := callAs[map[string]any](t, r, sensors, "system_get_basic_info", nil)
	wantErr(t, e, CodePermissionDenied, map[string]any{"profile": "sensors", "principal": "op"})
	if got := listedTools(t, s); len(got) != 0 {
		t.Errorf("a profile no longer defined is listed %v", got)
	}
}

// A LAN upstream is a toolset by its name: with it, a profile lists its
// tools and its rule still applies; without, none of them, and a call is
// refused before it leaves the Pi.
func TestProfileLANToolsets(t *testing.T) {
	f := newFakeLAN(t)
	r, _ := lanRig(t, f)
	next := *r.a.conf()
	next.Profiles = map[string]config.Profile{"hs4only": {Toolsets: []string{"hs4"}}, "local": {Toolsets: []string{"gpio"}}}
	r.a.swap(next)
	hs4 := operator
	hs4.Profile = "hs4only"
	got := listedTools(t, r.sessionIn(t, hs4, "", nil))
	diff(t, "hs4only's tools", mayNames(r, hs4), got)
	for name := range got {
		if !strings.HasPrefix(name, "hs4_") && !strings.HasPrefix(name, "change_") {
			t.Errorf("%s listed to hs4only", name)
		}
	}
	if !got["hs4_set_level"] || got["hs4_delete_all"] {
		t.Errorf("hs4only (operate): the upstream's rule no longer applies: %v", got)
	}
	local := operator
	local.Profile = "local"
	for name := range listedTools(t, r.sessionIn(t, local, "", nil)) {
		if strings.HasPrefix(name, "hs4_") {
			t.Errorf("%s listed to a profile without hs4", name)
		}
	}
	writes := f.writes.Load()
	_, e := callAs[map[string]any](t, r, local, "hs4_set_level", map[string]any{"level": 3, "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, map[string]any{"tool": "hs4.set_level", "profile": "local", "read_only": false, "toolsets": []any{"gpio"}})
	if f.writes.Load() != writes {
		t.Fatal("a refused call reached the upstream")
	}
	if e := r.a.mayReadDomain(local, "hs4", "hs4.resources/read"); e == nil || e.Details["profile"] != "local" {
		t.Errorf("an upstream's resources read outside the profile: %v", e)
	}
	if e := r.a.mayReadDomain(hs4, "hs4", "hs4.resources/read"); e != nil {
		t.Errorf("an upstream's resources read inside the profile: %v", e)
	}
}

// Over HTTP the token's profile is the principal's: an admin token made
// read-only is listed only reads and refused a write, a read runs, and
// the audit trail has the refusal.
func TestHTTPTokenProfile(t *testing.T) {
	ft := newFakeTokens()
	ft.tokens["s-admin-ro"] = bearer.Token{Name: "fleet", Role: bearer.RoleAdmin, Profile: config.ProfileReadOnly}
	ft.tokens["s-sensors"] = bearer.Token{Name: "front", Role: bearer.RoleOperate, Profile: "sensors"}
	h := newHTTPRig(t, withSensors, HTTPOptions{Tokens: ft})
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		s := h.mustConnect(t, "s-admin-ro", version)
		got := listedTools(t, s)
		if len(got) == 0 || got["gpio_write_pin"] || !got["gpio_list_pins"] {
			t.Fatalf("%s: read-only admin token's tools: %v", version, got)
		}
		for name := range got {
			if tl, _ := h.a.tools.Lookup(name); tl.Rule().Risk != tool.RiskRead {
				t.Errorf("%s: %s listed to a read-only token", version, name)
			}
		}
		e := resultError(t, callHTTP(t, s, "gpio_write_pin", map[string]any{"pin": 17, "value": "high"}))
		wantErr(t, e, CodePermissionDenied, map[string]any{"profile": "read-only", "tool": "gpio.write_pin", "read_only": true, "toolsets": []any{"*"}})
		if level17(t, h.rig) != 0 {
			t.Fatalf("%s: a read-only token drove the pin", version)
		}
		if res := callHTTP(t, s, "gpio_list_pins", nil); res.IsError {
			t.Fatalf("%s: a read under read-only refused", version)
		}
		recs := h.audit(t)
		if last := recs[len(recs)-1]; last.Tool == "gpio.list_pins" {
			recs = recs[:len(recs)-1] // reads are not recorded unless asked
		}
		if last := recs[len(recs)-1]; last.Principal != "token:fleet" || last.Decision != store.DecisionDeny || last.Tool != "gpio.write_pin" {
			t.Errorf("%s: the refusal's audit record %+v", version, last)
		}

		front := h.mustConnect(t, "s-sensors", version)
		if got := listedTools(t, front); got["logs_get_recent_audit_logs"] || !got["gpio_write_pin"] {
			t.Errorf("%s: sensors token's tools %v", version, got)
		}
	}
}

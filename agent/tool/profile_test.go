package tool

import (
	"context"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// A profile narrows a role and never widens it: read-only refuses every
// write (its dry run too) even to an admin, toolsets refuse other
// namespaces, change.* follows the tool it acts on, a profile the config
// does not define refuses everything, and the role still decides first.
func TestDecideProfile(t *testing.T) {
	c := config.Default()
	c.Profiles = map[string]config.Profile{"sensors": {Toolsets: []string{"gpio", "i2c"}}, "gpio-reads": {Toolsets: []string{"gpio"}, ReadOnly: true}}
	as := func(role identity.Role, profile string) identity.Principal {
		return identity.Principal{Name: "token:fleet", Role: role, Profile: profile}
	}
	rule := func(id string, risk Risk) Rule {
		ns := id[:len(id)-len(".x")]
		return Rule{Tool: id, Domain: ns, MinRole: identity.RoleRead, Risk: risk}
	}
	gpioWrite := Rule{Tool: "gpio.write_pin", Domain: "gpio", MinRole: identity.RoleOperate, Risk: RiskLow}
	gpioRead := Rule{Tool: "gpio.read_pin", Domain: "gpio", MinRole: identity.RoleRead, Risk: RiskRead}
	for _, tc := range []struct {
		name    string
		p       identity.Principal
		r       Rule
		g       Guard
		profile bool // refused by the profile (details name it)
		code    string
	}{
		{"read-only admin: a read", as(identity.RoleAdmin, "read-only"), rule("system.x", RiskRead), Guard{}, false, ""},
		{"read-only admin: a write", as(identity.RoleAdmin, "read-only"), gpioWrite, Guard{}, true, errcode.PermissionDenied},
		{"read-only admin: a write's dry run", as(identity.RoleAdmin, "read-only"), gpioWrite, Guard{DryRun: true}, true, errcode.PermissionDenied},
		{"read-only admin: a critical call", as(identity.RoleAdmin, "read-only"), rule("system.x", RiskCritical), Guard{Confirm: true, Reason: "r"}, true, errcode.PermissionDenied},
		{"read-only admin: change.commit", as(identity.RoleAdmin, "read-only"), rule("change.x", RiskLow), Guard{}, true, errcode.PermissionDenied},
		{"toolsets: in", as(identity.RoleOperate, "sensors"), gpioWrite, Guard{}, false, ""},
		{"toolsets: other namespace", as(identity.RoleOperate, "sensors"), rule("system.x", RiskRead), Guard{}, true, errcode.PermissionDenied},
		{"toolsets: an upstream's read", as(identity.RoleOperate, "sensors"), rule("hs4.x", RiskRead), Guard{}, true, errcode.PermissionDenied},
		{"toolsets: change follows its tool", as(identity.RoleOperate, "sensors"), rule("change.x", RiskLow), Guard{}, false, ""},
		{"toolsets and read only: a read", as(identity.RoleOperate, "gpio-reads"), gpioRead, Guard{}, false, ""},
		{"toolsets and read only: a write", as(identity.RoleOperate, "gpio-reads"), gpioWrite, Guard{DryRun: true}, true, errcode.PermissionDenied},
		{"all narrows nothing", as(identity.RoleOperate, "all"), rule("system.x", RiskLow), Guard{}, false, ""},
		{"the role still decides", as(identity.RoleRead, "sensors"), gpioWrite, Guard{DryRun: true}, false, errcode.PermissionDenied},
		{"an undefined profile refuses everything", as(identity.RoleAdmin, "gone"), gpioRead, Guard{}, true, errcode.PermissionDenied},
		{"the switches still decide ([gpio] writes is off)", as(identity.RoleAdmin, "sensors"), Rule{Tool: "gpio.write_pin", Domain: "gpio", MinRole: identity.RoleOperate, Risk: RiskLow, Gate: config.SwitchGPIOWrites}, Guard{DryRun: true}, false, errcode.PermissionDenied},
	} {
		e := Decide(&c, tc.p, tc.r, tc.g, false)
		switch {
		case tc.code == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.code != "" && (e == nil || e.Code != tc.code):
			t.Errorf("%s: got %v, want %s", tc.name, e, tc.code)
		case e != nil && e.FixHint == "":
			t.Errorf("%s: no fix hint: %v", tc.name, e)
		case e != nil && tc.profile != (e.Details["profile"] == tc.p.Profile):
			t.Errorf("%s: refused by the profile %v, want %v: %v %v", tc.name, e.Details["profile"] != nil, tc.profile, e, e.Details)
		}
	}
	e := Decide(&c, as(identity.RoleOperate, "sensors"), rule("system.x", RiskRead), Guard{}, false)
	if ts, _ := e.Details["toolsets"].([]string); len(ts) != 2 || ts[0] != "gpio" || e.Details["read_only"] != false || e.Details["tool"] != "system.x" {
		t.Errorf("details of a toolsets refusal: %v", e.Details)
	}
}

// Through the pipeline: a read-only profile on an admin refuses a guarded
// write (not run, audited as a denial) and lets a read run; a definition
// changed in the config in force applies to the next decision.
func TestPipelineProfile(t *testing.T) {
	r := newPipeRig(t)
	Add(r.pipe.tools, Spec[noArgs, ranOut]{ID: "test.read", Rule: Rule{MinRole: identity.RoleRead}, Run: func(context.Context, *Call, noArgs) (ranOut, error) {
		return ranOut{Ran: true}, nil
	}})
	if err := r.pipe.tools.Err(); err != nil {
		t.Fatal(err)
	}
	admin := identity.Principal{Name: "token:fleet", Role: identity.RoleAdmin, Profile: "read-only"}
	before := r.audit.len()
	out, e := r.pipe.Call(context.Background(), admin, "test.high", map[string]any{"pin": 1, "confirm": true, "reason": "try"}, nil)
	wantCode(t, "a write under read-only", e, errcode.PermissionDenied)
	if out != nil || r.runs.Load() != 0 {
		t.Fatalf("the refused write ran: %v, %d runs", out, r.runs.Load())
	}
	if recs := r.audit.since(before); len(recs) != 1 || recs[0].Decision != DecisionDeny || recs[0].ErrorCode != errcode.PermissionDenied || recs[0].Profile != "read-only" {
		t.Fatalf("audit of the refusal (with the profile that narrowed the role): %+v", recs)
	}
	if _, e := r.pipe.Call(context.Background(), admin, PrepareID, map[string]any{"tool": "test_critical", "arguments": map[string]any{"pin": 1}}, nil); e == nil || e.Code != errcode.PermissionDenied {
		t.Fatalf("change_prepare under read-only: %v", e)
	}
	if out, e := r.pipe.Call(context.Background(), admin, "test.read", map[string]any{}, nil); e != nil || !out.(ranOut).Ran {
		t.Fatalf("a read under read-only: %v %v", out, e)
	}

	// A profile of the file: toolsets other than test refuse test's tools;
	// changed to take test in, the next decision allows them.
	fleet := identity.Principal{Name: "token:fleet", Role: identity.RoleOperate, Profile: "fleet"}
	r.cfg.Profiles = map[string]config.Profile{"fleet": {Toolsets: []string{"gpio"}}}
	if e := r.pipe.May(fleet, "test.read"); e == nil || e.Details["profile"] != "fleet" {
		t.Fatalf("May outside the toolsets: %v", e)
	}
	r.cfg.Profiles = map[string]config.Profile{"fleet": {Toolsets: []string{"gpio", "test"}}}
	if e := r.pipe.May(fleet, "test.high"); e != nil {
		t.Fatalf("May once the profile takes test in: %v", e)
	}
	delete(r.cfg.Profiles, "fleet")
	if e := r.pipe.May(fleet, "test.read"); e == nil || e.Code != errcode.PermissionDenied {
		t.Fatalf("May once the profile is gone: %v", e)
	}
}

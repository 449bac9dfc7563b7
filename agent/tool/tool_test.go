package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// The pipeline's own tests: fake tools in a namespace the config does not
// know (so no switch gates it), no agent, no store, no helper.

type noArgs struct{}

type pinIn struct {
	Pin   int    `json:"pin"`
	Level string `json:"level,omitempty"`
	GuardArgs
}

type pinOut struct {
	Pin   int    `json:"pin"`
	Level string `json:"level"`
}

func TestDecide(t *testing.T) {
	c := config.Default()
	operator := identity.Principal{Name: "op", Role: identity.RoleOperate}
	rule := func(r Risk) Rule {
		return Rule{Tool: "test.x", Domain: "test", MinRole: identity.RoleOperate, Risk: r}
	}
	cases := []struct {
		name      string
		p         identity.Principal
		r         Rule
		g         Guard
		committed bool
		code      string // "" = allowed
	}{
		{"no role", identity.Principal{Name: "nobody"}, rule(RiskRead), Guard{}, false, errcode.PermissionDenied},
		{"role too low", identity.Principal{Name: "r", Role: identity.RoleRead}, rule(RiskLow), Guard{}, false, errcode.PermissionDenied},
		{"read", operator, rule(RiskRead), Guard{}, false, ""},
		{"low", operator, rule(RiskLow), Guard{}, false, ""},
		{"high without confirm", operator, rule(RiskHigh), Guard{Reason: "r"}, false, errcode.FailedPrecondition},
		{"high without reason", operator, rule(RiskHigh), Guard{Confirm: true}, false, errcode.FailedPrecondition},
		{"high guarded", operator, rule(RiskHigh), Guard{Confirm: true, Reason: "r"}, false, ""},
		{"high dry run", operator, rule(RiskHigh), Guard{DryRun: true}, false, ""},
		{"critical", operator, rule(RiskCritical), Guard{Confirm: true, Reason: "r"}, false, errcode.FailedPrecondition},
		{"critical committed", operator, rule(RiskCritical), Guard{}, true, ""},
		{"critical dry run", operator, rule(RiskCritical), Guard{DryRun: true}, false, ""},
		{"switched off", operator, Rule{Tool: "system.reboot", Domain: "system", MinRole: identity.RoleOperate, Risk: RiskHigh, Gate: config.SwitchSystemReboot}, Guard{DryRun: true}, false, errcode.PermissionDenied},
	}
	for _, tc := range cases {
		e := Decide(&c, tc.p, tc.r, tc.g, tc.committed)
		switch {
		case tc.code == "" && e != nil:
			t.Errorf("%s: refused: %v", tc.name, e)
		case tc.code != "" && (e == nil || e.Code != tc.code):
			t.Errorf("%s: got %v, want %s", tc.name, e, tc.code)
		case e != nil && e.FixHint == "":
			t.Errorf("%s: no fix hint: %v", tc.name, e)
		}
	}
	e := Decide(&c, operator, rule(RiskHigh), Guard{}, false)
	if m, _ := e.Details["missing"].([]string); strings.Join(m, ",") != "confirm,reason" {
		t.Errorf("missing guards: %v", e.Details)
	}
}

func newTestRegistry(t *testing.T) *Registry {
	r := NewRegistry(Options{CheckOutput: true, Stability: func(string) string { return "beta" }})
	Add(r, Spec[noArgs, pinOut]{ID: "test.read", Title: "Read", Rule: Rule{MinRole: identity.RoleRead},
		Run: func(context.Context, *Call, noArgs) (pinOut, error) { return pinOut{Pin: 1, Level: "high"}, nil }})
	Add(r, Spec[pinIn, pinOut]{ID: "test.write", Title: "Write", Rule: Rule{MinRole: identity.RoleOperate, Risk: RiskLow},
		Props: []Prop{P("pin", Min(1), Max(27)), P("level", Enum("high", "low"), Default("low"))},
		Run: func(_ context.Context, _ *Call, in pinIn) (pinOut, error) {
			if in.Pin == 13 {
				var m map[string]int
				m["unlucky"] = 1 // a bug Run recovers
			}
			return pinOut{Pin: in.Pin, Level: in.Level}, nil
		}})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistry(t *testing.T) {
	r := newTestRegistry(t)
	w, ok := r.Lookup("test_write")
	if !ok || w.ID() != "test.write" || !w.Mutating() || w.Stability() != "beta" || !w.ChecksOutput() {
		t.Fatalf("test_write: %+v", w)
	}
	if _, ok := r.Lookup("test.read"); !ok {
		t.Fatal("lookup by id")
	}
	if d := w.MCP().Description; !strings.HasSuffix(d, "Risk low, role operate.") {
		t.Errorf("description %q", d)
	}
	// A guarded tool at risk read, and a collision, fail registration.
	bad := NewRegistry(Options{})
	Add(bad, Spec[pinIn, pinOut]{ID: "test.bad", Rule: Rule{MinRole: identity.RoleRead}})
	if bad.Err() == nil {
		t.Error("guard arguments at risk read registered")
	}
	Add(r, Spec[noArgs, pinOut]{ID: "test.read"})
	if r.Err() == nil {
		t.Error("a second test.read registered")
	}
	// A LAN domain comes and goes.
	f := Foreign("lan.x", "lan_x", Rule{Tool: "lan.x", Domain: "lan", Risk: RiskLow}, "beta", nil,
		func(raw json.RawMessage) ([]byte, *Error) { return raw, nil },
		func(context.Context, *Call, []byte) (any, string, error) { return nil, "", nil })
	if err := r.Mount(f); err != nil || !f.LAN() || !f.Mutating() {
		t.Fatalf("mount: %v", err)
	}
	if gone := r.Unmount(func(t *Tool) bool { return strings.HasPrefix(t.ID(), "lan.") }); len(gone) != 1 {
		t.Fatalf("unmounted %d", len(gone))
	}
	if _, ok := r.Get("lan.x"); ok {
		t.Fatal("lan.x still there")
	}
}

func TestValidate(t *testing.T) {
	w, _ := newTestRegistry(t).Get("test.write")
	for raw, want := range map[string]string{
		`{"pin": 3, "colour": "red"}`: `unknown parameter "colour"`,
		`{}`:                          `missing required parameter "pin"`,
		`{"pin": "3"}`:                `parameter "pin" must be an integer, got string`,
		`{"pin": 99}`:                 `parameter "pin" must be at most 27, got 99`,
		`{"pin": 3, "level": "hi"}`:   `parameter "level" must be one of [high low], got hi`,
		`[1]`:                         `arguments must be a JSON object`,
	} {
		_, e := w.Check(json.RawMessage(raw))
		if e == nil || e.Code != errcode.InvalidArgument || e.Message != want {
			t.Errorf("%s: got %v, want %q", raw, e, want)
		}
	}
	args, e := w.Check(json.RawMessage(`{"pin": 3, "reason": null}`))
	if e != nil || string(args) != `{"level":"low","pin":3}` {
		t.Errorf("defaults and nulls: %s %v", args, e)
	}
}

func TestRunRecoversAPanic(t *testing.T) {
	w, _ := newTestRegistry(t).Get("test.write")
	out, _, err := w.Run(context.Background(), &Call{}, []byte(`{"pin": 13, "level": "high"}`))
	if err == nil || out != nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("panic: %v %v", out, err)
	}
	out, sum, err := w.Run(context.Background(), &Call{}, []byte(`{"pin": 4, "level": "high"}`))
	if err != nil || out.(pinOut).Level != "high" || sum != "Write" {
		t.Fatalf("after the panic: %v %q %v", out, sum, err)
	}
	js, _ := json.Marshal(map[string]any{"pin": "four", "level": "high"})
	if w.CheckOut(js) == nil {
		t.Error("a result that breaks the output schema passed")
	}
}

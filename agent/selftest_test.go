package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// runSelftest calls selftest_run over a real MCP session (so the agent's
// socket exists, as on a device) and returns its matrix.
func runSelftest(t *testing.T, s *mcp.ClientSession) SelftestOut {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "selftest_run"})
	if err != nil || res.IsError {
		t.Fatalf("selftest_run: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out SelftestOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func checkNamed(t *testing.T, out SelftestOut, name string) selftestCheck {
	t.Helper()
	for _, c := range out.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, out.Checks)
	return selftestCheck{}
}

// On the simulated board every check passes or only warns, and each check
// the brief names is there.
func TestSelftestPassesOnTheSimBoard(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	// One audited change, so the chain and its witness have something to check.
	if res, sc := r.as(admin, "gpio_write_pin", map[string]any{"pin": 17, "value": 1, "reason": "selftest"}); res.IsError {
		t.Fatalf("write: %v", sc)
	}
	out := runSelftest(t, s)
	for _, c := range out.Checks {
		t.Logf("%-18s %-4s %s", c.Name, c.Status, c.Detail)
		if c.Status == CheckFail {
			t.Errorf("%s failed: %s (%s)", c.Name, c.Detail, c.FixHint)
		}
		if c.Status != CheckPass && c.FixHint == "" {
			t.Errorf("%s is %s without a fix_hint", c.Name, c.Status)
		}
	}
	for _, name := range []string{"helper", "agent_socket", "helper_socket", "database", "audit_chain", "audit_witness", "clock", "disk",
		"gpio_pin_17", "gpio_pin_4", "approval_button", "i2c_bus_1", "sensor_greenhouse", "sensor_case", "camera", "systemd", "logind"} {
		checkNamed(t, out, name)
	}
	if out.Status == CheckFail || out.Pass+out.Warn+out.Fail != len(out.Checks) || out.Mode != "sim" {
		t.Errorf("status %s, counts %d/%d/%d of %d, mode %s", out.Status, out.Pass, out.Warn, out.Fail, len(out.Checks), out.Mode)
	}
	if c := checkNamed(t, out, "audit_chain"); c.Status != CheckPass || !strings.Contains(c.Detail, "intact") {
		t.Errorf("audit chain: %+v", c)
	}
}

// With the helper gone, the matrix fails on it with a hint to restart it,
// and the checks that need it say they could not run.
func TestSelftestFailsWhenTheHelperIsKilled(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	r.killHelper()
	out := runSelftest(t, s)
	if out.Status != CheckFail {
		t.Fatalf("status %s", out.Status)
	}
	h := checkNamed(t, out, "helper")
	if h.Status != CheckFail || !strings.Contains(h.Detail, "does not answer") || !strings.Contains(h.FixHint, "serve --sim") {
		t.Errorf("helper check: %+v", h)
	}
	for _, name := range []string{"gpio_pins", "logind", "sensor_greenhouse"} {
		if c := checkNamed(t, out, name); c.Status != CheckWarn || !strings.Contains(c.Detail, "helper is unreachable") {
			t.Errorf("%s: %+v", name, c)
		}
	}
	r.startHelper()
	if out := runSelftest(t, s); checkNamed(t, out, "helper").Status == CheckFail {
		t.Errorf("helper back, still failing: %+v", out.Checks[0])
	}
}

// A configured pin that another process holds fails, naming the holder
// and how to find it; the other pins still pass.
func TestSelftestFailsOnAHeldPin(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	// While the helper is down, another process takes the LED's line; the
	// helper comes back without it, as on a board where gpioset got there first.
	r.killHelper()
	if err := r.gpio.Close(); err != nil { // the kernel frees a dead process's lines
		t.Fatal(err)
	}
	if err := r.gpio.Hold(27, "gpioset"); err != nil {
		t.Fatal(err)
	}
	r.startHelper()
	out := runSelftest(t, s)
	c := checkNamed(t, out, "gpio_pin_27")
	if out.Status != CheckFail || c.Status != CheckFail || !strings.Contains(c.Detail, `held by "gpioset"`) ||
		!strings.Contains(c.FixHint, "gpioinfo") || !strings.Contains(c.FixHint, "remove pin 27") {
		t.Errorf("status %s, pin 27: %+v", out.Status, c)
	}
	if c := checkNamed(t, out, "gpio_pin_17"); c.Status != CheckPass {
		t.Errorf("pin 17: %+v", c)
	}
}

// A socket everyone may open fails.
func TestSelftestSocketModes(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serve()
	if err := chmod(r.cfg.Helper.Socket, 0o666); err != nil {
		t.Fatal(err)
	}
	c := checkNamed(t, runSelftest(t, s), "helper_socket")
	if c.Status != CheckFail || !strings.Contains(c.FixHint, "everyone may connect") {
		t.Errorf("helper socket 0666: %+v", c)
	}
}

func chmod(path string, mode uint32) error { return os.Chmod(path, os.FileMode(mode)) }

// The approval button's health is a check of its own: ok passes, a line
// the helper cannot request fails with the pin to fix, a stuck one warns,
// and no button wired is nothing to check.
func TestSelftestApprovalButton(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		r := newSimRig(t, nil)
		c := checkNamed(t, runSelftest(t, r.serve()), "approval_button")
		if c.Status != CheckPass || !strings.Contains(c.Detail, "GPIO26") {
			t.Errorf("approval_button: %+v", c)
		}
	})
	t.Run("missing", func(t *testing.T) {
		r := newSimRig(t, func(c *config.Config) { c.Guard.Button.Pin = 40 })
		out := runSelftest(t, r.serve())
		c := checkNamed(t, out, "approval_button")
		if out.Status != CheckFail || c.Status != CheckFail || !strings.Contains(c.Detail, "GPIO40") || !strings.Contains(c.FixHint, "pin = 40") {
			t.Errorf("approval_button: %+v", c)
		}
	})
	t.Run("stuck", func(t *testing.T) {
		r := newSimRig(t, nil)
		s := r.serve()
		r.killHelper()
		r.sim.Board.Buttons.StartPressed(true)
		r.startHelper()
		c := checkNamed(t, runSelftest(t, s), "approval_button")
		if c.Status != CheckWarn || !strings.Contains(c.Detail, "pressed") || !strings.Contains(c.FixHint, "active_low") {
			t.Errorf("approval_button: %+v", c)
		}
	})
	t.Run("unwired", func(t *testing.T) {
		r := newSimRig(t, func(c *config.Config) { c.Guard.Button.Pin, c.Guard.Button.LED = -1, -1 })
		c := checkNamed(t, runSelftest(t, r.serve()), "approval_button")
		if c.Status != CheckPass || !strings.Contains(c.Detail, "no approval button") {
			t.Errorf("approval_button: %+v", c)
		}
	})
}

// A helper that started without logind serves no power methods: the row
// says logind is missing and what follows, not `unknown method`, and fails
// only when the configuration turns reboot or shutdown on.
func TestSelftestLogindMissing(t *testing.T) {
	// what the helper answers for a method it does not serve
	notServed := proto.Errorf(proto.CodeNotFound, "privhelper: unknown method %q", "power.state").With("method", "power.state")
	for _, powerOn := range []bool{true, false} {
		c := logindCheck(proto.PowerStateResp{}, fmt.Errorf("privhelper/client: %w", notServed), powerOn)
		want := CheckWarn
		if powerOn {
			want = CheckFail
		}
		if c.Name != "logind" || c.Status != want || !strings.HasPrefix(c.Detail, "logind not running: reboot/shutdown unavailable") ||
			strings.Contains(c.Detail, "unknown method") || !strings.Contains(c.FixHint, "systemctl restart raspi-mcp-helper") {
			t.Errorf("power on %v: %+v", powerOn, c)
		}
	}
	if c := logindCheck(proto.PowerStateResp{}, errors.New("dbus: timeout"), false); c.Status != CheckFail || !strings.Contains(c.Detail, "cannot ask logind") {
		t.Errorf("other error: %+v", c)
	}
	if c := logindCheck(proto.PowerStateResp{}, nil, true); c.Status != CheckPass {
		t.Errorf("answers: %+v", c)
	}
}

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// fuzzRoles are the principals a fuzzed call runs as, picked by a byte.
var fuzzRoles = [...]Principal{
	{Name: "alice", UID: 1000, Role: RoleAdmin},
	{Name: "olga", UID: 1001, Role: RoleOperate},
	{Name: "rick", UID: 1002, Role: RoleRead},
	{Name: "nobody", UID: 65534, Role: RoleNone},
}

// writesOff turns off every write switch: any change to the board is then
// a call that got past policy.
func writesOff(c *config.Config) {
	c.System.Reboot, c.System.Shutdown = false, false
	c.Metrics.Jobs = false
	c.Service.Control = false
	c.Process.Signals = false
	c.GPIO.Writes = false
	c.I2C.Writes = false
}

// writesOnButSignals keeps laptop mode's write switches except signals,
// which in this rig would reach the host's real processes, and power, whose
// simulated reboot happens later on its own (during some other call).
func writesOnButSignals(c *config.Config) {
	c.Process.Signals = false
	c.System.Reboot, c.System.Shutdown = false, false
}

// FuzzToolCall sends fuzzed JSON arguments to every registered tool, as
// each of the four roles, through the whole pipeline (schema check, policy,
// handler, audit) on the simulated board with a real helper. Each call must
// return a structured error or a result that keeps its output schema (an
// internal error is a bug), and the board (pins, PWM, power, units) may
// change only by a call that policy allowed, that was not a dry run, and
// that left an audit record. The first rig has every write switch off, so
// there nothing may change at all; the second has them on (signals and
// power aside).
func FuzzToolCall(f *testing.F) {
	rigs := [2]*rig{newRig(f, writesOff), newRig(f, writesOnButSignals)}
	for _, r := range rigs {
		// As the agent does at start: sampling jobs need a running sampler.
		if err := r.a.sampler.Start(context.Background()); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { _ = r.a.sampler.Close() })
	}
	tools := rigs[0].a.tools.All()
	slices.SortFunc(tools, func(a, b *tool.Tool) int { return strings.Compare(a.ID(), b.ID()) })
	f.Fuzz(func(t *testing.T, name string, who uint8, args []byte) {
		r := rigs[who>>7&1]
		p := fuzzRoles[int(who)%len(fuzzRoles)]
		// A name that is not a tool still picks one, so mutated names
		// keep exercising tools rather than the lookup.
		tl, ok := r.a.tools.Lookup(name)
		if !ok {
			tl, _ = r.a.tools.Lookup(tools[int(crc32.ChecksumIEEE([]byte(name)))%len(tools)].ID())
		}
		if r == rigs[1] && bytes.Contains(args, []byte("duration")) {
			// A timed write reverts on its own later, which would look
			// like an unaudited change during some later call.
			return
		}
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // a hang guard only
		defer cancel()
		before := r.board(ctx)
		total0, _, _, _, err := r.db.AuditCounts()
		if err != nil {
			t.Fatal(err)
		}
		c := &tool.Call{Principal: p, CorrelationID: tool.NewCorrelationID()}
		res := r.a.invoke(ctx, tl, c, json.RawMessage(args))
		after := r.board(ctx)
		total1, _, _, last, err := r.db.AuditCounts()
		if err != nil {
			t.Fatal(err)
		}

		code := checkResult(t, tl, res)
		if code == CodeInternal {
			t.Fatalf("%s as %s with %q: internal error: %v", tl.ID(), p.Role, args, res.Meta["error"])
		}
		if (tl.Mutating() || code != "") && total1 != total0+1 {
			t.Fatalf("%s as %s with %q: %d audit records for one call", tl.ID(), p.Role, args, total1-total0)
		}
		// A tool whose write switch is off is refused, dry run or not,
		// whatever the board shows (an I2C write leaves no trace on it).
		if !tl.Rule().Gate.On(r.cfg) && code != CodePermissionDenied && code != CodeInvalidArgument {
			t.Fatalf("%s as %s with %q: switched off, yet answered %q", tl.ID(), p.Role, args, code)
		}
		if before == after {
			return
		}
		// The board changed: only an allowed, real, audited call may do that.
		if r == rigs[0] {
			t.Fatalf("%s as %s with %q changed the board with every write switch off:\n%s\n->\n%s", tl.ID(), p.Role, args, before, after)
		}
		switch {
		case !tl.Mutating():
			t.Fatalf("read tool %s changed the board:\n%s\n->\n%s", tl.ID(), before, after)
		case code != "":
			t.Fatalf("%s as %s with %q failed (%s) yet changed the board", tl.ID(), p.Role, args, code)
		case c.DryRun:
			t.Fatalf("dry run of %s with %q changed the board", tl.ID(), args)
		case p.Role < tl.Rule().MinRole:
			t.Fatalf("%s as %s changed the board below its role %s", tl.ID(), p.Role, tl.Rule().MinRole)
		case total1 != total0+1 || last.Decision != "allow" || last.Tool != tl.ID():
			t.Fatalf("%s changed the board without its own audit record (last %+v)", tl.ID(), last)
		}
	})
}

// checkResult checks the shape of a result and returns its error code, ""
// for a success.
func checkResult(t *testing.T, tl *tool.Tool, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil {
		t.Fatalf("%s: nil result", tl.ID())
	}
	if !res.IsError {
		if res.StructuredContent == nil {
			t.Fatalf("%s: success without structured content", tl.ID())
		}
		return ""
	}
	if res.StructuredContent != nil {
		t.Fatalf("%s: error result carries structuredContent", tl.ID())
	}
	te, ok := res.Meta["error"].(*tool.Error)
	if !ok || te.Code == "" || te.Message == "" {
		t.Fatalf("%s: error result without a structured error: %#v", tl.ID(), res.Meta["error"])
	}
	switch te.Code {
	case CodeInvalidArgument, CodePermissionDenied, CodeNotFound, CodeFailedPrecondition,
		CodeResourceExhausted, CodeUnavailable, CodeInternal:
	default:
		t.Fatalf("%s: error code %q is not in the vocabulary", tl.ID(), te.Code)
	}
	return te.Code
}

// board is everything a write can change on the simulated board, as text.
// The camera's media directory is left out: taking a photo is what
// [camera] enabled allows.
func (r *rig) board(ctx context.Context) string {
	var b strings.Builder
	for pin := 0; pin < 28; pin++ {
		st, err := r.gpio.State(ctx, pin)
		js, _ := json.Marshal(st) // the value is a pointer: compare what it says
		fmt.Fprintf(&b, "gpio %d %s %v\n", pin, js, err)
	}
	for _, pin := range []int{12, 13, 18, 19} {
		st, err := r.pwm.Get(ctx, pin)
		js, _ := json.Marshal(st)
		fmt.Fprintf(&b, "pwm %d %s %v\n", pin, js, err)
	}
	sched, ok, err := r.pw.Scheduled(ctx)
	js, _ := json.Marshal(sched)
	fmt.Fprintf(&b, "power %s %v %v events %d\n", js, ok, err, len(r.pw.Events()))
	units, err := os.ReadFile(filepath.Join(r.dir, "units.json"))
	fmt.Fprintf(&b, "units %x %v\n", crc32.ChecksumIEEE(units), err)
	return b.String()
}

package privhelper_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

func TestHelloAndStatus(t *testing.T) {
	fh := newFakeHW()
	ops := (&fakeOps{}).ops()
	_, ops.Apt = simApt(t)
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: defaultPolicy(), Hardware: fh.hardware(), Ops: ops})
	c := newClient(t, h.sock)
	if c.Connected() {
		t.Fatal("Connected before the first call")
	}
	st, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Connected() {
		t.Fatal("not Connected after a call")
	}
	if st.Helper != "raspi-mcp-helper/0.1.0" || st.Backend != "sim" || st.PID != os.Getpid() {
		t.Errorf("Status = %+v", st)
	}
	if st.StartedAt.IsZero() || st.StartedAt.After(time.Now()) {
		t.Errorf("StartedAt = %v", st.StartedAt)
	}
	// The server serves exactly the proto table.
	want := proto.Names()
	slices.Sort(want)
	got := slices.Sorted(slices.Values(st.Methods))
	if !slices.Equal(got, want) {
		t.Errorf("Methods = %v, want %v", st.Methods, want)
	}
	if h.logs.find(t, "INFO", "client connected") == nil {
		t.Error("connection not logged")
	}

	// Raw hello answers with the protocol version.
	r := dialRaw(t, h.sock)
	resp := r.call(proto.Hello.Name, proto.HelloReq{Version: proto.Version, Client: "raw"})
	var hr proto.HelloResp
	if resp.Error != nil || resp.ID != 1 || proto.Decode(resp.Result, &hr) != nil || hr.Version != proto.Version || hr.PID != os.Getpid() {
		t.Fatalf("hello = %+v / %+v", resp, hr)
	}
	// A second hello on the same connection is refused, the connection lives on.
	if resp := r.call(proto.Hello.Name, proto.HelloReq{Version: proto.Version, Client: "raw"}); resp.Error == nil || resp.Error.Code != proto.CodeFailedPrecondition {
		t.Fatalf("second hello = %+v", resp)
	}
	if resp := r.call(proto.Status.Name, nil); resp.Error != nil {
		t.Fatalf("status with null params: %v", resp.Error)
	}
}

func TestNoPowerBackend(t *testing.T) {
	sock := sockIn(t)
	ln, err := unixsock.Listen(sock, privhelper.SocketMode, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- privhelper.NewServer(privhelper.Options{Policy: defaultPolicy()}).Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	c := newClient(t, sock)
	st, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	if err != nil || !slices.Equal(st.Methods, []string{"hello", "status"}) {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	_, err = client.Call(context.Background(), c, proto.PowerState, proto.PowerStateReq{})
	protoErr(t, err, proto.CodeNotFound)
}

func TestHandshakeRefusals(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	tests := []struct {
		name   string
		method string
		params string
		code   string
		msg    []string
	}{
		{"old version", "hello", fmt.Sprintf(`{"version":%d,"client":"old"}`, proto.Version-1), proto.CodeFailedPrecondition,
			[]string{fmt.Sprintf("client speaks protocol version %d", proto.Version-1), fmt.Sprintf("helper speaks version %d", proto.Version)}},
		{"new version", "hello", fmt.Sprintf(`{"version":%d,"client":"new"}`, proto.Version+1), proto.CodeFailedPrecondition,
			[]string{fmt.Sprintf("version %d", proto.Version+1), fmt.Sprintf("version %d", proto.Version)}},
		// A future hello with new fields is told about the version, not the field.
		{"new version new fields", "hello", fmt.Sprintf(`{"version":%d,"client":"new","features":["x"]}`, proto.Version+1), proto.CodeFailedPrecondition,
			[]string{fmt.Sprintf("version %d", proto.Version+1)}},
		{"unknown hello field", "hello", fmt.Sprintf(`{"version":%d,"client":"x","features":[]}`, proto.Version), proto.CodeInvalidArgument,
			[]string{"unknown field"}},
		{"hello trailing data", "hello", fmt.Sprintf(`{"version":%d,"client":"x"} {}`, proto.Version), proto.CodeInvalidArgument, nil},
		{"bad client name", "hello", fmt.Sprintf(`{"version":%d,"client":"a\nb"}`, proto.Version), proto.CodeInvalidArgument, []string{"client"}},
		{"not hello first", "status", `{}`, proto.CodeFailedPrecondition, []string{`first request must be "hello"`}},
		{"power first", "power.schedule", `{"action":"reboot","delay_seconds":0,"reason":""}`, proto.CodeFailedPrecondition, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, h.sock)
			resp := r.call(tc.method, json.RawMessage(tc.params))
			if resp.Error == nil || resp.Error.Code != tc.code {
				t.Fatalf("response = %+v, want %s", resp, tc.code)
			}
			for _, m := range tc.msg {
				if !strings.Contains(resp.Error.Message, m) {
					t.Errorf("message %q lacks %q", resp.Error.Message, m)
				}
			}
			r.expectClosed()
		})
	}
	if len(h.sim.Events()) != 0 {
		t.Fatalf("refused handshakes reached the backend: %+v", h.sim.Events())
	}
	if h.logs.find(t, "WARN", "hello refused") == nil {
		t.Error("hello refusal not logged")
	}
}

func TestVersionMismatchDetails(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	r := dialRaw(t, h.sock)
	resp := r.call("hello", proto.HelloReq{Version: 7, Client: "future"})
	if resp.Error == nil {
		t.Fatal("version 7 accepted")
	}
	d := resp.Error.Details
	if d["client_version"] != float64(7) || d["helper_version"] != float64(proto.Version) {
		t.Fatalf("details = %v", d)
	}
}

func TestPowerScheduleReboot(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	c := newClient(t, h.sock)
	ctx := context.Background()
	before := time.Now()
	resp, err := client.Call(ctx, c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot", DelaySeconds: 120, Reason: "kernel update"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Action != "reboot" || resp.At.Before(before.Add(119*time.Second)) || resp.At.After(time.Now().Add(121*time.Second)) {
		t.Fatalf("schedule = %+v", resp)
	}
	s, ok, _ := h.sim.Scheduled(ctx)
	if !ok || s.Action != power.Reboot || !s.At.Equal(resp.At) {
		t.Fatalf("Sim shows %+v ok=%v, want reboot at %v", s, ok, resp.At)
	}
	st, err := client.Call(ctx, c, proto.PowerState, proto.PowerStateReq{})
	if err != nil || !st.Scheduled || st.Action != "reboot" || !st.At.Equal(resp.At) {
		t.Fatalf("state = %+v, %v", st, err)
	}
	rec := h.logs.find(t, "INFO", "power action scheduled")
	if rec == nil || rec["reason"] != "kernel update" || rec["action"] != "reboot" || rec["uid"] != float64(os.Getuid()) {
		t.Fatalf("audit log record = %v", rec)
	}
	if len(h.sim.Performed()) != 0 {
		t.Fatal("performed already")
	}
}

func TestPowerScheduleImmediateIsPerformedBySim(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	c := newClient(t, h.sock)
	if _, err := client.Call(context.Background(), c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hangGuard)
	for len(h.sim.Performed()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("delay 0 reboot never performed by the Sim")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPoweroffRefusedByPolicy(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy()) // Poweroff: false
	c := newClient(t, h.sock)
	_, err := client.Call(context.Background(), c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "poweroff", DelaySeconds: 10})
	e := protoErr(t, err, proto.CodePermissionDenied)
	if want := `privhelper: power action "poweroff" is disabled by the helper's config: switch system.shutdown is off`; !strings.HasPrefix(e.Message, want) ||
		e.Details["switch"] != "system.shutdown" || e.Details["action"] != "poweroff" {
		t.Fatalf("message = %q (details %v), want %q...", e.Message, e.Details, want)
	}
	if ev := h.sim.Events(); len(ev) != 0 {
		t.Fatalf("refused action recorded: %+v", ev)
	}
	if rec := h.logs.find(t, "WARN", "request failed"); rec == nil || rec["code"] != proto.CodePermissionDenied {
		t.Fatalf("refusal not logged at Warn: %v", rec)
	}

	// And the other way round: reboot disabled, poweroff enabled.
	h2 := startHelper(t, sockIn(t), powerPolicy(agentUID(), false, true))
	c2 := newClient(t, h2.sock)
	_, err = client.Call(context.Background(), c2, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot"})
	e = protoErr(t, err, proto.CodePermissionDenied)
	if !strings.Contains(e.Message, `"reboot" is disabled`) {
		t.Fatalf("message = %q", e.Message)
	}
	if _, err := client.Call(context.Background(), c2, proto.PowerSchedule, proto.PowerScheduleReq{Action: "poweroff", DelaySeconds: 600}); err != nil {
		t.Fatal(err)
	}
	if len(h2.sim.Events()) != 1 {
		t.Fatalf("events = %+v", h2.sim.Events())
	}
}

func TestInvalidParams(t *testing.T) {
	h := startHelper(t, sockIn(t), powerPolicy(agentUID(), true, true))
	ctx := context.Background()

	// The client validates before sending...
	c := newClient(t, h.sock)
	for _, req := range []proto.PowerScheduleReq{
		{Action: "halt"},
		{Action: "reboot", DelaySeconds: -1},
		{Action: "reboot", DelaySeconds: 601},
		{Action: "reboot", Reason: strings.Repeat("x", 201)},
		{Action: "reboot", Reason: "ok\x1b[31m"},
	} {
		_, err := client.Call(ctx, c, proto.PowerSchedule, req)
		protoErr(t, err, proto.CodeInvalidArgument)
	}

	// ...and the helper validates on its own, whatever the client did.
	r := dialRaw(t, h.sock)
	r.hello()
	for _, params := range []string{
		`{"action":"halt","delay_seconds":0,"reason":""}`,
		`{"action":"reboot","delay_seconds":-1,"reason":""}`,
		`{"action":"reboot","delay_seconds":601,"reason":""}`,
		`{"action":"reboot","delay_seconds":0,"reason":"` + strings.Repeat("x", 201) + `"}`,
		`{"action":"reboot","delay_seconds":0,"reason":"a\u0000b"}`,
		`{"action":"reboot","delay_seconds":0,"reason":"a\nb"}`,
		`{"action":"reboot","delay_seconds":0,"reason":"","force":true}`,
		`{"action":"reboot","delay_seconds":"10","reason":""}`,
		`{"action":"reboot","delay_seconds":0.5}`,
		`["reboot"]`,
		`{}`,
		`null`,
	} {
		resp := r.call(proto.PowerSchedule.Name, json.RawMessage(params))
		if resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Errorf("params %s: response %+v, want invalid_argument", params, resp)
		}
	}
	// Bad params are a request error, not a frame error: the connection lives.
	if resp := r.call(proto.Status.Name, json.RawMessage(`{}`)); resp.Error != nil {
		t.Fatalf("status after bad params: %v", resp.Error)
	}
	if resp := r.call(proto.Status.Name, json.RawMessage(`{"verbose":true}`)); resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
		t.Fatalf("status with unknown param = %+v", resp)
	}
	if ev := h.sim.Events(); len(ev) != 0 {
		t.Fatalf("invalid requests reached the backend: %+v", ev)
	}
}

func TestCancel(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	c := newClient(t, h.sock)
	ctx := context.Background()
	got, err := client.Call(ctx, c, proto.PowerCancel, proto.PowerCancelReq{})
	if err != nil || got.Cancelled || got.Action != "" {
		t.Fatalf("cancel with nothing pending = %+v, %v", got, err)
	}
	if _, err := client.Call(ctx, c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot", DelaySeconds: 300}); err != nil {
		t.Fatal(err)
	}
	got, err = client.Call(ctx, c, proto.PowerCancel, proto.PowerCancelReq{})
	if err != nil || !got.Cancelled || got.Action != "reboot" {
		t.Fatalf("cancel = %+v, %v", got, err)
	}
	if _, ok, _ := h.sim.Scheduled(ctx); ok {
		t.Fatal("Sim still has a schedule")
	}
	st, err := client.Call(ctx, c, proto.PowerState, proto.PowerStateReq{})
	if err != nil || st.Scheduled || st.Action != "" || !st.At.IsZero() {
		t.Fatalf("state after cancel = %+v, %v", st, err)
	}
	if h.logs.find(t, "INFO", "power action cancelled") == nil {
		t.Error("cancellation not logged")
	}
	// Cancelling is allowed even when the policy allows no power action.
	h2 := startHelper(t, sockIn(t), privhelper.Policy{AgentUID: agentUID()})
	if _, err := client.Call(ctx, newClient(t, h2.sock), proto.PowerCancel, proto.PowerCancelReq{}); err != nil {
		t.Fatalf("cancel under a no-power policy: %v", err)
	}
}

func TestUnknownMethod(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	c := newClient(t, h.sock)
	bogus := proto.Method[proto.StatusReq, proto.StatusResp]{Name: "gpio.write"}
	_, err := client.Call(context.Background(), c, bogus, proto.StatusReq{})
	e := protoErr(t, err, proto.CodeNotFound)
	if !strings.Contains(e.Message, `"gpio.write"`) {
		t.Fatalf("message = %q", e.Message)
	}
	// The connection survives an unknown method.
	if _, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{}); err != nil || !c.Connected() {
		t.Fatalf("status after unknown method: %v", err)
	}
	// A huge method name is not echoed in full.
	r := dialRaw(t, h.sock)
	r.hello()
	resp := r.call(strings.Repeat("m", 10000), json.RawMessage(`{}`))
	if resp.Error == nil || resp.Error.Code != proto.CodeNotFound || len(resp.Error.Message) > 200 {
		t.Fatalf("response = %.300v", resp.Error)
	}
}

func TestBadFrameClosesConnection(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	t.Run("oversize", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.hello()
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], proto.MaxMessage+1)
		if _, err := r.conn.Write(hdr[:]); err != nil {
			t.Fatal(err)
		}
		resp := r.read()
		if resp.ID != 0 || resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Fatalf("response = %+v", resp)
		}
		r.expectClosed()
	})
	t.Run("garbage", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.hello()
		r.writeBody([]byte(`{"id":2,"method":"status","params":{},"sneaky":1}`))
		resp := r.read()
		if resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument || !strings.Contains(resp.Error.Message, "sneaky") {
			t.Fatalf("response = %+v", resp)
		}
		r.expectClosed()
	})
	t.Run("trailing data in params", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.hello()
		r.writeBody([]byte(`{"id":2,"method":"power.schedule","params":{"action":"reboot"} {"action":"poweroff"}}`))
		if resp := r.read(); resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Fatalf("response = %+v", resp)
		}
		r.expectClosed()
	})
	t.Run("trailing frame data", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.hello()
		r.writeBody([]byte(`{"id":2,"method":"status","params":{}}{"id":3}`))
		if resp := r.read(); resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Fatalf("response = %+v", resp)
		}
		r.expectClosed()
	})
	t.Run("before hello", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.writeBody([]byte(`{!`))
		if resp := r.read(); resp.Error == nil || resp.Error.Code != proto.CodeInvalidArgument {
			t.Fatalf("response = %+v", resp)
		}
		r.expectClosed()
	})
	if h.logs.find(t, "WARN", "bad frame") == nil {
		t.Error("bad frame not logged")
	}
}

// slowPower blocks until its context ends, or panics, to exercise the
// server's timeout and panic handling.
type slowPower struct{ panics bool }

func (p slowPower) Schedule(ctx context.Context, _ power.Action, _ time.Time) error {
	if p.panics {
		panic("boom")
	}
	<-ctx.Done()
	return ctx.Err()
}
func (slowPower) Cancel(context.Context) (power.Schedule, bool, error) {
	return power.Schedule{}, false, nil
}
func (slowPower) Scheduled(context.Context) (power.Schedule, bool, error) {
	return power.Schedule{}, false, fmt.Errorf("power: test backend is broken")
}

func TestHandlerTimeoutPanicAndBackendError(t *testing.T) {
	pol := powerPolicy(agentUID(), true, false)
	ctx := context.Background()

	// power.schedule waits on logind: its bound is the systemd one.
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Power: slowPower{}, SystemdTimeout: 50 * time.Millisecond})
	c := newClient(t, h.sock)
	// slowPower never returns by itself: only the handler timeout ends it.
	_, err := client.Call(ctx, c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot"})
	e := protoErr(t, err, proto.CodeUnavailable)
	if !e.Retryable || !strings.Contains(e.Message, "did not finish within 50ms") {
		t.Fatalf("timeout error = %+v", e)
	}
	_, err = client.Call(ctx, c, proto.PowerState, proto.PowerStateReq{})
	e = protoErr(t, err, proto.CodeInternal)
	if !strings.Contains(e.Message, "privhelper: power.state: power: test backend is broken") {
		t.Fatalf("backend error = %q", e.Message)
	}

	hp := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Power: slowPower{panics: true}})
	cp := newClient(t, hp.sock)
	_, err = client.Call(ctx, cp, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot"})
	protoErr(t, err, proto.CodeInternal)
	if _, err := client.Call(ctx, cp, proto.Status, proto.StatusReq{}); err != nil {
		t.Fatalf("helper did not survive a handler panic: %v", err)
	}
	if hp.logs.find(t, "ERROR", "panicked") == nil {
		t.Error("panic not logged")
	}
}

func TestConnectionLimit(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	for range 16 {
		dialRaw(t, h.sock).hello()
	}
	r := dialRaw(t, h.sock)
	resp := r.read() // refused before hello
	if resp.Error == nil || resp.Error.Code != proto.CodeResourceExhausted || !resp.Error.Retryable {
		t.Fatalf("17th connection = %+v", resp)
	}
}

func TestConcurrentCalls(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	shared := newClient(t, h.sock)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		c := shared
		if i%2 == 0 {
			c = newClient(t, h.sock)
		}
		wg.Go(func() {
			for j := range 20 {
				var err error
				switch j % 3 {
				case 0:
					_, err = client.Call(ctx, c, proto.Status, proto.StatusReq{})
				case 1:
					_, err = client.Call(ctx, c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot", DelaySeconds: 600})
				default:
					_, err = client.Call(ctx, c, proto.PowerCancel, proto.PowerCancelReq{})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestServeShutdownRemovesSocket(t *testing.T) {
	h := startHelper(t, sockIn(t), defaultPolicy())
	r := dialRaw(t, h.sock)
	r.hello()
	h.stop(t)
	r.expectClosed()
	if _, err := os.Stat(h.sock); !os.IsNotExist(err) {
		t.Fatalf("socket still there after shutdown: %v", err)
	}
}

package privhelper_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// buttonRig is a helper holding a simulated approval button on GPIO26
// with its LED on GPIO21; GPIO 17 and 18 are ordinary allowlisted pins.
type buttonRig struct {
	h    *helper
	c    *client.Client
	btns *gpio.SimButtons
	fh   *fakeHW
}

func testButton() config.Button {
	return config.Button{Pin: 26, LED: 21, Pull: "up", ActiveLow: true,
		Debounce: config.Duration(5 * time.Millisecond), LongPress: config.Duration(300 * time.Millisecond)}
}

func startButtonRig(t *testing.T, b config.Button, prep ...func(*gpio.SimButtons)) *buttonRig {
	t.Helper()
	r := &buttonRig{btns: gpio.NewSimButtons(28), fh: newFakeHW()}
	for _, p := range prep {
		p(r.btns)
	}
	pol := hwPolicy()
	pol.Config.Guard.Button = b
	hw := r.fh.hardware()
	hw.Button = r.btns
	r.h = startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Hardware: hw})
	r.c = newClient(t, r.h.sock)
	return r
}

// waitAsync starts a button.wait on c and returns where its answer goes.
type waitResult struct {
	resp proto.ButtonWaitResp
	err  error
}

func (r *buttonRig) waitAsync(t *testing.T, c *client.Client, ms int64) <-chan waitResult {
	t.Helper()
	out := make(chan waitResult, 1)
	go func() {
		resp, err := client.Call(context.Background(), c, proto.ButtonWait, proto.ButtonWaitReq{Call: "ap-1", TimeoutMS: ms})
		out <- waitResult{resp, err}
	}()
	r.until(t, "the wait to start", func(st proto.ButtonStatusResp) bool { return st.Waiting })
	return out
}

// until polls button.status (on its own client, the quick lane) until ok.
func (r *buttonRig) until(t *testing.T, what string, ok func(proto.ButtonStatusResp) bool) proto.ButtonStatusResp {
	t.Helper()
	c := newClient(t, r.h.sock)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := client.Call(context.Background(), c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: status %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func answer(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("button.wait never answered")
	}
	return waitResult{}
}

func TestButtonWaitPresses(t *testing.T) {
	r := startButtonRig(t, testButton())
	t.Run("short approves", func(t *testing.T) {
		ch := r.waitAsync(t, r.c, 20000)
		r.btns.Current().Press(40 * time.Millisecond)
		got := answer(t, ch)
		if got.err != nil || got.resp.Press != proto.PressShort {
			t.Fatalf("wait = %+v, %v; want short", got.resp, got.err)
		}
	})
	t.Run("long declines before the release", func(t *testing.T) {
		ch := r.waitAsync(t, r.c, 20000)
		b := r.btns.Current()
		b.SetLevel(true)
		got := answer(t, ch)
		b.SetLevel(false)
		if got.err != nil || got.resp.Press != proto.PressLong || got.resp.WaitedMS < 300 {
			t.Fatalf("wait = %+v, %v; want long after 300 ms", got.resp, got.err)
		}
	})
	t.Run("no press times out", func(t *testing.T) {
		ch := r.waitAsync(t, r.c, 1000)
		got := answer(t, ch)
		if got.err != nil || got.resp.Press != proto.PressTimeout || got.resp.WaitedMS < 1000 {
			t.Fatalf("wait = %+v, %v; want timeout", got.resp, got.err)
		}
	})
	t.Run("a press before the wait is ignored", func(t *testing.T) {
		if p, err := client.Call(context.Background(), r.c, proto.ButtonPress, proto.ButtonPressReq{}); err != nil || p.Press != proto.PressShort {
			t.Fatalf("press = %+v, %v", p, err)
		}
		got := answer(t, r.waitAsync(t, r.c, 1000))
		if got.err != nil || got.resp.Press != proto.PressTimeout {
			t.Fatalf("wait after a press = %+v, %v; want timeout", got.resp, got.err)
		}
	})
	t.Run("a hold from before the wait, released during it, is no press", func(t *testing.T) {
		b := r.btns.Current()
		b.SetLevel(true)
		ch := r.waitAsync(t, r.c, 1000)
		time.Sleep(50 * time.Millisecond)
		b.SetLevel(false)
		got := answer(t, ch)
		if got.err != nil || got.resp.Press != proto.PressTimeout {
			t.Fatalf("wait = %+v, %v; want timeout", got.resp, got.err)
		}
	})
	t.Run("button.press long through the sim", func(t *testing.T) {
		ch := r.waitAsync(t, r.c, 20000)
		other := newClient(t, r.h.sock)
		if p, err := client.Call(context.Background(), other, proto.ButtonPress, proto.ButtonPressReq{Long: true}); err != nil || p.Press != proto.PressLong {
			t.Fatalf("press = %+v, %v", p, err)
		}
		if got := answer(t, ch); got.err != nil || got.resp.Press != proto.PressLong {
			t.Fatalf("wait = %+v, %v; want long", got.resp, got.err)
		}
	})
	if h := r.h.logs.find(t, "INFO", "approval button answered"); h == nil || h["call"] != "ap-1" {
		t.Errorf("answer not logged with the call id: %v", h)
	}
}

// One wait at a time: a second, from another connection, is told at once
// and may retry; meanwhile quick calls on the waiting client go through.
func TestButtonWaitBusyAndLanes(t *testing.T) {
	r := startButtonRig(t, testButton())
	ch := r.waitAsync(t, r.c, 20000)

	start := time.Now()
	if _, err := client.Call(context.Background(), r.c, proto.Status, proto.StatusReq{}); err != nil {
		t.Fatalf("a quick call while a wait is pending: %v", err)
	}
	if _, err := client.Call(context.Background(), r.c, proto.GPIORead, proto.GPIOReadReq{Pin: 17}); err != nil {
		t.Fatalf("gpio.read while a wait is pending: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("quick calls took %s behind the wait", d)
	}

	other := newClient(t, r.h.sock)
	_, err := client.Call(context.Background(), other, proto.ButtonWait, proto.ButtonWaitReq{Call: "ap-2", TimeoutMS: 5000})
	e := protoErr(t, err, proto.CodeUnavailable)
	if !e.Retryable || !strings.Contains(e.Message, "another call waits for the approval button") || !strings.Contains(e.Message, "privhelper:") {
		t.Errorf("second wait: %+v", e)
	}
	// The same client's second wait is refused by its own lane, alike.
	_, err = client.Call(context.Background(), r.c, proto.ButtonWait, proto.ButtonWaitReq{Call: "ap-3", TimeoutMS: 5000})
	if e := protoErr(t, err, proto.CodeUnavailable); !e.Retryable || !strings.Contains(e.Message, "waits for the approval button") {
		t.Errorf("second wait on the same client: %+v", e)
	}

	r.btns.Current().Press(40 * time.Millisecond)
	if got := answer(t, ch); got.err != nil || got.resp.Press != proto.PressShort {
		t.Fatalf("first wait = %+v, %v", got.resp, got.err)
	}
	// Answered, the button is free again.
	ch = r.waitAsync(t, other, 1000)
	if got := answer(t, ch); got.err != nil || got.resp.Press != proto.PressTimeout {
		t.Fatalf("wait after the first = %+v, %v", got.resp, got.err)
	}
}

// An agent that hangs up while waiting frees the button at once.
func TestButtonWaitPeerGone(t *testing.T) {
	r := startButtonRig(t, testButton())
	raw := dialRaw(t, r.h.sock)
	raw.hello()
	raw.writeBody([]byte(`{"id":9,"method":"button.wait","params":{"call":"ap-gone","timeout_ms":600000}}`))
	r.until(t, "the raw wait to start", func(st proto.ButtonStatusResp) bool { return st.Waiting })
	raw.conn.Close()
	r.until(t, "the button to be free", func(st proto.ButtonStatusResp) bool { return !st.Waiting })
}

func TestButtonLED(t *testing.T) {
	r := startButtonRig(t, testButton())
	ch := r.waitAsync(t, r.c, 20000)
	b := r.btns.Current()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, n := b.LED(); n >= 2 {
			break // blinking while the call waits
		}
		if time.Now().After(deadline) {
			t.Fatal("the LED does not blink while a call waits")
		}
		time.Sleep(10 * time.Millisecond)
	}
	pressed := time.Now()
	b.Press(40 * time.Millisecond)
	answer(t, ch)
	// The approval shows as a steady second on, then off: found in what
	// the LED showed after the press, not by sampling it at the right
	// moment, so a busy machine cannot fail it (a waiting blink is on
	// for a quarter of a second).
	steady := func() bool {
		shown := b.Shown()
		for i := 1; i < len(shown); i++ {
			if on, off := shown[i-1], shown[i]; on.On && !off.On && on.At.After(pressed) && off.At.Sub(on.At) >= 900*time.Millisecond {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !steady(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after an approval the LED showed %+v, want a steady second on then off", b.Shown())
		}
	}
	if on, _ := b.LED(); on {
		t.Error("the LED stays on after showing the outcome")
	}
}

func TestButtonStatus(t *testing.T) {
	t.Run("unwired", func(t *testing.T) {
		r := startButtonRig(t, config.Default().Guard.Button)
		st, err := client.Call(context.Background(), r.c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err != nil || st.Wired || st.State != proto.ButtonUnwired || st.Pin != -1 {
			t.Fatalf("status = %+v, %v", st, err)
		}
		_, err = client.Call(context.Background(), r.c, proto.ButtonWait, proto.ButtonWaitReq{Call: "x", TimeoutMS: 1000})
		if e := protoErr(t, err, proto.CodeFailedPrecondition); !strings.Contains(e.Message, "[guard.button] pin") {
			t.Errorf("wait unwired: %v", e)
		}
	})
	t.Run("missing", func(t *testing.T) {
		b := testButton()
		b.Pin = 40 // the sim board has 28 lines
		r := startButtonRig(t, b)
		st, err := client.Call(context.Background(), r.c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err != nil || !st.Wired || st.State != proto.ButtonMissing || !strings.Contains(st.Detail, "no such pin") {
			t.Fatalf("status = %+v, %v", st, err)
		}
		_, err = client.Call(context.Background(), r.c, proto.ButtonWait, proto.ButtonWaitReq{Call: "x", TimeoutMS: 1000})
		if e := protoErr(t, err, proto.CodeUnavailable); !strings.Contains(e.Message, "GPIO40 is missing") {
			t.Errorf("wait on a missing button: %v", e)
		}
		if r.h.logs.find(t, "ERROR", "approval button missing") == nil {
			t.Error("a missing button is not logged")
		}
	})
	t.Run("ok", func(t *testing.T) {
		r := startButtonRig(t, testButton())
		st, err := client.Call(context.Background(), r.c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err != nil || !st.Wired || st.State != proto.ButtonOK || st.Pin != 26 || st.LED != 21 || st.Waiting {
			t.Fatalf("status = %+v, %v", st, err)
		}
	})
	t.Run("stuck at start", func(t *testing.T) {
		r := startButtonRig(t, testButton(), func(o *gpio.SimButtons) { o.StartPressed(true) })
		st, _ := client.Call(context.Background(), r.c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if st.State != proto.ButtonStuck {
			t.Fatalf("status = %+v, want stuck", st)
		}
		// A stuck button approves nothing: it must be released first.
		if got := answer(t, r.waitAsync(t, r.c, 1000)); got.err != nil || got.resp.Press != proto.PressTimeout {
			t.Fatalf("wait on a stuck button = %+v, %v", got.resp, got.err)
		}
		r.btns.Current().SetLevel(false)
		r.until(t, "ok after the release", func(st proto.ButtonStatusResp) bool { return st.State == proto.ButtonOK })
	})
	t.Run("bouncing", func(t *testing.T) {
		r := startButtonRig(t, testButton())
		b := r.btns.Current()
		for i := 0; i < 12; i++ {
			b.SetLevel(i%2 == 0)
		}
		b.SetLevel(false)
		r.until(t, "bouncing", func(st proto.ButtonStatusResp) bool { return st.State == proto.ButtonBouncing })
	})
}

// The button's pins are refused to every GPIO and PWM method, even when
// [gpio] pins lists them; the other pins work as before.
func TestButtonPinsReserved(t *testing.T) {
	btns := gpio.NewSimButtons(28)
	fh := newFakeHW()
	pol := hwPolicy()
	pol.Config.Guard.Button = testButton()
	pol.Config.GPIO.Pins = append(pol.Config.GPIO.Pins,
		config.Pin{Pin: 26, Mode: "input", Pull: "up"}, config.Pin{Pin: 21, Mode: "output", PWM: true})
	hw := fh.hardware()
	hw.Button = btns
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Hardware: hw})
	c := newClient(t, h.sock)
	ctx := context.Background()
	for _, pin := range []int{26, 21} {
		calls := map[string]func() error{
			"gpio.state": func() error {
				_, err := client.Call(ctx, c, proto.GPIOState, proto.GPIOStateReq{Pins: []int{pin}})
				return err
			},
			"gpio.configure": func() error {
				_, err := client.Call(ctx, c, proto.GPIOConfigure, proto.GPIOConfigureReq{Pin: pin, Mode: "output", Pull: "none"})
				return err
			},
			"gpio.read": func() error { _, err := client.Call(ctx, c, proto.GPIORead, proto.GPIOReadReq{Pin: pin}); return err },
			"gpio.write": func() error {
				_, err := client.Call(ctx, c, proto.GPIOWrite, proto.GPIOWriteReq{Pin: pin, Value: 1})
				return err
			},
			"pwm.set": func() error {
				_, err := client.Call(ctx, c, proto.PWMSet, proto.PWMSetReq{Pin: pin, FrequencyHz: 100, DutyCyclePercent: 50})
				return err
			},
		}
		for name, call := range calls {
			e := protoErr(t, call(), proto.CodePermissionDenied)
			if e.Details["pin"] != float64(pin) || e.Details["config_key"] != "[guard.button]" || !strings.Contains(e.Message, "guard.button") {
				t.Errorf("%s GPIO%d: %q %v", name, pin, e.Message, e.Details)
			}
		}
	}
	if seen := fh.opsSeen(); len(seen) != 0 {
		t.Errorf("refused calls reached the hardware: %v", seen)
	}
	// All pins leaves the button's out; the others still work.
	st, err := client.Call(ctx, c, proto.GPIOState, proto.GPIOStateReq{})
	if err != nil {
		t.Fatal(err)
	}
	var pins []int
	for _, p := range st.Pins {
		pins = append(pins, p.Pin)
	}
	if slices.Contains(pins, 26) || slices.Contains(pins, 21) || !slices.Contains(pins, 17) {
		t.Errorf("gpio.state of all pins = %v", pins)
	}
	if _, err := client.Call(ctx, c, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 17, Value: 1}); err != nil {
		t.Errorf("gpio.write 17: %v", err)
	}
	if _, err := client.Call(ctx, c, proto.PWMSet, proto.PWMSetReq{Pin: 18, FrequencyHz: 100, DutyCyclePercent: 50}); err != nil {
		t.Errorf("pwm.set 18: %v", err)
	}
	// Nor does the helper put the button's pins in a "safe state" at start.
	fh2 := newFakeHW()
	hw2 := fh2.hardware()
	srv := privhelper.NewServer(privhelper.Options{Policy: pol, Hardware: hw2})
	defer srv.Close()
	if err := srv.ApplySafeStates(ctx); err != nil {
		t.Fatal(err)
	}
	fh2.mu.Lock()
	defer fh2.mu.Unlock()
	if _, ok := fh2.pins[26]; ok {
		t.Errorf("safe states touched the button's pin: %v", fh2.pins)
	}
	if _, ok := fh2.pins[21]; ok {
		t.Errorf("safe states touched the LED's pin: %v", fh2.pins)
	}
	if _, ok := fh2.pins[17]; !ok {
		t.Errorf("safe states left GPIO17 alone: %v", fh2.pins)
	}
}

// Only the simulated board's button can be pressed by a call.
func TestButtonPressOnlySim(t *testing.T) {
	fh := newFakeHW()
	hw := fh.hardware()
	hw.Button = linuxLikeButtons{gpio.NewSimButtons(28)}
	pol := hwPolicy()
	pol.Config.Guard.Button = testButton()
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Hardware: hw})
	c := newClient(t, h.sock)
	_, err := client.Call(context.Background(), c, proto.ButtonPress, proto.ButtonPressReq{})
	protoErr(t, err, proto.CodeNotFound)
	if _, err := client.Call(context.Background(), c, proto.ButtonStatus, proto.ButtonStatusReq{}); err != nil {
		t.Fatal(err)
	}
}

// linuxLikeButtons is an opener that is not the simulated board's.
type linuxLikeButtons struct{ o *gpio.SimButtons }

func (l linuxLikeButtons) OpenButton(cfg gpio.ButtonConfig) (gpio.Button, error) {
	return l.o.OpenButton(cfg)
}

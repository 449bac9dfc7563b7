package power

import (
	"context"
	"errors"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// fakeBus records calls and answers them like logind would.
type fakeBus struct {
	calls    []fakeCall
	schedTyp string
	schedUS  uint64
	cancelOK bool
	err      error
}

type fakeCall struct {
	method string
	args   []any
}

func (f *fakeBus) call(_ context.Context, method string, args []any, out ...any) error {
	f.calls = append(f.calls, fakeCall{method, args})
	if f.err != nil {
		return f.err
	}
	switch method {
	case methodGetProp:
		*out[0].(*dbus.Variant) = dbus.MakeVariant([]any{f.schedTyp, f.schedUS})
	case methodCancel:
		*out[0].(*bool) = f.cancelOK
	}
	return nil
}

func newFakeLogind() (*Logind, *fakeBus) {
	f := &fakeBus{}
	return &Logind{call: f.call}, f
}

func TestLogindScheduleArgs(t *testing.T) {
	l, f := newFakeLogind()
	at := time.Date(2025, 6, 1, 10, 0, 0, 123456789, time.UTC)
	if err := l.Schedule(context.Background(), Poweroff, at); err != nil {
		t.Fatal(err)
	}
	want := []fakeCall{{"org.freedesktop.login1.Manager.ScheduleShutdown", []any{"poweroff", uint64(at.UnixMicro())}}}
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls = %#v, want %#v", f.calls, want)
	}
	// The types must be exactly string and uint64: D-Bus signature "st".
	if sig := dbus.SignatureOf(f.calls[0].args...); sig.String() != "st" {
		t.Fatalf("signature = %s, want st", sig)
	}
}

func TestLogindScheduleRejects(t *testing.T) {
	l, f := newFakeLogind()
	if err := l.Schedule(context.Background(), "halt", time.Now()); err == nil {
		t.Error("halt accepted")
	}
	if err := l.Schedule(context.Background(), Reboot, time.Unix(0, 0)); err == nil {
		t.Error("epoch accepted")
	}
	if len(f.calls) != 0 {
		t.Fatalf("rejected schedules reached the bus: %v", f.calls)
	}
	f.err = errors.New("org.freedesktop.DBus.Error.AccessDenied")
	err := l.Schedule(context.Background(), Reboot, time.Now())
	if err == nil || !strings.Contains(err.Error(), "power: logind: schedule reboot") || !errors.Is(err, f.err) {
		t.Fatalf("bus error = %v", err)
	}
}

func TestLogindScheduled(t *testing.T) {
	l, f := newFakeLogind()
	if _, ok, err := l.Scheduled(context.Background()); ok || err != nil {
		t.Fatalf("idle: ok=%v err=%v", ok, err)
	}
	want := []fakeCall{{"org.freedesktop.DBus.Properties.Get", []any{"org.freedesktop.login1.Manager", "ScheduledShutdown"}}}
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("calls = %#v", f.calls)
	}
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	f.schedTyp, f.schedUS = "reboot", uint64(at.UnixMicro())
	s, ok, err := l.Scheduled(context.Background())
	if err != nil || !ok || s.Action != Reboot || !s.At.Equal(at) {
		t.Fatalf("Scheduled = %+v %v %v", s, ok, err)
	}
	f.schedTyp, f.schedUS = "reboot", math.MaxUint64
	if _, ok, err := l.Scheduled(context.Background()); ok || err != nil {
		t.Fatalf("USEC_INFINITY: ok=%v err=%v", ok, err)
	}
	f.schedTyp, f.schedUS = "reboot", math.MaxInt64+1
	if _, _, err := l.Scheduled(context.Background()); err == nil {
		t.Fatal("out of range usec accepted")
	}
}

func TestLogindScheduledBadVariant(t *testing.T) {
	l := &Logind{call: func(_ context.Context, _ string, _ []any, out ...any) error {
		*out[0].(*dbus.Variant) = dbus.MakeVariant("nope")
		return nil
	}}
	if _, _, err := l.Scheduled(context.Background()); err == nil {
		t.Fatal("unexpected variant accepted")
	}
}

func TestLogindCancel(t *testing.T) {
	l, f := newFakeLogind()
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	f.schedTyp, f.schedUS, f.cancelOK = "poweroff", uint64(at.UnixMicro()), true
	c, ok, err := l.Cancel(context.Background())
	if err != nil || !ok || c.Action != Poweroff || !c.At.Equal(at) {
		t.Fatalf("Cancel = %+v %v %v", c, ok, err)
	}
	if f.calls[1].method != "org.freedesktop.login1.Manager.CancelScheduledShutdown" || len(f.calls[1].args) != 0 {
		t.Fatalf("cancel call = %#v", f.calls[1])
	}
	f.cancelOK = false
	if _, ok, err := l.Cancel(context.Background()); ok || err != nil {
		t.Fatalf("nothing to cancel: ok=%v err=%v", ok, err)
	}
}

// TestLogindLive only reads the pending schedule; it never schedules anything.
func TestLogindLive(t *testing.T) {
	if _, err := os.Stat("/run/dbus/system_bus_socket"); err != nil {
		t.Skip("no system bus socket; Logind is covered by the fake-bus tests")
	}
	l, err := NewLogind()
	if err != nil {
		t.Skipf("system bus not reachable: %v", err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, ok, err := l.Scheduled(ctx)
	if err != nil {
		t.Skipf("logind not answering (no systemd here?): %v", err)
	}
	t.Logf("logind scheduled shutdown: %+v ok=%v", s, ok)
}

// TestLogindReplyStore checks that godbus's Store, which the real callFunc
// uses, fills the out values the way the fake does for logind's reply bodies.
func TestLogindReplyStore(t *testing.T) {
	var v dbus.Variant
	body := []any{dbus.MakeVariant([]any{"reboot", uint64(1700000000000000)})}
	if err := dbus.Store(body, &v); err != nil {
		t.Fatal(err)
	}
	l := &Logind{call: func(_ context.Context, _ string, _ []any, out ...any) error {
		return dbus.Store(body, out...)
	}}
	s, ok, err := l.Scheduled(context.Background())
	if err != nil || !ok || s.Action != Reboot || s.At.UnixMicro() != 1700000000000000 {
		t.Fatalf("Scheduled via Store = %+v %v %v", s, ok, err)
	}
	var b bool
	if err := dbus.Store([]any{true}, &b); err != nil || !b {
		t.Fatalf("bool Store: %v", err)
	}
	if err := dbus.Store(nil); err != nil {
		t.Fatalf("empty reply Store: %v", err)
	}
}

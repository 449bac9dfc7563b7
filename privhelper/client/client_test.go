package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// fakeHelper speaks just enough of the protocol to exercise the client's
// edge cases; the real server is tested against the client in privhelper.
type fakeHelper struct {
	sock  string
	ln    *net.UnixListener
	dials atomic.Int32
	// serve handles one request after hello; it returns false to hang up.
	serve func(conn net.Conn, req proto.Request) bool
}

func startFake(t *testing.T, serve func(net.Conn, proto.Request) bool) *fakeHelper {
	t.Helper()
	dir, err := os.MkdirTemp("", "phc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeHelper{sock: filepath.Join(dir, "h.sock"), serve: serve}
	f.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: f.sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.ln.Close() })
	go func() {
		for {
			conn, err := f.ln.Accept()
			if err != nil {
				return
			}
			f.dials.Add(1)
			go f.handle(conn)
		}
	}()
	return f
}

func (f *fakeHelper) handle(conn net.Conn) {
	defer conn.Close()
	var req proto.Request
	if proto.ReadFrame(conn, &req) != nil {
		return
	}
	res, _ := json.Marshal(proto.HelloResp{Version: proto.Version, Helper: "fake", PID: 1})
	if proto.WriteFrame(conn, proto.Response{ID: req.ID, Result: res}) != nil {
		return
	}
	for {
		var req proto.Request
		if proto.ReadFrame(conn, &req) != nil || !f.serve(conn, req) {
			return
		}
	}
}

func reply(conn net.Conn, id uint64, v any) bool {
	res, _ := json.Marshal(v)
	return proto.WriteFrame(conn, proto.Response{ID: id, Result: res}) == nil
}

func okStatus(conn net.Conn, req proto.Request) bool {
	return reply(conn, req.ID, proto.StatusResp{Helper: "fake"})
}

func status(c *client.Client) error {
	_, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	return err
}

func TestDefaults(t *testing.T) {
	f := startFake(t, okStatus)
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	if err := status(c); err != nil {
		t.Fatal(err)
	}
}

func TestValidatesLocally(t *testing.T) {
	f := startFake(t, okStatus)
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	_, err := client.Call(context.Background(), c, proto.PowerSchedule, proto.PowerScheduleReq{Action: "halt"})
	if proto.CodeOf(err) != proto.CodeInvalidArgument {
		t.Fatalf("err = %v", err)
	}
	if f.dials.Load() != 0 || c.Connected() {
		t.Fatal("an invalid request caused a dial")
	}
}

func TestHelperErrorReturnedAsIs(t *testing.T) {
	f := startFake(t, func(conn net.Conn, req proto.Request) bool {
		e := &proto.Error{Code: proto.CodeFailedPrecondition, Message: "privhelper: nope", Details: map[string]any{"k": "v"}}
		return proto.WriteFrame(conn, proto.Response{ID: req.ID, Error: e}) == nil
	})
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	var e *proto.Error
	if err := status(c); !errors.As(err, &e) || e.Message != "privhelper: nope" || e.Details["k"] != "v" || e.Retryable {
		t.Fatalf("err = %#v", err)
	}
	if !c.Connected() {
		t.Fatal("a request-level error dropped the connection")
	}
}

// hangGuard bounds a wait for something that must happen; it only keeps a
// broken build from hanging, so it is far longer than a busy machine needs.
const hangGuard = time.Minute

// silent is a helper that takes requests and never answers until the test
// ends: only the client's own timeout, context or Close can end a call.
func silent(t *testing.T) (serve func(net.Conn, proto.Request) bool, arrived <-chan struct{}) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	got := make(chan struct{}, 16)
	return func(net.Conn, proto.Request) bool {
		got <- struct{}{}
		<-block
		return false
	}, got
}

// within runs call and returns its error, failing the test if it hangs.
func within(t *testing.T, what string, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s still running after %v", what, hangGuard)
		return nil
	}
}

func TestCallTimeout(t *testing.T) {
	serve, _ := silent(t)
	f := startFake(t, serve)
	c := client.New(client.Options{Socket: f.sock, Timeout: 100 * time.Millisecond})
	defer c.Close()
	err := within(t, "a call to a silent helper", func() error { return status(c) })
	var e *proto.Error
	if !errors.As(err, &e) || e.Code != proto.CodeUnavailable || !e.Retryable || !strings.Contains(e.Message, "i/o timeout") {
		t.Fatalf("err = %v; want unavailable by the call timeout", err)
	}
	if c.Connected() {
		t.Fatal("a timed-out connection was kept; its next response would be out of step")
	}
}

func TestContextCancelAndDeadline(t *testing.T) {
	serve, arrived := silent(t)
	f := startFake(t, serve)
	c := client.New(client.Options{Socket: f.sock, Timeout: hangGuard})
	defer c.Close()

	// Cancelled once the helper has the request: only the cancellation
	// can end the call.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	err := within(t, "a cancelled call", func() error {
		_, err := client.Call(ctx, c, proto.Status, proto.StatusReq{})
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	err = within(t, "a call past its deadline", func() error {
		_, err := client.Call(ctx, c, proto.Status, proto.StatusReq{})
		return err
	})
	// The helper never answers and the call timeout is the hang guard:
	// only the context's deadline can have ended the call.
	if proto.CodeOf(err) != proto.CodeUnavailable {
		t.Fatalf("call past its deadline: %v", err)
	}
}

// A call waiting for its turn behind a slow one still honours its context.
func TestWaitingForTurnHonoursContext(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 2)
	var served atomic.Int32
	f := startFake(t, func(conn net.Conn, req proto.Request) bool {
		served.Add(1)
		arrived <- struct{}{}
		<-release
		return reply(conn, req.ID, proto.StatusResp{})
	})
	c := client.New(client.Options{Socket: f.sock, Timeout: hangGuard})
	defer c.Close()
	first := make(chan error)
	go func() { first <- status(c) }()
	<-arrived // the first call holds the turn until release

	// The queued call ends by its own deadline; release comes only after.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := within(t, "a call queued behind a slow one", func() error {
		_, err := client.Call(ctx, c, proto.Status, proto.StatusReq{})
		return err
	})
	if err == nil || served.Load() != 1 {
		t.Fatalf("queued call: %v, helper saw %d requests", err, served.Load())
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestMismatchedIDDropsConnection(t *testing.T) {
	f := startFake(t, func(conn net.Conn, req proto.Request) bool {
		return reply(conn, req.ID+100, proto.StatusResp{})
	})
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	if proto.CodeOf(status(c)) != proto.CodeInternal || c.Connected() {
		t.Fatal("a mismatched response id was accepted or the connection kept")
	}
}

func TestBadResultIsInternal(t *testing.T) {
	f := startFake(t, func(conn net.Conn, req proto.Request) bool {
		return proto.WriteFrame(conn, proto.Response{ID: req.ID, Result: json.RawMessage(`{"helper":"x","surprise":1}`)}) == nil
	})
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	if proto.CodeOf(status(c)) != proto.CodeInternal {
		t.Fatal("a result with an unknown field was accepted")
	}
}

// Bytes arriving between calls mean the stream is out of step: the client
// must not read them as the next answer, but redial.
func TestUnsolicitedDataCausesRedial(t *testing.T) {
	strayed := make(chan struct{}, 2)
	f := startFake(t, func(conn net.Conn, req proto.Request) bool {
		if !reply(conn, req.ID, proto.StatusResp{}) {
			return false
		}
		defer func() { strayed <- struct{}{} }()
		return reply(conn, req.ID+1, proto.StatusResp{Helper: "stray"})
	})
	c := client.New(client.Options{Socket: f.sock})
	defer c.Close()
	if err := status(c); err != nil {
		t.Fatal(err)
	}
	// A written frame is in our socket's receive queue at once.
	<-strayed
	if err := status(c); err != nil {
		t.Fatal(err)
	}
	if n := f.dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2", n)
	}
}

func TestClose(t *testing.T) {
	f := startFake(t, okStatus)
	c := client.New(client.Options{Socket: f.sock})
	if err := status(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c.Connected() {
		t.Fatal("Connected after Close")
	}
	if proto.CodeOf(status(c)) != proto.CodeFailedPrecondition {
		t.Fatal("call after Close did not fail with failed_precondition")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestCloseInterruptsCall(t *testing.T) {
	serve, arrived := silent(t)
	f := startFake(t, serve)
	c := client.New(client.Options{Socket: f.sock, Timeout: hangGuard})
	done := make(chan error)
	go func() { done <- status(c) }()
	<-arrived // the call is waiting for its answer
	c.Close()
	select {
	case err := <-done:
		if proto.CodeOf(err) != proto.CodeFailedPrecondition {
			t.Fatalf("interrupted call: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Close did not interrupt the call")
	}
}

func TestHelperVersionChecked(t *testing.T) {
	dir, _ := os.MkdirTemp("", "phc")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "h.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var req proto.Request
		proto.ReadFrame(conn, &req)
		reply(conn, req.ID, proto.HelloResp{Version: proto.Version + 1})
		time.Sleep(time.Second)
	}()
	c := client.New(client.Options{Socket: sock})
	defer c.Close()
	if err := status(c); proto.CodeOf(err) != proto.CodeFailedPrecondition {
		t.Fatalf("helper with another version: %v", err)
	}
}

// An approval's wait follows the request's own timeout, past the helper's
// bound on it, never a fixed constant.
func TestApprovalTimeoutFollowsRequest(t *testing.T) {
	c := client.New(client.Options{Socket: "/nonexistent"})
	for _, w := range []time.Duration{time.Second, 2 * time.Minute, proto.MaxButtonWait} {
		got := c.ApprovalTimeout(w)
		if got <= proto.ApprovalBound(w) || got != proto.ApprovalBound(w)+proto.ReplyMargin {
			t.Errorf("ApprovalTimeout(%s) = %s, want the helper's bound %s plus %s", w, got, proto.ApprovalBound(w), proto.ReplyMargin)
		}
	}
	if c.Timeout(proto.Approval) != c.ApprovalTimeout(proto.MaxButtonWait) {
		t.Errorf("Timeout(Approval) = %s, want the cap", c.Timeout(proto.Approval))
	}
}

package privhelper_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// expectUnavailable asserts a retryable unavailable naming the socket, and
// why: with why "" the socket itself said the helper is gone (refused,
// reset, closed), so the client did not wait out a timeout; otherwise the
// message names why, and a timeout, as for a socket that never answers.
func expectUnavailable(t *testing.T, c *client.Client, sock, why string) {
	t.Helper()
	_, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{})
	e := protoErr(t, err, proto.CodeUnavailable)
	if !e.Retryable {
		t.Errorf("unavailable error not retryable: %+v", e)
	}
	if e.Details["socket"] != sock || !strings.Contains(e.Message, sock) {
		t.Errorf("error does not name the socket %s: %+v", sock, e)
	}
	if !strings.Contains(e.Message, why) || (why == "") == strings.Contains(e.Message, "timeout") {
		t.Errorf("unavailable for the wrong reason (want %q): %s", why, e.Message)
	}
	if c.Connected() {
		t.Error("Connected after a failed call")
	}
}

func expectStatus(t *testing.T, c *client.Client) {
	t.Helper()
	if _, err := client.Call(context.Background(), c, proto.Status, proto.StatusReq{}); err != nil {
		t.Fatalf("status: %v", err)
	}
	if !c.Connected() {
		t.Fatal("not Connected after a good call")
	}
}

// TestHelperDownAndRestart uses one client object throughout: helper absent,
// started, stopped mid-session, restarted, restarted again while idle.
func TestHelperDownAndRestart(t *testing.T) {
	sock := sockIn(t)
	c := newClient(t, sock)

	// No socket at all.
	expectUnavailable(t, c, sock, "")

	// Helper comes up: the next call works.
	h := startHelper(t, sock, defaultPolicy())
	expectStatus(t, c)

	// Helper goes away mid-session: the next call fails fast...
	h.stop(t)
	expectUnavailable(t, c, sock, "")

	// ...and once it is back the call after works, same client.
	h = startHelper(t, sock, defaultPolicy())
	expectStatus(t, c)

	// Restart while the client is idle: the dead connection is noticed
	// before anything is sent, so the call succeeds without a retry.
	h.stop(t)
	startHelper(t, sock, defaultPolicy())
	expectStatus(t, c)
}

// TestHelperHung covers a socket that accepts connections (the kernel
// backlog does) but never answers: the hello must time out, not hang.
func TestHelperHung(t *testing.T) {
	sock := sockIn(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := client.New(client.Options{Socket: sock, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	expectUnavailable(t, c, sock, "(status: hello)")
}

// TestStaleSocketFile covers a socket file left behind by a crashed helper:
// connect is refused, which must read as unavailable too.
func TestStaleSocketFile(t *testing.T) {
	sock := sockIn(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	c := newClient(t, sock)
	expectUnavailable(t, c, sock, "")
	// And the helper's socket replaces it (unixsock.Listen).
	startHelper(t, sock, defaultPolicy())
	expectStatus(t, c)
}

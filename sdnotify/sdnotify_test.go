package sdnotify

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listen is systemd's side: a datagram socket named by NOTIFY_SOCKET.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

// hangGuard bounds a wait for a notification that must come; a busy
// machine may take seconds, and the read returns as soon as it arrives.
const hangGuard = time.Minute

func read(t *testing.T, c *net.UnixConn, within time.Duration) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(within))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func TestReadyAndStopping(t *testing.T) {
	c := listen(t)
	Ready("serving /run/x.sock")
	if got := read(t, c, hangGuard); !strings.Contains(got, "READY=1") || !strings.Contains(got, "STATUS=serving /run/x.sock") {
		t.Fatalf("got %q", got)
	}
	Stopping()
	if got := read(t, c, hangGuard); got != "STOPPING=1" {
		t.Fatalf("got %q", got)
	}
}

func TestWatchdogPingsWhileHealthy(t *testing.T) {
	c := listen(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthy := make(chan error, 1)
	healthy <- nil
	checks := make(chan struct{}, 8)
	go Watchdog(ctx, func() error {
		select {
		case checks <- struct{}{}:
		default:
		}
		select {
		case err := <-healthy:
			return err
		default:
			return context.DeadlineExceeded // unhealthy after the first ping
		}
	})
	if got := read(t, c, hangGuard); got != "WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	// Unhealthy: no more pings, so systemd would restart the unit. A ping
	// follows its check at once, so by the third check the second (the
	// first unhealthy one) has had its chance to ping.
	for range 3 {
		select {
		case <-checks:
		case <-time.After(hangGuard):
			t.Fatal("the watchdog stopped checking health")
		}
	}
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)) // a sent datagram is already queued
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("pinged while unhealthy: %q", buf[:n])
	}
}

func TestNoSystemdIsANoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	Ready("x")
	// A context that never ends: Watchdog must return on its own.
	done := make(chan struct{})
	go func() { Watchdog(context.Background(), nil); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("Watchdog without WATCHDOG_USEC did not return")
	}
}

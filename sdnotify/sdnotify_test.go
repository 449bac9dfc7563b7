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
	if got := read(t, c, time.Second); !strings.Contains(got, "READY=1") || !strings.Contains(got, "STATUS=serving /run/x.sock") {
		t.Fatalf("got %q", got)
	}
	Stopping()
	if got := read(t, c, time.Second); got != "STOPPING=1" {
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
	go Watchdog(ctx, func() error {
		select {
		case err := <-healthy:
			return err
		default:
			return context.DeadlineExceeded // unhealthy after the first ping
		}
	})
	if got := read(t, c, 2*time.Second); got != "WATCHDOG=1" {
		t.Fatalf("got %q", got)
	}
	// Unhealthy: no more pings, so systemd would restart the unit.
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("pinged while unhealthy: %q", buf[:n])
	}
}

func TestNoSystemdIsANoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	Ready("x")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	Watchdog(ctx, nil) // returns at once without WATCHDOG_USEC
}

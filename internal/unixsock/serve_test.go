package unixsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// fakeListener hands out a scripted sequence of accept results, then blocks
// until closed, as a real listener does.
type fakeListener struct {
	script []any // *net.UnixConn or error
	closed chan struct{}
}

func (f *fakeListener) AcceptUnix() (*net.UnixConn, error) {
	if len(f.script) > 0 {
		next := f.script[0]
		f.script = f.script[1:]
		if c, ok := next.(*net.UnixConn); ok {
			return c, nil
		}
		return nil, next.(error)
	}
	<-f.closed
	return nil, net.ErrClosed
}

func (f *fakeListener) Close() error {
	select {
	case <-f.closed:
	default:
		close(f.closed)
	}
	return nil
}

func (f *fakeListener) Addr() net.Addr { return &net.UnixAddr{Name: "fake", Net: "unix"} }

// connPair is a connected pair of Unix sockets.
func connPair(t *testing.T) (server, client *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}

func accepted(err error) error {
	return &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", err)}
}

// TestServeBacksOffOnShortage: running out of descriptors pauses the loop,
// longer each time, and the next connection is still served; a success
// resets the pause.
func TestServeBacksOffOnShortage(t *testing.T) {
	first, firstPeer := connPair(t)
	second, secondPeer := connPair(t)
	ln := &fakeListener{closed: make(chan struct{}), script: []any{
		accepted(syscall.EMFILE), accepted(syscall.EMFILE), accepted(syscall.ENFILE), accepted(syscall.EMFILE),
		first,
		accepted(syscall.EMFILE),
		second,
	}}
	var waits []time.Duration
	wait := func(_ context.Context, d time.Duration) bool { waits = append(waits, d); return true }
	served := make(chan *net.UnixConn, 2)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, ln, nil, func(_ context.Context, c *net.UnixConn) { served <- c }, wait)
	}()
	got := map[*net.UnixConn]bool{}
	for range 2 {
		select {
		case c := <-served:
			got[c] = true
		case <-time.After(60 * time.Second):
			t.Fatal("hang guard: a connection after EMFILE was never served")
		}
	}
	if !got[first] || !got[second] {
		t.Fatal("served some other connection than the two accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel = %v, want nil", err)
	}
	want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 5 * time.Millisecond}
	if !slices.Equal(waits, want) {
		t.Fatalf("pauses = %v, want %v", waits, want)
	}
	// Serve closed both connections after their handlers returned.
	for _, peer := range []*net.UnixConn{firstPeer, secondPeer} {
		peer.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("peer read after serve = %v, want EOF", err)
		}
	}
}

// TestServeBackoffCaps: the pause stops growing at a second.
func TestServeBackoffCaps(t *testing.T) {
	script := []any{}
	for range 12 {
		script = append(script, accepted(syscall.EMFILE))
	}
	ln := &fakeListener{closed: make(chan struct{}), script: script}
	var waits []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	wait := func(_ context.Context, d time.Duration) bool {
		waits = append(waits, d)
		if len(waits) == len(script) {
			cancel()
			return false
		}
		return true
	}
	if err := serve(ctx, ln, nil, func(context.Context, *net.UnixConn) { t.Error("nothing to serve") }, wait); err != nil {
		t.Fatalf("serve = %v", err)
	}
	if waits[len(waits)-1] != maxBackoff || slices.Max(waits) != maxBackoff {
		t.Fatalf("pauses = %v, want them capped at %v", waits, maxBackoff)
	}
}

// TestServeEndsOnPermanentError: an error that will not pass ends Serve
// with the error, rather than looping on it.
func TestServeEndsOnPermanentError(t *testing.T) {
	for _, e := range []error{net.ErrClosed, accepted(syscall.EINVAL), accepted(syscall.EBADF)} {
		ln := &fakeListener{closed: make(chan struct{}), script: []any{e}}
		wait := func(context.Context, time.Duration) bool { t.Errorf("%v: paused on a permanent error", e); return true }
		err := serve(context.Background(), ln, nil, func(context.Context, *net.UnixConn) {}, wait)
		if !errors.Is(err, e) && !errors.Is(err, errors.Unwrap(errors.Unwrap(e))) {
			t.Fatalf("serve with %v = %v", e, err)
		}
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{accepted(syscall.EMFILE), true},
		{accepted(syscall.ENFILE), true},
		{accepted(syscall.ENOBUFS), true},
		{accepted(syscall.ECONNABORTED), true},
		{os.ErrDeadlineExceeded, true},
		{net.ErrClosed, false},
		{fmt.Errorf("wrapped: %w", net.ErrClosed), false},
		{accepted(syscall.EINVAL), false},
		{errors.New("something else"), false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestServeClosesOpenConnsOnCancel: a handler blocked on a silent client is
// released when the server stops, and Serve waits for it.
func TestServeClosesOpenConnsOnCancel(t *testing.T) {
	dir, err := os.MkdirTemp("", "us")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ln, err := Listen(sock, 0o600, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reading := make(chan struct{})
	returned := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, nil, func(_ context.Context, c *net.UnixConn) {
			close(reading)
			_, err := c.Read(make([]byte, 1))
			returned <- err
		})
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-reading:
	case <-time.After(60 * time.Second):
		t.Fatal("hang guard: handler never started")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("hang guard: Serve did not return after cancel")
	}
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("the handler's read succeeded on a closed connection")
		}
	default:
		t.Fatal("Serve returned before its handler")
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after Serve: %v", err)
	}
}

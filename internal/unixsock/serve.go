package unixsock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Handler serves one connection; Serve closes the connection after it returns.
type Handler func(ctx context.Context, conn *net.UnixConn)

// Back-off bounds of the accept loop, as net/http's: short enough that a
// server recovers at once when descriptors are freed, long enough not to spin.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Serve accepts connections on ln until ctx ends, serving each with handle in
// its own goroutine. When ctx ends it closes ln and every open connection,
// waits for the handlers and returns nil.
//
// Running out of file descriptors (EMFILE, ENFILE) or kernel memory, an
// aborted connection and a timed-out accept do not end the server: it logs,
// pauses (doubling from 5 ms to 1 s) and accepts again, so a burst of clients
// cannot take a daemon down. Any other accept error, such as the listener
// being closed under it, is returned. log may be nil.
func Serve(ctx context.Context, ln *net.UnixListener, log *slog.Logger, handle Handler) error {
	return serve(ctx, ln, log, handle, pause)
}

// listener is what serve needs of a *net.UnixListener; tests inject errors.
type listener interface {
	AcceptUnix() (*net.UnixConn, error)
	Close() error
	Addr() net.Addr
}

// pause waits d or until ctx ends; false means ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func serve(ctx context.Context, ln listener, log *slog.Logger, handle Handler, wait func(context.Context, time.Duration) bool) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = make(map[*net.UnixConn]struct{})
	)
	defer wg.Wait() // runs after cancel below has started the sweep
	defer cancel()
	context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})

	backoff := time.Duration(0)
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !Retryable(err) {
				return fmt.Errorf("unixsock: accept on %s: %w", ln.Addr(), err)
			}
			backoff = min(max(2*backoff, minBackoff), maxBackoff)
			log.Error("unixsock: accept failed; retrying", "socket", ln.Addr().String(), "err", err, "backoff", backoff)
			if !wait(ctx, backoff) {
				return nil
			}
			continue
		}
		backoff = 0
		mu.Lock()
		if ctx.Err() != nil { // the sweep has run or is waiting for mu
			mu.Unlock()
			conn.Close()
			return nil
		}
		conns[conn] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, conn)
				mu.Unlock()
				conn.Close()
			}()
			handle(ctx, conn)
		})
	}
}

// Retryable reports whether an accept error is a passing shortage (file
// descriptors, kernel buffers, an aborted or timed-out connection) after
// which a server should pause and accept again, rather than stop.
func Retryable(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

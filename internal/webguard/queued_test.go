package webguard

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stuckWriter is a ResponseWriter whose writes wait until release is
// closed.
type stuckWriter struct {
	h       http.Header
	release chan struct{}
	mu      sync.Mutex
	status  int
	body    strings.Builder
	flushes int
}

func (s *stuckWriter) Header() http.Header { return s.h }
func (s *stuckWriter) WriteHeader(c int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = c
}
func (s *stuckWriter) Write(p []byte) (int, error) {
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.Write(p)
}
func (s *stuckWriter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
}

// Writes and flushes return at once while the client reads nothing; the
// status reaches the real writer at once; past the bound the response is
// cut, its context cancelled, the cut reported once, and what it held
// counted off the shared total.
func TestQueuedDoesNotWaitAndCuts(t *testing.T) {
	sw := &stuckWriter{h: http.Header{}, release: make(chan struct{})}
	var total atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	cuts := make(chan string, 2)
	q := NewQueued(sw, QueueLimits{Bytes: 100, Total: 1000, Add: total.Add, Deadline: time.Minute}, cancel, func(why string) { cuts <- why })
	q.Header().Set("Content-Type", "text/event-stream")
	q.WriteHeader(http.StatusAccepted)
	if _, ok := any(q).(http.Flusher); !ok {
		t.Fatal("not a Flusher")
	}
	if http.NewResponseController(q).Flush() != nil {
		t.Fatal("flush through a ResponseController")
	}
	for i := range 5 {
		if _, err := q.Write([]byte(strings.Repeat("x", 20))); err != nil {
			t.Fatalf("write %d within the bound: %v", i, err)
		}
		q.Flush()
	}
	sw.mu.Lock()
	status := sw.status
	sw.mu.Unlock()
	if status != http.StatusAccepted || sw.h.Get("Content-Type") != "text/event-stream" {
		t.Errorf("the real writer has status %d, headers %v", status, sw.h)
	}
	if total.Load() != 100 || q.Queued() != 100 {
		t.Errorf("queued %d, total %d; want 100", q.Queued(), total.Load())
	}
	if _, err := q.Write([]byte("y")); !errors.Is(err, ErrCut) {
		t.Fatalf("a write past the bound: %v, want ErrCut", err)
	}
	if ctx.Err() == nil {
		t.Error("a cut did not cancel the request's context")
	}
	select {
	case why := <-cuts:
		if !strings.Contains(why, "queue bound of 100 bytes") {
			t.Errorf("cut because %q", why)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cut was not reported")
	}
	close(sw.release) // the write that waited ends (a real one on the deadline)
	q.Close()
	if total.Load() != 0 {
		t.Errorf("%d bytes still counted after the cut", total.Load())
	}
	if _, err := q.Write([]byte("z")); err == nil {
		t.Error("a write after the cut succeeded")
	}
	if len(cuts) != 0 {
		t.Error("the cut was reported twice")
	}
}

// Through a real server: the status, headers, body and flushes arrive in
// order while the handler runs, and what is queued when it returns is
// written before the response ends.
func TestQueuedStreams(t *testing.T) {
	step := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		q := NewQueued(w, QueueLimits{Bytes: 1 << 20, Deadline: time.Minute}, cancel, nil)
		defer q.Close()
		q.Header().Set("Content-Type", "text/event-stream")
		q.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(q, "data: one\n\n")
		_ = http.NewResponseController(q).Flush()
		select {
		case <-step:
		case <-ctx.Done():
			return
		}
		for range 100 {
			_, _ = io.WriteString(q, "data: more\n\n")
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event before the handler went on: %q, %v", line, err)
	}
	close(step)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rest), "data: more\n\n"); n != 100 {
		t.Fatalf("%d of 100 events queued at the handler's return arrived", n)
	}
}

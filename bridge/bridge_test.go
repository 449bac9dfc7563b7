package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAgent answers each request after delay and, like go-sdk v1.8.0, stops
// answering as soon as its input reaches EOF: anything still in flight is lost.
func fakeAgent(t *testing.T, delay time.Duration) (*net.UnixConn, func()) {
	t.Helper()
	quit := make(chan struct{})
	path := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var mu sync.Mutex
		eof := false
		var inflight sync.WaitGroup
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
				continue
			}
			inflight.Add(1)
			go func(id json.RawMessage) {
				defer inflight.Done()
				select {
				case <-time.After(delay):
				case <-quit:
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if eof {
					return // dropped, as go-sdk #1061 does
				}
				c.Write([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}` + "\n"))
			}(req.ID)
		}
		mu.Lock()
		eof = true
		mu.Unlock()
		inflight.Wait()
	}()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	return conn, func() { close(quit); ln.Close(); wg.Wait() }
}

func TestInFlightResponsesSurviveStdinEOF(t *testing.T) {
	conn, stop := fakeAgent(t, 150*time.Millisecond)
	defer stop()
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":"two","method":"tools/list"}
`)
	var out bytes.Buffer
	// The grace only bounds the wait; Run returns once both answers are out.
	if err := Run(in, &out, conn, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, `"id":1,`) || !strings.Contains(got, `"id":"two"`) {
		t.Fatalf("responses lost after stdin EOF:\n%s", got)
	}
	if n := strings.Count(got, "\n"); n != 2 {
		t.Fatalf("want exactly 2 lines on stdout, got %d:\n%s", n, got)
	}
}

func TestGraceBoundsTheWait(t *testing.T) {
	conn, stop := fakeAgent(t, time.Hour)
	defer func() { conn.Close(); stop() }()
	// The answer never comes: only the grace can end Run. The minute is a
	// hang guard, far past the grace however busy the machine is.
	done := make(chan error, 1)
	go func() {
		done <- Run(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"x"}`+"\n"), io.Discard, conn, 200*time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not give up after its grace")
	}
}

func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		line      string
		req, resp []string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"a"}`, []string{"1"}, nil},
		{`{"jsonrpc":"2.0","method":"notifications/x"}`, nil, nil},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, nil, []string{"1"}},
		{`{"jsonrpc":"2.0","id":"a","error":{"code":1}}`, nil, []string{`"a"`}},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`, []string{"1", "2"}, nil},
		{`not json`, nil, nil},
	} {
		if got := requestIDs([]byte(tc.line)); strings.Join(got, ",") != strings.Join(tc.req, ",") {
			t.Errorf("requestIDs(%s) = %v, want %v", tc.line, got, tc.req)
		}
		if got := responseIDs([]byte(tc.line)); strings.Join(got, ",") != strings.Join(tc.resp, ",") {
			t.Errorf("responseIDs(%s) = %v, want %v", tc.line, got, tc.resp)
		}
	}
}

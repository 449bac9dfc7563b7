package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// fakeAgent answers each request after delay and, like go-sdk v1.8.0, stops
// answering as soon as its input reaches EOF: anything still in flight is
// lost. Like go-sdk it decodes the id and encodes it again, so a string's
// escapes may come back spelled differently.
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
			var v any
			_ = json.Unmarshal(req.ID, &v)
			id, _ := json.Marshal(v)
			inflight.Add(1)
			go func(id []byte) {
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
			}(id)
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

// An answer under another spelling of the id ends the wait; Run returns
// long before its grace (the 60 s is a hang guard).
func TestAnswerMatchedByIDValue(t *testing.T) {
	conn, stop := fakeAgent(t, 10*time.Millisecond)
	defer func() { conn.Close(); stop() }()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- Run(strings.NewReader(`{"jsonrpc":"2.0","id":"\u0041\/","method":"x"}`+"\n"), &out, conn, 10*time.Minute)
	}()
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), `"id":"A/"`) {
			t.Fatalf("Run: %v, output %q", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run still waiting for an answer it already forwarded")
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
	keys := func(ids ...string) []string {
		var out []string
		for _, id := range ids {
			out = append(out, rpcid.Key([]byte(id)))
		}
		return out
	}
	for _, tc := range []struct {
		line      string
		req, resp []string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"a"}`, keys("1"), nil},
		{`{"jsonrpc":"2.0","method":"notifications/x"}`, nil, nil},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, nil, keys("1")},
		{`{"jsonrpc":"2.0","id":"a","error":{"code":1}}`, nil, keys(`"a"`)},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`, keys("1", "2"), nil},
		{`not json`, nil, nil},
		// The agent refuses these under the id as sent: waited for.
		{`{"jsonrpc":"2.0","id":1.5,"method":"a"}`, keys("1.5"), nil},
		{`{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"a"}`, keys("123456789012345678901234567890"), nil},
		{`{"jsonrpc":"2.0","id":null,"method":"a"}`, keys("null"), nil},
		// Answered under a null id, or a notification to the agent: not waited for.
		{"{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"a\"}", nil, nil},
		{`{"jsonrpc":"2.0","ID":5,"method":"a"}`, nil, nil},
		{`{"jsonrpc":"2.0","id":01,"method":"a"}`, nil, nil},
	} {
		if got := sentKeys(tc.line); strings.Join(got, ",") != strings.Join(tc.req, ",") {
			t.Errorf("sent(%s) owes %v, want %v", tc.line, got, tc.req)
		}
		if got := answeredKeys(tc.line); strings.Join(got, ",") != strings.Join(tc.resp, ",") {
			t.Errorf("answered(%s) strikes off %v, want %v", tc.line, got, tc.resp)
		}
	}
	// go-sdk may spell a string id's escapes differently in its answer.
	o := newOwed()
	o.sent([]byte(`{"jsonrpc":"2.0","id":"\u0041\/","method":"a"}`))
	o.Answered([]byte(`{"jsonrpc":"2.0","id":"A/","result":{}}`))
	if n := o.Count(); n != 0 {
		t.Errorf("escaped id not matched: %d still owed", n)
	}
	select {
	case <-o.Drained():
	default:
		t.Error("the last answer did not signal")
	}
}

// sentKeys are the keys a fresh owed set holds after line went to the agent.
func sentKeys(line string) []string {
	o := newOwed()
	o.sent([]byte(line))
	return o.Keys()
}

// answeredKeys are the keys, among those of the test lines' ids, that line
// from the agent strikes off.
func answeredKeys(line string) []string {
	o := newOwed()
	all := []string{"1", "2", `"a"`, "1.5", "null"}
	for _, id := range all {
		o.Add([]byte(id))
	}
	o.Answered([]byte(line))
	left := o.Keys()
	var gone []string
	for _, id := range all {
		if k := rpcid.Key([]byte(id)); !slices.Contains(left, k) {
			gone = append(gone, k)
		}
	}
	return gone
}

// An open subscriptions/listen is not an answer the client waits for once
// it has closed its input: Run half-closes at once instead of waiting out
// its grace. The agent here answers nothing and closes at the end of its
// input, as go-sdk ends a session; the minute is a hang guard far inside
// the ten-minute grace.
func TestListenIsNotOwedAtEOF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		done <- Run(strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{}}`+"\n"), io.Discard, conn, 10*time.Minute)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run waits for the answer to a listen after stdin ended")
	}
}

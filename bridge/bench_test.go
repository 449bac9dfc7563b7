package bridge

import (
	"bufio"
	"bytes"
	"io"
	"testing"
	"time"
)

// BenchmarkRoundTrip is one request and its answer through Run on
// operating-system pipes and a Unix socket, as in an SSH session. The
// client and the agent here allocate nothing per call, so allocs/op is the
// bridge's. Its CPU per call in a real session is measured by
// bench/compare (-bridge-ab), against the agent's.
func BenchmarkRoundTrip(b *testing.B) {
	conn, agent := sockPair(b)
	s := clients[0].make(b)
	done := runBridge(s, conn, time.Minute)
	req := []byte(`{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"system_get_basic_info","arguments":{}}}` + "\n")
	resp := []byte(`{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("x"), 800)) + `"}]}}` + "\n")
	go func() {
		br := bufio.NewReader(agent)
		for {
			if _, err := br.ReadSlice('\n'); err != nil {
				agent.Close()
				return
			}
			if _, err := agent.Write(resp); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(s.r)
	b.ReportAllocs()
	b.SetBytes(int64(len(req) + len(resp)))
	for b.Loop() {
		if _, err := s.w.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s.w.Close()
	go io.Copy(io.Discard, br)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

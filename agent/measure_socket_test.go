package agent

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMeasureUnreadAnswers measures what the unread-answers attack of
// issue 28 costs the agent in this process: a client sends 3,000 tools/list
// requests on the socket and reads none of the answers. It reports the peak
// Go heap and goroutine count while the attack runs, and how long an honest
// session's tools/list takes meanwhile. It asserts nothing and runs only
// with RASPI_MCP_MEASURE=1:
//
//	RASPI_MCP_MEASURE=1 go test -count=1 -run TestMeasureUnreadAnswers -v ./agent
func TestMeasureUnreadAnswers(t *testing.T) {
	if os.Getenv("RASPI_MCP_MEASURE") == "" {
		t.Skip("a measurement: set RASPI_MCP_MEASURE=1")
	}
	r := newSimRig(t, nil)
	honest := r.serveMany()(nil, "")
	ctx := context.Background()
	if _, err := honest.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, baseG := ms.HeapInuse, runtime.NumGoroutine()

	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintln(conn, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`)
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const requests = 3000
	done := make(chan int, 1)
	go func() {
		n := 0
		for i := 1; i <= requests; i++ {
			if _, err := fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`+"\n", i); err != nil {
				break
			}
			n++
		}
		done <- n
	}()
	var peak uint64
	peakG := 0
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		peakG = max(peakG, runtime.NumGoroutine())
	}
	var slowest time.Duration
	probe := func() {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if _, err := honest.ListTools(cctx, nil); err != nil {
			t.Logf("honest tools/list: %v", err)
		}
		slowest = max(slowest, time.Since(start))
	}
	written := -1
	end := time.Time{}
	for end.IsZero() || time.Now().Before(end) {
		select {
		case written = <-done:
			end = time.Now().Add(15 * time.Second) // let the answers pile up
		case <-time.After(20 * time.Millisecond):
		}
		sample()
		if time.Now().UnixMilli()%10 == 0 {
			probe()
		}
	}
	probe()
	t.Logf("requests written before the cut or the end: %d of %d", written, requests)
	t.Logf("Go heap in use: %.1f MiB before, peak %.1f MiB during the attack", float64(base)/(1<<20), float64(peak)/(1<<20))
	t.Logf("goroutines: %d before, peak %d", baseG, peakG)
	t.Logf("slowest honest tools/list during the attack: %s", slowest.Round(time.Millisecond))
}

package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime/metrics"
	"syscall"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// eraHello is how a go-sdk client opens each era: initialize (and its
// notification) up to 2025-11-25, server/discover from 2026-07-28 on.
func eraHello(era string) []string {
	if era < "2026-07-28" {
		return []string{
			`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"clientInfo":{"name":"bench","version":"1"},"protocolVersion":"` + era + `","capabilities":{"roots":{"listChanged":true}}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`,
		}
	}
	return []string{`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + eraMeta(era) + `}}`}
}

// eraMeta is the SEP-2575 `_meta` triple a go-sdk v1.8 client puts on
// every request from 2026-07-28 on, and nothing before.
func eraMeta(era string) string {
	if era < "2026-07-28" {
		return ""
	}
	return `"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/protocolVersion":"` + era + `"}`
}

// eraCall is a tools/call line in the era's form, as the go-sdk client
// writes it.
func eraCall(era string, id int, name, args string) string {
	meta := eraMeta(era)
	if meta != "" {
		meta += ","
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s"name":%q,"arguments":%s}}`, id, meta, name, args)
}

// BenchmarkCheapCallEra is one cheap call (system_get_basic_info) on the
// agent's socket in each protocol era, from a client of raw JSON lines so
// that what the benchmark costs beyond the agent stays small: profile it
// (-cpuprofile) to see what the 2026-07-28 era adds per request.
func BenchmarkCheapCallEra(b *testing.B) {
	r := newSimRig(b, nil)
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = r.a.Serve(ctx, ln); close(served) }()
	b.Cleanup(func() { cancel(); <-served })
	for _, era := range eras {
		b.Run(era, func(b *testing.B) {
			conn, err := net.Dial("unix", r.cfg.Agent.Socket)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			in := bufio.NewReaderSize(conn, 1<<16)
			id := 0
			await := func() {
				want := []byte(fmt.Sprintf(`"id":%d,`, id))
				for {
					line, err := in.ReadBytes('\n')
					if err != nil {
						b.Fatal(err)
					}
					if bytes.Contains(line, want) {
						if bytes.Contains(line, []byte(`"error":{`)) {
							b.Fatalf("%s", line)
						}
						return
					}
				}
			}
			for _, l := range eraHello(era) {
				if _, err := conn.Write([]byte(l + "\n")); err != nil {
					b.Fatal(err)
				}
			}
			await()
			b.ResetTimer()
			cpu0, gc0 := processCPU(), gcCycles()
			for range b.N {
				id++
				if _, err := conn.Write([]byte(eraCall(era, id, "system_get_basic_info", "{}") + "\n")); err != nil {
					b.Fatal(err)
				}
				await()
			}
			// The whole process's CPU: the agent's, and this loop's little.
			b.ReportMetric(float64(processCPU()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
			// Collections per thousand calls: how much of the CPU above
			// the collector's pacing decides (the 2026-07-28 era's garbage
			// sets off about twice as many).
			b.ReportMetric(float64(gcCycles()-gc0)*1e3/float64(b.N), "gc/kop")
		})
	}
}

// gcCycles is how many collections this process has finished.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// processCPU is this process's user and system time, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

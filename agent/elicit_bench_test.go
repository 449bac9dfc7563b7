package agent

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/bridge"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// BenchmarkElicitedCallOverStdio is the round trip of a high-risk call the
// person confirms (service_control_service restart), from a client speaking
// to `raspi-mcp stdio`'s bridge (bridge.Run, in process) over the agent's
// socket; "asked=no" is the same call from a client that cannot ask, so the
// difference is what asking costs. It reports the median (p50-ms).
func BenchmarkElicitedCallOverStdio(b *testing.B) {
	for _, era := range eras {
		for _, asks := range []bool{true, false} {
			name := era + "/asked=no"
			if asks {
				name = era + "/asked=yes"
			}
			b.Run(name, func(b *testing.B) {
				r := newRig(b, nil)
				ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				served := make(chan struct{})
				go func() { _ = r.a.Serve(ctx, ln); close(served) }()
				defer func() { cancel(); <-served }()
				conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: r.cfg.Agent.Socket, Net: "unix"})
				if err != nil {
					b.Fatal(err)
				}
				inR, inW := io.Pipe()
				outR, outW := io.Pipe()
				bridged := make(chan struct{})
				go func() { _ = bridge.Run(inR, outW, conn, time.Second); outW.Close(); close(bridged) }()
				opts := &mcp.ClientOptions{}
				if asks {
					opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
					}
				}
				s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, opts).
					Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: era})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { s.Close(); inW.Close(); <-bridged }()
				laps := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "service_control_service", Arguments: restartArgs})
					if err != nil || res.IsError {
						b.Fatalf("call: %v %v", err, res)
					}
					laps = append(laps, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(laps)
				b.ReportMetric(float64(laps[len(laps)/2].Microseconds())/1000, "p50-ms")
			})
		}
	}
}

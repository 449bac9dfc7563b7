package privhelper_test

import (
	"context"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// BenchmarkRoundTrip measures one client.Call of status over a real Unix
// socket on a kept connection: encode, frame, syscalls both ways, strict
// decode on both sides.
func BenchmarkRoundTrip(b *testing.B) {
	h := startHelper(b, sockIn(b), defaultPolicy())
	c := newClient(b, h.sock)
	ctx := context.Background()
	if _, err := client.Call(ctx, c, proto.Status, proto.StatusReq{}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.Call(ctx, c, proto.Status, proto.StatusReq{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnect measures dial plus hello plus one status: what the first
// call after a helper restart costs.
func BenchmarkConnect(b *testing.B) {
	h := startHelper(b, sockIn(b), defaultPolicy())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c := client.New(client.Options{Socket: h.sock})
		if _, err := client.Call(ctx, c, proto.Status, proto.StatusReq{}); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

package agent

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The cache hints a 2026-07-28 client reads are the ones chosen in
// resources.go: every raspi:// read private, a live value stale at once,
// the contract fresh for a while, the lists private for ttlLists.
func TestCacheHints(t *testing.T) {
	r := newRig(t, nil)
	s := r.sessionIn(t, admin, "2026-07-28", nil)
	ctx := context.Background()
	for uri, want := range map[string]mcp.Cacheable{
		uriContract: {TTLMs: ttlContract, CacheScope: "private"},
		uriHealth:   {TTLMs: 0, CacheScope: "private"},
		uriSummary:  {TTLMs: 0, CacheScope: "private"},
		uriConfig:   {TTLMs: 0, CacheScope: "private"},
		uriAudit:    {TTLMs: 0, CacheScope: "private"},
	} {
		res, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		if res.Cacheable != want {
			t.Errorf("%s: %+v, want %+v", uri, res.Cacheable, want)
		}
	}
	if ttlContract <= 0 {
		t.Fatal("the contract must be cacheable")
	}
	want := mcp.Cacheable{TTLMs: ttlLists, CacheScope: "private"}
	for what, got := range listCacheables(t, s) {
		if got != want {
			t.Errorf("%s/list: %+v, want %+v", what, got, want)
		}
	}
}

package store

import (
	"strings"
	"testing"
	"time"
)

// A record without a traceparent encodes, and so hashes, exactly as a
// record written before the field existed; one with it is covered by the
// chain's hash.
func TestAuditTraceparentOmittedWhenEmpty(t *testing.T) {
	r := AuditRecord{Seq: 1, Time: time.Date(2026, 7, 28, 0, 0, 0, 0, time.UTC), CorrelationID: "c1", Principal: "pi", Role: "read",
		Tool: "system.get_capabilities", Decision: DecisionAllow, InHash: "sha256:x"}
	raw, err := encodeRecord(&r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "traceparent") {
		t.Fatalf("empty traceparent encoded: %s", raw)
	}
	plain, err := recordHash(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, err := recordHash(r)
	if err != nil {
		t.Fatal(err)
	}
	if traced == plain {
		t.Fatal("the traceparent is not covered by the record's hash")
	}
}

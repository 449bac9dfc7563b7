package store

import (
	"encoding/json"
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

// A profile is kept like the traceparent: omitted when empty, so a record
// without one hashes as before, and part of the hash when present.
func TestAuditProfileOmittedWhenEmpty(t *testing.T) {
	r := AuditRecord{Seq: 1, Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), CorrelationID: "c1", Principal: "token:fleet", Role: "admin",
		Tool: "gpio.write_pin", Decision: DecisionDeny, InHash: "sha256:x"}
	plain, err := recordHash(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Profile = "read-only"
	narrowed, err := recordHash(r)
	if err != nil {
		t.Fatal(err)
	}
	if plain == narrowed {
		t.Error("the profile is not part of the record's hash")
	}
	b, _ := json.Marshal(AuditRecord{})
	if strings.Contains(string(b), "profile") {
		t.Errorf("an empty profile is written: %s", b)
	}
}

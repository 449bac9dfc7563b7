package store

import (
	"sync"
	"testing"
)

// TestAuditGroupConcurrent: appends racing each other are grouped into
// shared commits, yet each gets its own sequence number, returns the record
// as stored, and the chain verifies.
func TestAuditGroupConcurrent(t *testing.T) {
	db := openTest(t)
	const n = 64
	got := make([]AuditRecord, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = db.AppendAudit(sampleRecord(i + 1))
		}()
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		if got[i].Seq < 1 || got[i].Seq > n || seen[got[i].Seq] {
			t.Fatalf("append %d: seq %d out of range or repeated", i, got[i].Seq)
		}
		seen[got[i].Seq] = true
		stored, err := db.GetAudit(got[i].Seq)
		if err != nil || stored.Hash != got[i].Hash || stored.PrevHash != got[i].PrevHash || stored.CorrelationID != got[i].CorrelationID {
			t.Fatalf("append %d: returned %+v, stored %+v, %v", i, got[i], stored, err)
		}
	}
	if v := requireOK(t, db); v.Records != n {
		t.Fatalf("%d records verified, want %d", v.Records, n)
	}
	if total, _, _, _, err := db.AuditCounts(); err != nil || total != n {
		t.Fatalf("AuditCounts total %d, %v", total, err)
	}
}

// TestAuditGroupFailureLeavesNothing: when the file cannot grow, racing
// appends all fail and none is half written; the chain still verifies.
func TestAuditGroupFailureLeavesNothing(t *testing.T) {
	path := testPath(t)
	db, err := Open(path, Options{MaxSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	big := sampleRecord(1)
	big.Message = string(make([]byte, 100<<10))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.AppendAudit(big)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Fatalf("append %d of a record past MaxSize succeeded", i)
		}
	}
	if v := requireOK(t, db); v.Records != 0 {
		t.Fatalf("%d records after failed appends", v.Records)
	}
	// A record that fits still goes in after the failures.
	if r, err := db.AppendAudit(sampleRecord(2)); err != nil || r.Seq != 1 {
		t.Fatalf("append after failures: %+v, %v", r, err)
	}
}

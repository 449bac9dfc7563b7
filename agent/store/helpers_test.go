package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// baseTime is a fixed start so tests about time filters are deterministic.
var baseTime = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func testPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "state", "state.db")
}

func openAt(t testing.TB, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return db
}

func openTest(t testing.TB) *DB {
	t.Helper()
	db := openAt(t, testPath(t))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// sampleRecord is record i of a varied but deterministic trail.
func sampleRecord(i int) AuditRecord {
	r := AuditRecord{
		Time:          baseTime.Add(time.Duration(i) * time.Minute),
		CorrelationID: fmt.Sprintf("req-%06d", i),
		Principal:     "pi",
		Role:          "operate",
		Tool:          "gpio.read",
		Decision:      DecisionAllow,
		InHash:        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		OutHash:       "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
		DurationMS:    int64(i % 97),
	}
	return r
}

func appendN(t testing.TB, db *DB, n int) []AuditRecord {
	t.Helper()
	out := make([]AuditRecord, 0, n)
	for i := 1; i <= n; i++ {
		r, err := db.AppendAudit(sampleRecord(i))
		if err != nil {
			t.Fatalf("AppendAudit %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

// tamper closes db, opens its file with plain bbolt as an attacker with write
// access would, runs fn, and reopens the store.
func tamper(t *testing.T, db *DB, fn func(tx *bolt.Tx) error) *DB {
	t.Helper()
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatalf("tamper: %v", err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openAt(t, path)
	t.Cleanup(func() { _ = db2.Close() })
	return db2
}

func mustVerify(t *testing.T, db *DB) AuditVerify {
	t.Helper()
	v, err := db.VerifyAudit()
	if err != nil {
		t.Fatalf("VerifyAudit: %v", err)
	}
	return v
}

func requireOK(t *testing.T, db *DB) AuditVerify {
	t.Helper()
	v := mustVerify(t, db)
	if !v.OK || len(v.Problems) != 0 {
		t.Fatalf("VerifyAudit not OK: %+v", v)
	}
	return v
}

// requireOnly asserts verification found exactly one problem, of this kind at this seq.
func requireOnly(t *testing.T, v AuditVerify, kind string, seq uint64) {
	t.Helper()
	if v.OK {
		t.Fatalf("VerifyAudit OK, want %s at %d", kind, seq)
	}
	if len(v.Problems) != 1 || v.ProblemCount != 1 {
		t.Fatalf("want exactly one problem (%s at %d), got %d: %+v", kind, seq, v.ProblemCount, v.Problems)
	}
	if p := v.Problems[0]; p.Kind != kind || p.Seq != seq {
		t.Fatalf("problem = %+v, want %s at %d", p, kind, seq)
	}
}

// storedRaw is record seq exactly as stored: in the audit log, or in bbolt
// once folded.
func storedRaw(t testing.TB, db *DB, seq uint64) []byte {
	t.Helper()
	var raw []byte
	err := db.viewAudit(func(tx *bolt.Tx) error {
		db.eachAudit(tx, true, func(k, v []byte) bool {
			if string(k) == string(seqKey(seq)) {
				raw = append([]byte(nil), v...)
				return false
			}
			return true
		})
		return nil
	})
	if err != nil || raw == nil {
		t.Fatalf("record %d not stored: %v", seq, err)
	}
	return raw
}

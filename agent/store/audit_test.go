package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestAppendAndVerify1000AcrossReopen(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	recs := appendN(t, db, 1000)
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d got seq %d", i+1, r.Seq)
		}
	}
	if recs[0].PrevHash != "" {
		t.Errorf("first prev_hash = %q, want empty", recs[0].PrevHash)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].PrevHash != recs[i-1].Hash {
			t.Fatalf("record %d prev_hash does not link to %d", i+1, i)
		}
	}
	v := requireOK(t, db)
	if v.Records != 1000 || v.FirstSeq != 1 || v.LastSeq != 1000 || v.HeadSeq != 1000 {
		t.Errorf("verify = %+v", v)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, path)
	defer db.Close()
	requireOK(t, db)
	r, err := db.AppendAudit(sampleRecord(1001))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1001 || r.PrevHash != recs[999].Hash {
		t.Errorf("after reopen: seq %d prev %s, want 1001 linking to %s", r.Seq, r.PrevHash, recs[999].Hash)
	}
	v = requireOK(t, db)
	if v.Records != 1001 || v.HeadSeq != 1001 {
		t.Errorf("verify after reopen = %+v", v)
	}
}

func TestAppendReturnsStoredRecord(t *testing.T) {
	db := openTest(t)
	in := sampleRecord(1)
	in.Time = time.Date(2025, 3, 1, 13, 0, 0, 123456789, time.FixedZone("CET", 3600))
	in.Reason = `guard: "pin <17> & 18"`
	in.Message = "ünïcödé\u2028line"
	in.Seq, in.PrevHash, in.Hash = 99, "forged", "forged" // ignored
	got, err := db.AppendAudit(in)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seq != 1 || got.PrevHash != "" || !strings.HasPrefix(got.Hash, "sha256:") || len(got.Hash) != 71 {
		t.Errorf("assigned seq %d prev %q hash %q", got.Seq, got.PrevHash, got.Hash)
	}
	if got.Time.Location() != time.UTC || !got.Time.Equal(in.Time) {
		t.Errorf("time = %v, want %v in UTC", got.Time, in.Time)
	}
	stored, err := db.GetAudit(1)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(stored)
	if string(a) != string(b) {
		t.Errorf("returned %s\nstored   %s", a, b)
	}
	if got.Ref() != "audit:1" {
		t.Errorf("Ref() = %q", got.Ref())
	}

	// The stored JSON keeps the contract's field names and is readable:
	// no HTML escaping, time in UTC RFC3339Nano.
	raw := storedRaw(t, db, 1)
	for _, want := range []string{`"seq":1,`, `"time":"2025-03-01T12:00:00.123456789Z"`, `"correlation_id":"req-000001"`,
		`"reason":"guard: \"pin <17> & 18\""`, `"dry_run":false`, `"duration_ms":1`, `"prev_hash":""`, `"hash":"sha256:`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("stored JSON lacks %s: %s", want, raw)
		}
	}
	if strings.Contains(string(raw), `"upstream"`) || strings.Contains(string(raw), `"error_code"`) || strings.Contains(string(raw), `"remote"`) {
		t.Errorf("stored JSON has omitempty fields: %s", raw)
	}
}

// TestHashFormula recomputes a hash from the documented formula alone, as an
// outside checker would, without the package's internal helpers.
func TestHashFormula(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 2)
	for _, r := range recs {
		h := r.Hash
		r.Hash = ""
		c, err := CanonicalJSON(r)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(r.PrevHash + "\n" + string(c)))
		if want := "sha256:" + hex.EncodeToString(sum[:]); h != want {
			t.Errorf("record %d hash %s, formula gives %s", r.Seq, h, want)
		}
	}
}

func TestAppendValidation(t *testing.T) {
	db := openTest(t)
	r := sampleRecord(1)
	r.Decision = "maybe"
	if _, err := db.AppendAudit(r); err == nil || !strings.Contains(err.Error(), `"maybe"`) {
		t.Errorf("AppendAudit with bad decision: %v", err)
	}
	r = sampleRecord(1)
	r.Time = time.Time{}
	before := time.Now()
	got, err := db.AppendAudit(r)
	if err != nil {
		t.Fatal(err)
	}
	if got.Time.Before(before.Add(-time.Second)) || got.Time.After(time.Now().Add(time.Second)) {
		t.Errorf("zero time became %v", got.Time)
	}
}

func TestAuditRef(t *testing.T) {
	if seq, err := ParseAuditRef("audit:17"); err != nil || seq != 17 {
		t.Errorf("ParseAuditRef(audit:17) = %d, %v", seq, err)
	}
	for _, bad := range []string{"", "17", "audit:", "audit:0", "audit:-1", "audit:x", "job:3"} {
		if _, err := ParseAuditRef(bad); err == nil {
			t.Errorf("ParseAuditRef(%q) succeeded", bad)
		}
	}
	db := openTest(t)
	if _, err := db.GetAudit(3); !errors.Is(err, ErrAuditNotFound) {
		t.Errorf("GetAudit(3) on empty trail: %v", err)
	}
}

func TestConcurrentAppend(t *testing.T) {
	db := openTest(t)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	seqs := make(chan uint64, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r, err := db.AppendAudit(sampleRecord(w*each + i))
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- r.Seq
			}
		}(w)
	}
	// Readers run alongside the writers.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v, err := db.VerifyAudit(); err != nil || !v.OK {
				t.Errorf("concurrent verify: %+v %v", v, err)
				return
			}
			if _, _, err := db.QueryAudit(AuditQuery{Limit: 5}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for s := range seqs {
		if seen[s] {
			t.Fatalf("seq %d assigned twice", s)
		}
		seen[s] = true
	}
	v := requireOK(t, db)
	if v.Records != writers*each || v.LastSeq != writers*each {
		t.Errorf("verify = %+v", v)
	}
}

func TestAuditCounts(t *testing.T) {
	db := openTest(t)
	total, denied, errored, last, err := db.AuditCounts()
	if err != nil || total != 0 || denied != 0 || errored != 0 || last.Seq != 0 {
		t.Errorf("empty counts = %d %d %d %+v %v", total, denied, errored, last, err)
	}
	for i := 1; i <= 10; i++ {
		r := sampleRecord(i)
		if i%3 == 0 {
			r.Decision = DecisionDeny
		}
		if i%4 == 0 {
			r.ErrorCode = "E_IO"
		}
		if _, err := db.AppendAudit(r); err != nil {
			t.Fatal(err)
		}
	}
	total, denied, errored, last, err = db.AuditCounts()
	if err != nil || total != 10 || denied != 3 || errored != 2 || last.Seq != 10 {
		t.Errorf("counts = %d %d %d last %d %v; want 10 3 2 last 10", total, denied, errored, last.Seq, err)
	}

	// Counts are rebuilt if the stored summary goes missing.
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaAuditStats))
	})
	total, denied, errored, _, _ = db.AuditCounts()
	if total != 10 || denied != 3 || errored != 2 {
		t.Errorf("recounted = %d %d %d", total, denied, errored)
	}
	if _, err := db.AppendAudit(sampleRecord(11)); err != nil {
		t.Fatal(err)
	}
	total, denied, errored, _, _ = db.AuditCounts()
	if total != 11 || denied != 3 || errored != 2 {
		t.Errorf("after append = %d %d %d", total, denied, errored)
	}

	// Pruning subtracts what it removed: records 1..6 hold denials 3, 6 and error 4.
	if n, err := db.PruneAuditBefore(sampleRecord(7).Time); err != nil || n != 6 {
		t.Fatalf("prune = %d, %v", n, err)
	}
	total, denied, errored, _, _ = db.AuditCounts()
	if total != 5 || denied != 1 || errored != 1 {
		t.Errorf("after prune = %d %d %d; want 5 1 1", total, denied, errored)
	}
}

// --- tampering: an attacker opens the file with bbolt directly ---

func recordMap(t *testing.T, tx *bolt.Tx, seq uint64) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(tx.Bucket([]byte(bucketAudit)).Get(seqKey(seq)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func putRaw(tx *bolt.Tx, seq uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket([]byte(bucketAudit)).Put(seqKey(seq), b)
}

func TestTamperEditField(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		m := recordMap(t, tx, 5)
		m["decision"] = "deny" // still valid JSON, hash left as it was
		return putRaw(tx, 5, m)
	})
	requireOnly(t, mustVerify(t, db), ProblemHash, 5)
}

func TestTamperAddFieldOrRewriteNumber(t *testing.T) {
	for name, edit := range map[string]func(m map[string]any){
		"extra field":   func(m map[string]any) { m["note"] = "nothing to see" },
		"number as 2.0": func(m map[string]any) { m["duration_ms"] = json.Number("5.0") },
	} {
		t.Run(name, func(t *testing.T) {
			db := openTest(t)
			appendN(t, db, 10)
			db = tamper(t, db, func(tx *bolt.Tx) error {
				m := recordMap(t, tx, 5)
				edit(m)
				return putRaw(tx, 5, m)
			})
			requireOnly(t, mustVerify(t, db), ProblemHash, 5)
		})
	}
}

func TestTamperDeleteMiddle(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(7))
	})
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemGap, 7)
	if !strings.Contains(v.Problems[0].Detail, "record 7 missing") {
		t.Errorf("detail = %q", v.Problems[0].Detail)
	}

	// Appending afterwards keeps the gap visible and the rest of the chain valid.
	if _, err := db.AppendAudit(sampleRecord(21)); err != nil {
		t.Fatal(err)
	}
	requireOnly(t, mustVerify(t, db), ProblemGap, 7)
}

func TestTamperDeleteRange(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		for s := uint64(7); s <= 9; s++ {
			if err := tx.Bucket([]byte(bucketAudit)).Delete(seqKey(s)); err != nil {
				return err
			}
		}
		return nil
	})
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemGap, 7)
	if !strings.Contains(v.Problems[0].Detail, "7..9") {
		t.Errorf("detail = %q", v.Problems[0].Detail)
	}
}

func TestTamperDeleteLast(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(20))
	})
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemHead, 20)
	if v.HeadSeq != 20 || v.LastSeq != 19 {
		t.Errorf("verify = %+v", v)
	}

	// The agent keeps going from the head, never reusing seq 20; the hole
	// stays visible as a gap.
	r, err := db.AppendAudit(sampleRecord(21))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 21 {
		t.Errorf("next seq = %d, want 21", r.Seq)
	}
	requireOnly(t, mustVerify(t, db), ProblemGap, 20)
}

func TestTamperDeleteFirst(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 5)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(1))
	})
	requireOnly(t, mustVerify(t, db), ProblemGap, 1)
}

func TestTamperEditLastAndRehash(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return forge(t, tx, 10)
	})
	requireOnly(t, mustVerify(t, db), ProblemHead, 10)
}

// forge replaces record seq with a different one whose hash is correctly
// computed from the documented formula, as a careful attacker would.
func forge(t *testing.T, tx *bolt.Tx, seq uint64) error {
	t.Helper()
	var r AuditRecord
	if err := json.Unmarshal(tx.Bucket([]byte(bucketAudit)).Get(seqKey(seq)), &r); err != nil {
		return err
	}
	r.Tool = "system.reboot"
	r.Decision = DecisionDeny
	r.Hash = ""
	c, err := CanonicalJSON(r)
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(r.PrevHash + "\n" + string(c)))
	r.Hash = "sha256:" + hex.EncodeToString(sum[:])
	return putRaw(tx, seq, r)
}

func TestTamperForgeryRehashed(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error { return forge(t, tx, 5) })
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemPrev, 6)
	if !strings.Contains(v.Problems[0].Detail, "record 5") {
		t.Errorf("detail = %q", v.Problems[0].Detail)
	}
}

func TestTamperUndecodable(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Put(seqKey(5), []byte(`{"seq":5,"tool":`))
	})
	requireOnly(t, mustVerify(t, db), ProblemDecode, 5)
}

func TestTamperMovedRecord(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketAudit))
		v := append([]byte(nil), b.Get(seqKey(4))...)
		return b.Put(seqKey(5), v) // record 4 copied over record 5
	})
	v := mustVerify(t, db)
	kinds := map[string]uint64{}
	for _, p := range v.Problems {
		kinds[p.Kind] = p.Seq
	}
	if v.OK || kinds[ProblemKeyMismatch] != 5 || kinds[ProblemPrev] == 0 {
		t.Errorf("problems = %+v; want key_mismatch at 5 and a prev_mismatch", v.Problems)
	}
}

func TestTamperMissingHead(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaAuditHead))
	})
	requireOnly(t, mustVerify(t, db), ProblemMissingHead, 10)
}

func TestTamperDeleteEverything(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(bucketAudit)); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte(bucketAudit))
		return err
	})
	requireOnly(t, mustVerify(t, db), ProblemHead, 10)
}

func TestEmptyTrailVerifies(t *testing.T) {
	db := openTest(t)
	v := requireOK(t, db)
	if v.Records != 0 || v.HeadSeq != 0 {
		t.Errorf("verify = %+v", v)
	}
}

func TestVerifyCapsProblems(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 150)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		for s := uint64(1); s <= 150; s++ {
			m := recordMap(t, tx, s)
			m["principal"] = "mallory"
			if err := putRaw(tx, s, m); err != nil {
				return err
			}
		}
		return nil
	})
	v := mustVerify(t, db)
	if len(v.Problems) != maxReportedProblems || v.ProblemCount != 150 || v.OK {
		t.Errorf("got %d problems listed, count %d", len(v.Problems), v.ProblemCount)
	}
}

// --- retention ---

func TestPruneAuditBefore(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	recs := appendN(t, db, 10) // times baseTime+1min .. +10min

	n, err := db.PruneAuditBefore(baseTime.Add(5*time.Minute + time.Second))
	if err != nil || n != 5 {
		t.Fatalf("prune = %d, %v; want 5", n, err)
	}
	v := requireOK(t, db)
	if v.Records != 5 || v.FirstSeq != 6 || v.CheckpointSeq != 5 || v.HeadSeq != 10 {
		t.Errorf("verify after prune = %+v", v)
	}
	var cp chainPoint
	raw, _ := db.GetMeta(metaAuditCheckpoint)
	if err := json.Unmarshal(raw, &cp); err != nil || cp.Seq != 5 || cp.Hash != recs[4].Hash {
		t.Errorf("checkpoint = %s (%v)", raw, err)
	}

	// Nothing more to prune at the same cutoff.
	if n, err := db.PruneAuditBefore(baseTime.Add(5*time.Minute + time.Second)); err != nil || n != 0 {
		t.Errorf("second prune = %d, %v", n, err)
	}
	// The chain continues after pruning and across a reopen.
	if _, err := db.AppendAudit(sampleRecord(11)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openAt(t, path)
	defer db.Close()
	v = requireOK(t, db)
	if v.Records != 6 || v.LastSeq != 11 {
		t.Errorf("verify after reopen = %+v", v)
	}

	// A cutoff in the future keeps only the newest record.
	if n, err := db.PruneAuditBefore(baseTime.Add(24 * time.Hour)); err != nil || n != 5 {
		t.Fatalf("prune all = %d, %v; want 5", n, err)
	}
	v = requireOK(t, db)
	if v.Records != 1 || v.FirstSeq != 11 || v.CheckpointSeq != 10 {
		t.Errorf("verify after prune all = %+v", v)
	}
	// Deleting the first record after the checkpoint is still caught.
	if _, err := db.AppendAudit(sampleRecord(12)); err != nil {
		t.Fatal(err)
	}
	path = db.Path()
	db.Close()
	db2 := openAt(t, path)
	db2 = tamper(t, db2, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(11))
	})
	requireOnly(t, mustVerify(t, db2), ProblemGap, 11)
}

func TestPruneStopsAtClockStepBack(t *testing.T) {
	db := openTest(t)
	// The clock steps back after record 3 (a Pi without RTC before NTP).
	mins := []int{1, 2, 30, 3, 4, 40}
	for _, m := range mins {
		r := sampleRecord(m)
		if _, err := db.AppendAudit(r); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.PruneAuditBefore(baseTime.Add(10 * time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("prune = %d, %v; want 2 (stops at the 30-minute record)", n, err)
	}
	requireOK(t, db)
}

func TestPruneKeepsTamperEvidence(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		m := recordMap(t, tx, 4)
		m["tool"] = "system.shutdown"
		return putRaw(tx, 4, m)
	})
	// Stops at the edited record 4 and keeps record 3 as well.
	n, err := db.PruneAuditBefore(baseTime.Add(24 * time.Hour))
	if !errors.Is(err, ErrAuditChainBroken) || n != 2 {
		t.Fatalf("prune = %d, %v; want 2 and ErrAuditChainBroken", n, err)
	}
	if !strings.Contains(err.Error(), "audit record 4: hash_mismatch") {
		t.Errorf("error does not name the record: %v", err)
	}
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemHash, 4)
	if v.CheckpointSeq != 2 || v.FirstSeq != 3 {
		t.Errorf("verify = %+v, want checkpoint 2 and first 3", v)
	}
	// Running retention again changes nothing.
	if n, err := db.PruneAuditBefore(baseTime.Add(24 * time.Hour)); n != 0 || !errors.Is(err, ErrAuditChainBroken) {
		t.Errorf("second prune = %d, %v", n, err)
	}
}

// A forgery re-hashed to verify on its own is only visible through the next
// record's link; retention must keep the forged record and its successor.
func TestPruneKeepsForgery(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error { return forge(t, tx, 3) })
	n, err := db.PruneAuditBefore(baseTime.Add(24 * time.Hour))
	if !errors.Is(err, ErrAuditChainBroken) || n != 2 {
		t.Fatalf("prune = %d, %v; want 2 and ErrAuditChainBroken", n, err)
	}
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemPrev, 4)
	if v.FirstSeq != 3 {
		t.Errorf("forged record 3 was pruned: %+v", v)
	}
}

func TestPruneStopsAtGap(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(5))
	})
	n, err := db.PruneAuditBefore(baseTime.Add(24 * time.Hour))
	if !errors.Is(err, ErrAuditChainBroken) || n != 3 {
		t.Fatalf("prune = %d, %v; want 3 and ErrAuditChainBroken", n, err)
	}
	requireOnly(t, mustVerify(t, db), ProblemGap, 5)
}

func TestPruneEmptyAndSingle(t *testing.T) {
	db := openTest(t)
	if n, err := db.PruneAuditBefore(time.Now()); n != 0 || err != nil {
		t.Errorf("prune empty = %d, %v", n, err)
	}
	appendN(t, db, 1)
	if n, err := db.PruneAuditBefore(time.Now().Add(time.Hour)); n != 0 || err != nil {
		t.Errorf("prune single = %d, %v", n, err)
	}
	requireOK(t, db)
}

// A declined call is stored, verifies, counts as denied and is found by the
// errors filter; its elicitation answer is kept, and a record without one
// encodes without the field, so records from before it hash as they did.
func TestDeclinedByUserRecord(t *testing.T) {
	db := openTest(t)
	r := sampleRecord(1)
	r.Decision, r.ErrorCode, r.Elicitation = DecisionDeclined, "permission_denied", `{"action":"decline"}`
	got, err := db.AppendAudit(r)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := db.GetAudit(got.Seq); err != nil || back.Elicitation != r.Elicitation || back.Decision != DecisionDeclined {
		t.Fatalf("stored %+v, %v", back, err)
	}
	if _, denied, _, _, err := db.AuditCounts(); err != nil || denied != 1 {
		t.Fatalf("denied = %d, %v", denied, err)
	}
	if recs, _, err := db.QueryAudit(AuditQuery{OnlyErrors: true, Limit: 5}); err != nil || len(recs) != 1 {
		t.Fatalf("errors filter: %d records, %v", len(recs), err)
	}
	if v, err := db.VerifyAudit(); err != nil || !v.OK {
		t.Fatalf("verify: %+v, %v", v, err)
	}
	r2 := sampleRecord(2)
	plain, err := encodeRecord(&r2)
	if err != nil || strings.Contains(string(plain), "elicitation") {
		t.Fatalf("a record without an answer encodes %s (%v)", plain, err)
	}
}

// An HTTP caller's address is kept and covered by the hash; a record
// without one encodes without the field (checked above), so records from
// before it hash as they did.
func TestRemoteRecord(t *testing.T) {
	db := openTest(t)
	r := sampleRecord(1)
	r.Principal, r.Remote = "token:ha", "192.0.2.7:40000"
	got, err := db.AppendAudit(r)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := db.GetAudit(got.Seq); err != nil || back.Remote != r.Remote {
		t.Fatalf("stored %+v, %v", back, err)
	}
	moved := got
	moved.Remote = "192.0.2.8:40000"
	if h, err := recordHash(moved); err != nil || h == got.Hash {
		t.Fatalf("the hash does not cover the remote address: %v", err)
	}
	if v, err := db.VerifyAudit(); err != nil || !v.OK {
		t.Fatalf("verify: %+v, %v", v, err)
	}
}

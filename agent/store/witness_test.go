package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// witnessOf is what the helper's witness holds after each append of recs.
func witnessOf(recs []AuditRecord) *Witness {
	w := &Witness{}
	for _, r := range recs {
		w.Heads = append(w.Heads, WitnessPoint{Seq: r.Seq, Hash: r.Hash})
	}
	return w
}

func verifyWith(t *testing.T, db *DB, w *Witness) AuditVerify {
	t.Helper()
	v, err := db.VerifyAuditWitness(w)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// kinds maps each problem kind found to its detail.
func kinds(v AuditVerify) map[string]string {
	m := map[string]string{}
	for _, p := range v.Problems {
		m[p.Kind] = p.Detail
	}
	return m
}

// cutTail deletes records after keep and rewrites the head (and, when
// withStats, the running count) to match: a chain intact in itself.
func cutTail(t *testing.T, db *DB, recs []AuditRecord, keep int, withStats bool) *DB {
	return tamper(t, db, func(tx *bolt.Tx) error {
		a, m := tx.Bucket([]byte(bucketAudit)), tx.Bucket([]byte(bucketMeta))
		for _, r := range recs[keep:] {
			if err := a.Delete(seqKey(r.Seq)); err != nil {
				return err
			}
		}
		last := recs[keep-1]
		if err := putJSON(m, metaAuditHead, chainPoint{Seq: last.Seq, Hash: last.Hash}); err != nil {
			return err
		}
		if withStats {
			return putJSON(m, metaAuditStats, auditStats{Total: keep})
		}
		return nil
	})
}

// Found: the tail cut with the head rewritten to match passed verify. The
// stored count now shows it; with the count rewritten too, the witness does.
func TestTamperTruncateTailRewriteHead(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 57)
	w := witnessOf(recs)
	db = cutTail(t, db, recs, 40, false)
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemCount, 0)
	if !strings.Contains(v.Problems[0].Detail, "says 57 records are stored, 40 found") {
		t.Fatalf("detail = %q", v.Problems[0].Detail)
	}

	db = tamper(t, db, func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket([]byte(bucketMeta)), metaAuditStats, auditStats{Total: 40})
	})
	requireOK(t, db) // the chain alone cannot tell any more
	v = verifyWith(t, db, w)
	requireOnly(t, v, ProblemWitnessMissing, 41)
	want := "records 41-57 missing: witness saw seq 57 hash " + shortHash(recs[56].Hash) + ", the chain ends at 40"
	if v.Problems[0].Detail != want {
		t.Fatalf("detail = %q\nwant     %q", v.Problems[0].Detail, want)
	}
	if !v.Witnessed || v.WitnessSeq != 57 || v.Unwitnessed != 0 {
		t.Fatalf("witness summary = %+v", v)
	}
}

// Found: every record and the head deleted read as "intact: 0 records".
func TestTamperWipeEverything(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 12)
	w := witnessOf(recs)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(bucketAudit)); err != nil {
			return err
		}
		_, err := tx.CreateBucket([]byte(bucketAudit))
		if err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaAuditHead))
	})
	v := mustVerify(t, db)
	requireOnly(t, v, ProblemCount, 0)
	if !strings.Contains(v.Problems[0].Detail, "says 12 records are stored, none found") {
		t.Fatalf("detail = %q", v.Problems[0].Detail)
	}
	// And with the count gone too, only the witness remembers.
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Delete([]byte(metaAuditStats))
	})
	requireOK(t, db)
	v = verifyWith(t, db, w)
	requireOnly(t, v, ProblemWitnessMissing, 1)
	if d := v.Problems[0].Detail; d != "records 1-12 missing: witness saw seq 12 hash "+shortHash(recs[11].Hash)+", no records are stored" {
		t.Fatalf("detail = %q", d)
	}
}

func TestWitnessDeletedMiddle(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 20)
	db = tamper(t, db, func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucketAudit)).Delete(seqKey(7)) })
	v := verifyWith(t, db, witnessOf(recs))
	k := kinds(v)
	if v.OK || !strings.Contains(k[ProblemGap], "record 7 missing") ||
		k[ProblemWitnessMissing] != "record 7 missing: witness saw seq 7 hash "+shortHash(recs[6].Hash)+", the chain goes from 6 to 8" {
		t.Fatalf("problems = %+v", v.Problems)
	}
}

// A chain rewritten from record 30 on, re-hashed and with head and count to
// match, is intact in itself; the witness saw other hashes.
func TestWitnessRewrittenChain(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 40)
	w := witnessOf(recs)
	db = cutTail(t, db, recs, 29, true)
	for i := 30; i <= 40; i++ {
		r := sampleRecord(i)
		r.Principal = "someone-else"
		if _, err := db.AppendAudit(r); err != nil {
			t.Fatal(err)
		}
	}
	requireOK(t, db)
	v := verifyWith(t, db, w)
	requireOnly(t, v, ProblemWitnessMismatch, 30)
	if d := v.Problems[0].Detail; !strings.HasPrefix(d, "11 witnessed records from 30 to 40 differ from what the witness saw (rewritten): witness saw seq 30 hash "+shortHash(recs[29].Hash)) {
		t.Fatalf("detail = %q", d)
	}
}

// A witness behind the chain (helper down, or a line lost to power loss) is
// not tampering; the records it has not seen are counted.
func TestWitnessLagIsNotAProblem(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 10)
	w := witnessOf(recs[:3])
	w.Heads = w.Heads[1:] // and it need not have seen every head
	v := verifyWith(t, db, w)
	if !v.OK || v.Unwitnessed != 7 || v.WitnessSeq != 3 {
		t.Fatalf("verify = %+v", v)
	}
	if v := verifyWith(t, db, &Witness{}); !v.OK || v.Witnessed {
		t.Fatalf("empty witness = %+v", v)
	}
}

// After a cut, the next record follows the witnessed head: the cut stays in
// the chain as a gap, retention will not prune past it, and the new record
// can be witnessed again.
func TestAppendAfterWitnessKeepsTheCut(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 57)
	w := witnessOf(recs)
	db = cutTail(t, db, recs, 40, true)
	wh := w.head()
	r, err := db.AppendAuditAfter(sampleRecord(58), wh)
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 58 || r.PrevHash != recs[56].Hash {
		t.Fatalf("record after the cut: seq %d prev %s; want 58 linking to the witnessed %s", r.Seq, r.PrevHash, recs[56].Hash)
	}
	w.Heads = append(w.Heads, WitnessPoint{Seq: r.Seq, Hash: r.Hash})
	v := verifyWith(t, db, w)
	k := kinds(v)
	if v.OK || !strings.Contains(k[ProblemGap], "records 41..57 missing") || !strings.Contains(k[ProblemWitnessMissing], "records 41-57 missing") {
		t.Fatalf("problems = %+v", v.Problems)
	}
	// Without a witness the gap alone still says it.
	if v := mustVerify(t, db); v.OK {
		t.Fatal("the cut vanished from the chain")
	}
	n, err := db.PruneAuditWitnessed(baseTime.Add(24*time.Hour), func(cp WitnessPoint) error { w.Checkpoint = cp; return nil })
	if !errors.Is(err, ErrAuditChainBroken) || n != 39 || w.Checkpoint.Seq != 39 {
		t.Fatalf("prune across the cut: %d, %v; want it to stop before record 40, the last before the cut", n, err)
	}
	if v := verifyWith(t, db, w); !strings.Contains(kinds(v)[ProblemWitnessMissing], "records 41-57 missing") {
		t.Fatalf("after pruning: %+v", v.Problems)
	}
	// Restoring the lost records from a backup heals the chain.
	db = tamper(t, db, func(tx *bolt.Tx) error {
		a := tx.Bucket([]byte(bucketAudit))
		for _, rec := range recs[40:] {
			val, _ := encodeRecord(&rec)
			if err := a.Put(seqKey(rec.Seq), val); err != nil {
				return err
			}
		}
		return putJSON(tx.Bucket([]byte(bucketMeta)), metaAuditStats, auditStats{Total: 19})
	})
	if v := verifyWith(t, db, w); !v.OK {
		t.Fatalf("after restoring: %+v", v.Problems)
	}
	// A witness at or behind the tip with the same hash changes nothing.
	r2, err := db.AppendAuditAfter(sampleRecord(59), WitnessPoint{Seq: 50, Hash: recs[49].Hash})
	if err != nil || r2.Seq != 59 || r2.PrevHash != r.Hash {
		t.Fatalf("normal append: %+v %v", r2, err)
	}
}

// Retention that tells the witness first verifies intact; records deleted
// behind a forged checkpoint do not.
func TestPruneWithWitness(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 30)
	w := witnessOf(recs)
	var told []WitnessPoint
	n, err := db.PruneAuditWitnessed(baseTime.Add(10*time.Minute+time.Second), func(cp WitnessPoint) error {
		told = append(told, cp)
		w.Checkpoint = cp
		return nil
	})
	if err != nil || n != 10 || len(told) != 1 || told[0].Seq != 10 || told[0].Hash != recs[9].Hash {
		t.Fatalf("prune: %d, %v, told %+v", n, err, told)
	}
	if v := verifyWith(t, db, w); !v.OK || v.CheckpointSeq != 10 || v.WitnessCheckpointSeq != 10 || v.Records != 20 {
		t.Fatalf("after witnessed prune: %+v", v)
	}
	// A checkpoint whose hash was edited no longer matches the witnessed one.
	forged := tamper(t, db, func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket([]byte(bucketMeta)), metaAuditCheckpoint, chainPoint{Seq: 10, Hash: recs[3].Hash})
	})
	if v := verifyWith(t, forged, w); v.OK || kinds(v)[ProblemWitnessMismatch] == "" {
		t.Fatalf("edited checkpoint: %+v", v.Problems)
	}
	db = tamper(t, forged, func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket([]byte(bucketMeta)), metaAuditCheckpoint, chainPoint{Seq: 10, Hash: recs[9].Hash})
	})
	// The witness refusing means nothing is pruned.
	n, err = db.PruneAuditWitnessed(baseTime.Add(20*time.Minute+time.Second), func(WitnessPoint) error { return errors.New("helper down") })
	if err == nil || n != 0 {
		t.Fatalf("prune with a failing witness: %d, %v", n, err)
	}
	if v := verifyWith(t, db, w); !v.OK || v.Records != 20 {
		t.Fatalf("after the refused prune: %+v", v)
	}
	// A file edit that prunes on its own (records 11..25 deleted, a
	// checkpoint forged from record 26's prev_hash, count fixed) is intact
	// in itself, but the witness saw those records and no such prune.
	db = tamper(t, db, func(tx *bolt.Tx) error {
		a, m := tx.Bucket([]byte(bucketAudit)), tx.Bucket([]byte(bucketMeta))
		for seq := uint64(11); seq <= 25; seq++ {
			if err := a.Delete(seqKey(seq)); err != nil {
				return err
			}
		}
		if err := putJSON(m, metaAuditCheckpoint, chainPoint{Seq: 25, Hash: recs[25].PrevHash}); err != nil {
			return err
		}
		return putJSON(m, metaAuditStats, auditStats{Total: 5})
	})
	requireOK(t, db)
	v := verifyWith(t, db, w)
	requireOnly(t, v, ProblemWitnessMissing, 11)
	if d := v.Problems[0].Detail; !strings.HasPrefix(d, "records 11-25 missing") || !strings.Contains(d, "witness saw pruning only through 10") {
		t.Fatalf("detail = %q", d)
	}
}

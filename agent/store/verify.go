package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/raspi-mcp/raspi-mcp/internal/canon"
)

// Problem kinds reported by VerifyAudit.
const (
	ProblemDecode      = "decode"              // record (or its key) cannot be read
	ProblemHash        = "hash_mismatch"       // stored hash does not match the content: edited
	ProblemPrev        = "prev_mismatch"       // prev_hash does not match the previous record: replaced or re-chained
	ProblemGap         = "gap"                 // sequence numbers missing: deleted in the middle (Seq is the first missing)
	ProblemHead        = "head_mismatch"       // chain head does not match the last record: tail deleted or edited
	ProblemMissingHead = "missing_head"        // records exist but the chain head is absent or unreadable
	ProblemKeyMismatch = "key_mismatch"        // record's seq differs from the key it is stored under: moved or copied
	ProblemCheckpoint  = "checkpoint_mismatch" // record at or before the prune checkpoint, or checkpoint unreadable
	ProblemCount       = "count_mismatch"      // the stored record count or the head's seq disagrees with the records found
)

// maxReportedProblems caps AuditVerify.Problems: a wholesale rewrite would
// otherwise produce one problem per record.
const maxReportedProblems = 100

// AuditProblem is one finding of VerifyAudit. Seq is the record where it was
// detected (0 when no sequence number applies).
type AuditProblem struct {
	Seq    uint64
	Kind   string
	Detail string
}

// AuditVerify is the result of VerifyAudit.
type AuditVerify struct {
	OK                bool
	Records           int
	FirstSeq, LastSeq uint64
	HeadSeq           uint64
	// CheckpointSeq is the last pruned record (0 when never pruned); the
	// chain is verified from the record after it.
	CheckpointSeq uint64
	// StoredCount is the record count kept in meta (-1 when absent).
	StoredCount int
	// The helper's witness, when one was given: its last head and
	// checkpoint, and how many stored records come after its head (not yet
	// witnessed: the helper was down, or a power loss took the newest line).
	// Lagging is not a problem; a witness ahead of or disagreeing with the
	// chain is.
	Witnessed            bool
	WitnessSeq           uint64
	WitnessHash          string
	WitnessCheckpointSeq uint64
	Unwitnessed          int
	// Problems is capped at 100; ProblemCount is how many were found.
	Problems     []AuditProblem
	ProblemCount int
}

func (v *AuditVerify) add(seq uint64, kind, format string, args ...any) {
	v.ProblemCount++
	if len(v.Problems) < maxReportedProblems {
		v.Problems = append(v.Problems, AuditProblem{Seq: seq, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
}

// recordCheck is what checkRecord learns from one stored record.
type recordCheck struct {
	seq     uint64 // the record's own seq field
	prev    string
	hash    string // as stored
	problem *AuditProblem
}

// checkRecord recomputes a stored record's hash from its raw JSON rather than
// from the decoded struct, so fields an attacker adds, or numbers re-written
// (5 as 5.0), change the hash too. For honest records the two are identical:
// the stored JSON is the marshalled struct.
func checkRecord(key uint64, v []byte) recordCheck {
	var rc recordCheck
	fail := func(kind, format string, args ...any) recordCheck {
		rc.problem = &AuditProblem{Seq: key, Kind: kind, Detail: fmt.Sprintf(format, args...)}
		return rc
	}
	val, err := canon.Decode(v)
	if err != nil {
		return fail(ProblemDecode, "%v", err)
	}
	m, ok := val.(map[string]any)
	if !ok {
		return fail(ProblemDecode, "not a JSON object")
	}
	num, ok := m["seq"].(json.Number)
	if !ok {
		return fail(ProblemDecode, "seq missing or not a number")
	}
	if rc.seq, err = strconv.ParseUint(string(num), 10, 64); err != nil {
		return fail(ProblemDecode, "seq %s: not an unsigned integer", num)
	}
	if rc.prev, ok = m["prev_hash"].(string); !ok {
		return fail(ProblemDecode, "prev_hash missing or not a string")
	}
	if rc.hash, ok = m["hash"].(string); !ok {
		return fail(ProblemDecode, "hash missing or not a string")
	}
	m["hash"] = ""
	var buf bytes.Buffer
	buf.Grow(len(v))
	canon.Encode(&buf, m)
	if got := chainHash(rc.prev, buf.Bytes()); got != rc.hash {
		return fail(ProblemHash, "stored %s, content hashes to %s", rc.hash, got)
	}
	return rc
}

// VerifyAudit walks the whole trail in order and reports every place the hash
// chain does not hold: edited records (hash_mismatch), records replaced with
// a re-hashed forgery (prev_mismatch on the next one), deletions in the middle
// (gap), and deleted or edited tails (head_mismatch against the head kept in
// meta). It reads everything in one transaction, so the head and the records
// are one consistent snapshot even while the agent keeps appending.
//
// The chain makes tampering evident, not impossible: someone able to write
// the file can rewrite every record and the head consistently. Anchoring the
// head elsewhere (the journal, a remote log) is what closes that.
func (db *DB) VerifyAudit() (AuditVerify, error) { return db.VerifyAuditWitness(nil) }

// VerifyAuditWitness is VerifyAudit, and also compares the chain with the
// root helper's witness w (nil: no comparison): every witnessed record that
// is gone (witness_missing, unless retention pruned it after telling the
// witness) or has another hash (witness_mismatch). That is what catches a
// chain cut, rewritten or wiped together with its head and counts, which
// the chain alone cannot show.
func (db *DB) VerifyAuditWitness(w *Witness) (AuditVerify, error) {
	var res AuditVerify
	err := db.viewAudit(func(tx *bolt.Tx) error {
		var log []logEntry
		if db.log != nil {
			log = db.log.entries
		}
		res = verifyTx(tx, w, log)
		return nil
	})
	if err != nil {
		return AuditVerify{}, fmt.Errorf("store: verify audit: %w", err)
	}
	return res, nil
}

// verifyTx walks bbolt's records, checks the head against the last of them,
// then walks the audit log's records (log) as the chain's continuation.
func verifyTx(tx *bolt.Tx, w *Witness, log []logEntry) AuditVerify {
	res := AuditVerify{StoredCount: -1}
	meta := bucket(tx, bucketMeta)
	head, headOK, headErr := readPoint(meta, metaAuditHead)
	cp, cpOK, cpErr := readPoint(meta, metaAuditCheckpoint)
	if headOK && headErr == nil {
		res.HeadSeq = head.Seq
	}
	expSeq, expPrev, prevKnown := uint64(1), "", true
	if cpErr != nil {
		res.add(0, ProblemCheckpoint, "%v", cpErr)
		prevKnown = false // cannot tell what the first record should link to
	} else if cpOK {
		res.CheckpointSeq = cp.Seq
		expSeq, expPrev = cp.Seq+1, cp.Hash
	}

	var chainCP WitnessPoint
	if cpOK && cpErr == nil {
		chainCP = WitnessPoint{Seq: cp.Seq, Hash: cp.Hash}
	}
	wc := newWitnessCheck(&res, w, chainCP)
	var lastHash string
	lastHashKnown := false
	visit := func(k, v []byte) {
		seq, ok := keySeq(k)
		if !ok {
			res.add(0, ProblemDecode, "key %x is not an 8-byte sequence number", k)
			prevKnown = false
			return
		}
		res.Records++
		if res.Records == 1 {
			res.FirstSeq = seq
		}
		res.LastSeq = seq
		lastHashKnown = false

		checkPrev := prevKnown
		switch {
		case cpOK && cpErr == nil && seq <= cp.Seq:
			res.add(seq, ProblemCheckpoint, "record %d is at or before checkpoint %d, which should have been pruned", seq, cp.Seq)
			checkPrev = false
		case seq > expSeq:
			if seq-1 == expSeq {
				res.add(expSeq, ProblemGap, "record %d missing (next stored is %d)", expSeq, seq)
			} else {
				res.add(expSeq, ProblemGap, "records %d..%d missing (next stored is %d)", expSeq, seq-1, seq)
			}
			// The gap explains the broken link; do not report it twice.
			checkPrev = false
		}
		expSeq = seq + 1

		rc := checkRecord(seq, v)
		if rc.problem != nil && rc.problem.Kind == ProblemDecode {
			res.add(seq, rc.problem.Kind, "%s", rc.problem.Detail)
			wc.record(seq, "", false)
			prevKnown = false
			return
		}
		wc.record(seq, rc.hash, true)
		if rc.seq != seq {
			res.add(seq, ProblemKeyMismatch, "record says seq %d but is stored under %d", rc.seq, seq)
		}
		if rc.problem != nil {
			res.add(seq, rc.problem.Kind, "%s", rc.problem.Detail)
		}
		if checkPrev && rc.prev != expPrev {
			if seq == 1 || (cpOK && seq == cp.Seq+1) {
				res.add(seq, ProblemPrev, "prev_hash %s, want %q (start of chain)", rc.prev, expPrev)
			} else {
				res.add(seq, ProblemPrev, "prev_hash %s, but record %d has hash %s", rc.prev, seq-1, expPrev)
			}
		}
		// Link the next record to the hash as stored: an edit is
		// reported once, at the edited record, not again at the next.
		expPrev, prevKnown = rc.hash, true
		lastHash, lastHashKnown = rc.hash, true
	}
	audit := bucket(tx, bucketAudit)
	if audit != nil {
		c := audit.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			visit(k, v)
		}
	}

	// The log continues the chain: its first record links to bbolt's last,
	// and a cut in it is a gap like any other.
	for i := range log {
		visit(log[i].key, log[i].raw)
	}
	// A fold makes the log's newest record the head; verify as if it had.
	for i := len(log) - 1; i >= 0; i-- {
		if e := &log[i]; e.good() {
			if !headOK || headErr != nil || e.seq >= head.Seq {
				head, headOK, headErr = chainPoint{Seq: e.seq, Hash: e.hash}, true, nil
				res.HeadSeq = e.seq
			}
			break
		}
	}

	switch {
	case headErr != nil:
		res.add(0, ProblemMissingHead, "%v", headErr)
	case !headOK:
		if res.Records > 0 || cpOK {
			res.add(res.LastSeq, ProblemMissingHead, "meta %s absent but the trail has records", metaAuditHead)
		}
	case res.Records == 0:
		if !cpOK || head.Seq != cp.Seq || head.Hash != cp.Hash {
			res.add(head.Seq, ProblemHead, "head is record %d but no records are stored", head.Seq)
		}
	case head.Seq != res.LastSeq:
		res.add(head.Seq, ProblemHead, "head is record %d but the last stored record is %d", head.Seq, res.LastSeq)
	case lastHashKnown && head.Hash != lastHash:
		// (An unreadable last record was already reported as decode.)
		res.add(head.Seq, ProblemHead, "head hash %s does not match record %d's hash %s", head.Hash, res.LastSeq, lastHash)
	}

	// The running count is kept in the same transaction as every append
	// and prune, so it equals the records stored. It is checked last, and
	// only when nothing else explains a difference: it is what shows a tail
	// cut with the head rewritten to match, or records and head wiped
	// together, which leave a chain that is intact in itself.
	if stats, stored := loadStats(audit, meta); stored {
		// The log's records are counted as they are read, not stored.
		for i := range log {
			if log[i].good() {
				stats.Total++
			}
		}
		res.StoredCount = stats.Total
		if stats.Total != res.Records && res.ProblemCount == 0 {
			found := "none found"
			if res.Records > 0 {
				found = fmt.Sprintf("%d found (seq %d..%d)", res.Records, res.FirstSeq, res.LastSeq)
			}
			res.add(0, ProblemCount, "meta %s says %d records are stored, %s", metaAuditStats, stats.Total, found)
		}
	}

	if wc != nil {
		wc.finish()
		wh := w.head()
		res.Witnessed, res.WitnessSeq, res.WitnessHash, res.WitnessCheckpointSeq = true, wh.Seq, wh.Hash, w.Checkpoint.Seq
		if res.LastSeq > wh.Seq {
			res.Unwitnessed = int(min(res.LastSeq-wh.Seq, uint64(res.Records)))
		}
	}
	res.OK = res.ProblemCount == 0
	return res
}

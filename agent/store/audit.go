package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AuditRecord is one line of the audit trail. JSON field names are part of
// the product contract: `audit tail`, exports and outside checkers read them.
type AuditRecord struct {
	Seq           uint64    `json:"seq"`
	Time          time.Time `json:"time"`           // UTC, RFC3339Nano when marshalled
	CorrelationID string    `json:"correlation_id"` // ties the record to the MCP request and the helper's log
	Principal     string    `json:"principal"`      // "pi", "uid:1001", "root"
	Role          string    `json:"role"`           // read|operate|admin|none
	Tool          string    `json:"tool"`           // canonical dotted id, "system.reboot"
	Decision      string    `json:"decision"`       // "allow", "deny" or "declined_by_user"
	DryRun        bool      `json:"dry_run"`
	Reason        string    `json:"reason,omitempty"` // the caller's guard reason
	Intent        string    `json:"intent,omitempty"` // the caller's stated larger goal; omitted when empty, so older records hash as before
	InHash        string    `json:"in_hash"`          // "sha256:<hex>" of canonical JSON input
	OutHash       string    `json:"out_hash,omitempty"`
	DurationMS    int64     `json:"duration_ms"`
	ErrorCode     string    `json:"error_code,omitempty"`
	Message       string    `json:"message,omitempty"` // short, e.g. the denial reason
	Upstream      string    `json:"upstream,omitempty"`
	// Remote is an HTTP caller's address; omitted for local callers, so
	// older records hash as before.
	Remote string `json:"remote,omitempty"`
	// Elicitation is the person's answer when the client asked them to
	// confirm the call (action and form content, as JSON); omitted when
	// nobody was asked, so older records hash as before.
	Elicitation string `json:"elicitation,omitempty"`
	// Channel is what approved (or refused) a high or critical call:
	// "button", "console:USER", "client:elicitation",
	// "client:change_token" or "client:confirm"; Approver who answered on
	// the device; WaitedMS how long the call waited for it. Omitted when
	// empty, so older records hash as before.
	Channel  string `json:"channel,omitempty"`
	Approver string `json:"approver,omitempty"`
	WaitedMS int64  `json:"waited_ms,omitempty"`
	// Traceparent is the W3C traceparent the client sent in the request's
	// _meta (SEP-414), validated; omitted when none came, so older
	// records hash as before.
	Traceparent string `json:"traceparent,omitempty"`
	// Profile is the profile that narrowed the caller's role ("" for the
	// built-in "all"); omitted when empty, so older records hash as before.
	Profile  string `json:"profile,omitempty"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// Decision values. AppendAudit refuses anything else because counts and the
// OnlyErrors filter depend on them.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
	// DecisionDeclined is a call the policy allowed but the person, asked
	// by their client, declined (or did not answer in time). It counts as
	// a denial.
	DecisionDeclined = "declined_by_user"
)

// ErrAuditNotFound is returned by GetAudit for a sequence number not stored
// (never written, or pruned).
var ErrAuditNotFound = errors.New("store: audit record not found")

// ErrAuditChainBroken is returned by PruneAuditBefore when it stops early
// because the records it would delete do not verify: retention never destroys
// the evidence of tampering.
var ErrAuditChainBroken = errors.New("store: audit chain does not verify")

// auditRefPrefix is how tools cite a record in _meta.audit_ref.
const auditRefPrefix = "audit:"

// Ref is how tools cite the record in _meta.audit_ref: "audit:<seq>".
func (r AuditRecord) Ref() string {
	return auditRefPrefix + strconv.FormatUint(r.Seq, 10)
}

// ParseAuditRef is the inverse of Ref, for `audit show audit:17`.
func ParseAuditRef(ref string) (uint64, error) {
	s, ok := strings.CutPrefix(ref, auditRefPrefix)
	if !ok {
		return 0, fmt.Errorf("store: audit ref %q: want %s<seq>", ref, auditRefPrefix)
	}
	seq, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seq == 0 {
		return 0, fmt.Errorf("store: audit ref %q: bad sequence number", ref)
	}
	return seq, nil
}

// chainPoint is a position in the chain: the head (last written record) and
// the checkpoint (last pruned record) are both stored as one in meta.
type chainPoint struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
	// Time and PrunedAt are set on the checkpoint only, for people reading
	// it: the time of the last pruned record and when pruning ran.
	Time     *time.Time `json:"time,omitempty"`
	PrunedAt *time.Time `json:"pruned_at,omitempty"`
}

// auditStats are running counts kept in meta so status screens need not scan
// the whole trail on a slow SD card. They describe the records currently
// stored (pruning subtracts) and are not part of the tamper-evident chain.
type auditStats struct {
	Total  int `json:"total"`
	Denied int `json:"denied"`
	Errors int `json:"errors"`
}

func (s *auditStats) add(r *AuditRecord, n int) {
	s.Total += n
	if r.Decision == DecisionDeny || r.Decision == DecisionDeclined {
		s.Denied += n
	}
	if r.ErrorCode != "" {
		s.Errors += n
	}
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

func keySeq(k []byte) (uint64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k), true
}

// encodeRecord is the stored form: the struct's field order (readable with
// bbolt tools), compact, and without HTML escaping so "<" stays "<".
func encodeRecord(r *AuditRecord) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chainHash is the record hash: sha256(prev_hash + "\n" + canonical JSON of
// the record with "hash" set to ""). prev_hash is also inside the JSON; the
// prefix makes the link explicit for anyone re-implementing the check.
func chainHash(prev string, canonical []byte) string {
	buf := make([]byte, 0, len(prev)+1+len(canonical))
	buf = append(buf, prev...)
	buf = append(buf, '\n')
	buf = append(buf, canonical...)
	return sha256Prefixed(buf)
}

// recordHash computes r's hash from its fields (r.Hash is ignored).
func recordHash(r AuditRecord) (string, error) {
	r.Hash = ""
	raw, err := encodeRecord(&r)
	if err != nil {
		return "", err
	}
	c, err := CanonicalJSON(json.RawMessage(raw))
	if err != nil {
		return "", err
	}
	return chainHash(r.PrevHash, c), nil
}

// readPoint reads a chainPoint from meta. present is false when the key is
// absent; err is set when it is present but unreadable.
func readPoint(meta *bolt.Bucket, key string) (p chainPoint, present bool, err error) {
	if meta == nil {
		return p, false, nil
	}
	v := meta.Get([]byte(key))
	if v == nil {
		return p, false, nil
	}
	if err := json.Unmarshal(v, &p); err != nil {
		return p, true, fmt.Errorf("meta %s: %w", key, err)
	}
	return p, true, nil
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("meta %s: %w", key, err)
	}
	return b.Put([]byte(key), raw)
}

// storedHash pulls just the "hash" field out of a stored record.
func storedHash(v []byte) (string, bool) {
	var h struct {
		Hash *string `json:"hash"`
	}
	if err := json.Unmarshal(v, &h); err != nil || h.Hash == nil {
		return "", false
	}
	return *h.Hash, true
}

// chainTip is where the next record links to, as far as bbolt knows (the
// audit log's newer records come on top, see DB.auditTip). The head is the
// authority; the last stored record and the checkpoint are fallbacks so that
// a deleted head or deleted records never make the agent overwrite a key or
// stop auditing. Whatever was tampered with stays visible to VerifyAudit.
func chainTip(audit, meta *bolt.Bucket) chainPoint {
	var tip chainPoint
	if cp, ok, err := readPoint(meta, metaAuditCheckpoint); ok && err == nil {
		tip = chainPoint{Seq: cp.Seq, Hash: cp.Hash}
	}
	if k, v := audit.Cursor().Last(); k != nil {
		if seq, ok := keySeq(k); ok && seq >= tip.Seq {
			h, _ := storedHash(v)
			tip = chainPoint{Seq: seq, Hash: h}
		}
	}
	if head, ok, err := readPoint(meta, metaAuditHead); ok && err == nil && head.Seq >= tip.Seq {
		tip = chainPoint{Seq: head.Seq, Hash: head.Hash}
	}
	return tip
}

// followWitness is the tip a new record links to given after, the head the
// helper's witness holds (zero: none). When the witness is beyond the
// chain's tip, or at it with another hash, the chain was cut or rewritten
// behind the agent's back: the next record then follows the witnessed head,
// seq and hash, instead of reusing sequence numbers the witness already saw.
// That leaves the cut in the chain as a gap (or a broken link) that
// VerifyAudit keeps reporting and retention will not prune, lets new records
// be witnessed again, and a restore of the lost records from a backup still
// links up.
func followWitness(tip chainPoint, after WitnessPoint) chainPoint {
	if after.Seq > tip.Seq || (after.Seq == tip.Seq && after.Seq > 0 && after.Hash != tip.Hash) {
		return chainPoint{Seq: after.Seq, Hash: after.Hash}
	}
	return tip
}

// AppendAudit assigns Seq, PrevHash and Hash, and writes the record to the
// audit log (see auditLogFoldAt). When it returns nil the record has been
// fsynced: callers write the audit record before the tool
// answers, so a crash can never leave an action without its record.
//
// A zero Time is set to now; any Time is stored in UTC. Decision must be
// "allow", "deny" or "declined_by_user". The stored record is returned.
func (db *DB) AppendAudit(r AuditRecord) (AuditRecord, error) {
	return db.AppendAuditAfter(r, WitnessPoint{})
}

// AppendAuditAfter is AppendAudit for an agent whose helper witnesses the
// chain: after is the witnessed head. In the normal case the witness is at
// or behind the chain's tip and nothing changes; when it is ahead or
// disagrees, the new record follows the witnessed head (see followWitness).
func (db *DB) AppendAuditAfter(r AuditRecord, after WitnessPoint) (AuditRecord, error) {
	if r.Decision != DecisionAllow && r.Decision != DecisionDeny && r.Decision != DecisionDeclined {
		return AuditRecord{}, fmt.Errorf("store: append audit for tool %q: decision %q: want %q, %q or %q",
			r.Tool, r.Decision, DecisionAllow, DecisionDeny, DecisionDeclined)
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	// UTC also drops the monotonic reading, so the returned record equals
	// what a later read decodes.
	r.Time = r.Time.UTC()
	req := &auditReq{r: r, after: after, done: make(chan error, 1)}
	if err := db.audit.submit(db, req); err != nil {
		return AuditRecord{}, fmt.Errorf("store: append audit (tool %q): %w", r.Tool, err)
	}
	return req.r, nil
}

// loadStats returns the stored counts, or recounts the bucket when they are
// missing or unreadable (a file from before they existed, or meddled with).
// stored reports which happened.
func loadStats(audit, meta *bolt.Bucket) (s auditStats, stored bool) {
	if meta != nil {
		if v := meta.Get([]byte(metaAuditStats)); v != nil {
			if err := json.Unmarshal(v, &s); err == nil {
				return s, true
			}
		}
	}
	s = auditStats{}
	if audit == nil {
		return s, false
	}
	c := audit.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		var f auditFilterFields
		if json.Unmarshal(v, &f) != nil {
			s.Total++ // still a record, just not a readable one
			continue
		}
		s.add(&AuditRecord{Decision: f.Decision, ErrorCode: f.ErrorCode}, 1)
	}
	return s, false
}

// GetAudit returns the record with the given sequence number, or an error
// wrapping ErrAuditNotFound.
func (db *DB) GetAudit(seq uint64) (AuditRecord, error) {
	var (
		r     AuditRecord
		found bool
	)
	key := seqKey(seq)
	err := db.viewAudit(func(tx *bolt.Tx) error {
		var v []byte
		if db.log != nil {
			for i := range db.log.entries {
				if e := &db.log.entries[i]; bytes.Equal(e.key, key) {
					v = e.raw
				}
			}
		}
		if b := bucket(tx, bucketAudit); v == nil && b != nil {
			v = b.Get(key)
		}
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &r)
	})
	if err != nil {
		return AuditRecord{}, fmt.Errorf("store: audit record %d: %w", seq, err)
	}
	if !found {
		return AuditRecord{}, fmt.Errorf("%w: seq %d", ErrAuditNotFound, seq)
	}
	return r, nil
}

// AuditCounts summarises the stored trail for status screens: how many
// records, how many were denials, how many carry an error code, and the
// newest readable record (zero when the trail is empty). It reads running
// counts rather than scanning, so it stays cheap however long the trail.
func (db *DB) AuditCounts() (total, denied, errored int, last AuditRecord, err error) {
	err = db.viewAudit(func(tx *bolt.Tx) error {
		s, _ := loadStats(bucket(tx, bucketAudit), bucket(tx, bucketMeta))
		if db.log != nil {
			ls := db.log.stats()
			s.Total, s.Denied, s.Errors = s.Total+ls.Total, s.Denied+ls.Denied, s.Errors+ls.Errors
		}
		total, denied, errored = s.Total, s.Denied, s.Errors
		db.eachAudit(tx, false, func(_, v []byte) bool {
			var r AuditRecord
			if json.Unmarshal(v, &r) == nil {
				last = r
				return false
			}
			return true
		})
		return nil
	})
	if err != nil {
		return 0, 0, 0, AuditRecord{}, fmt.Errorf("store: audit counts: %w", err)
	}
	return total, denied, errored, last, nil
}

// PruneAuditBefore is retention: it deletes records whose Time is before t,
// always keeping the newest record, and stores the last deleted record's seq
// and hash as meta "audit_checkpoint" so VerifyAudit checks the remaining
// chain from there. It returns how many records it deleted.
//
// It only deletes a prefix of the chain, oldest first, and stops at the first
// record at or after t: the Pi has no real-time clock, so times can step
// backwards, and deleting out of order would punch holes VerifyAudit reports
// as gaps. It checks every record it walks, including the one it stops at
// (hash, link, sequence), and at the first that does not verify it stops one
// record early, so both sides of a broken link stay in the file: retention
// never destroys the evidence of tampering. It then returns the count deleted
// so far with an error wrapping ErrAuditChainBroken.
func (db *DB) PruneAuditBefore(t time.Time) (int, error) { return db.PruneAuditWitnessed(t, nil) }

// PruneAuditWitnessed is PruneAuditBefore for an agent whose helper witnesses
// the chain: before anything is deleted, witness is called with the record
// that will become the checkpoint, inside the transaction. If it fails,
// nothing is pruned. Telling the witness first means a prune never looks
// like deleted records, even if the agent dies right after; a witnessed
// checkpoint whose prune did not happen is harmless, since those records
// are still there to compare.
func (db *DB) PruneAuditWitnessed(t time.Time, witness func(checkpoint WitnessPoint) error) (int, error) {
	var (
		n    int
		stop error
	)
	if db.log != nil {
		// Retention works on bbolt alone: move the log's records there
		// first, and hold appends until it is done.
		db.log.mu.Lock()
		defer db.log.mu.Unlock()
		if err := db.foldLocked(); err != nil {
			return 0, fmt.Errorf("store: prune audit before %s: %w", t.UTC().Format(time.RFC3339), err)
		}
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		audit, err := writableBucket(tx, bucketAudit)
		if err != nil {
			return err
		}
		meta, err := writableBucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		expSeq, expPrev := uint64(1), ""
		cp, cpOK, cpErr := readPoint(meta, metaAuditCheckpoint)
		if cpErr != nil {
			return cpErr
		}
		if cpOK {
			expSeq, expPrev = cp.Seq+1, cp.Hash
		}
		c := audit.Cursor()
		lastKey, _ := c.Last()
		if lastKey == nil {
			return nil
		}
		// candidate is a record the walk has decided may go.
		type candidate struct {
			key []byte
			rec AuditRecord
		}
		var del []candidate
		for k, v := c.First(); k != nil; k, v = c.Next() {
			seq, ok := keySeq(k)
			if !ok || seq != expSeq {
				stop = fmt.Errorf("audit record %d: %s: found key %x instead", expSeq, ProblemGap, k)
			} else if chk := checkRecord(seq, v); chk.problem != nil {
				stop = fmt.Errorf("audit record %d: %s: %s", seq, chk.problem.Kind, chk.problem.Detail)
			} else if chk.seq != seq {
				stop = fmt.Errorf("audit record %d: %s: stored record says seq %d", seq, ProblemKeyMismatch, chk.seq)
			} else if chk.prev != expPrev {
				stop = fmt.Errorf("audit record %d: %s: does not link to record %d", seq, ProblemPrev, seq-1)
			} else {
				expSeq, expPrev = seq+1, chk.hash
			}
			if stop != nil {
				// Keep the record before the break too: a forged
				// record re-hashed to look valid only shows up as the
				// next record's broken link.
				if len(del) > 0 {
					del = del[:len(del)-1]
				}
				break
			}
			if bytes.Equal(k, lastKey) {
				break // the newest record always stays
			}
			var r AuditRecord
			if err := json.Unmarshal(v, &r); err != nil {
				stop = fmt.Errorf("audit record %d: %s: %v", seq, ProblemDecode, err)
				break
			}
			if !r.Time.Before(t) {
				break
			}
			del = append(del, candidate{key: append([]byte(nil), k...), rec: r})
		}
		if len(del) == 0 {
			return nil
		}
		// Delete after the walk: deleting under a live cursor can skip keys.
		var removed auditStats
		for _, d := range del {
			if err := audit.Delete(d.key); err != nil {
				return fmt.Errorf("audit record %d: delete: %w", d.rec.Seq, err)
			}
			removed.add(&d.rec, 1)
		}
		tail := del[len(del)-1].rec
		if witness != nil {
			if err := witness(WitnessPoint{Seq: tail.Seq, Hash: tail.Hash}); err != nil {
				return fmt.Errorf("witness checkpoint %d: %w", tail.Seq, err)
			}
		}
		now := time.Now().UTC()
		point := chainPoint{Seq: tail.Seq, Hash: tail.Hash, Time: &tail.Time, PrunedAt: &now}
		if err := putJSON(meta, metaAuditCheckpoint, point); err != nil {
			return err
		}
		stats, stored := loadStats(audit, meta)
		if stored {
			stats.Total -= removed.Total
			stats.Denied -= removed.Denied
			stats.Errors -= removed.Errors
		}
		if err := putJSON(meta, metaAuditStats, stats); err != nil {
			return err
		}
		n = len(del)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune audit before %s: %w", t.UTC().Format(time.RFC3339), err)
	}
	if stop != nil {
		return n, fmt.Errorf("%w: prune audit before %s deleted %d and stopped at %v",
			ErrAuditChainBroken, t.UTC().Format(time.RFC3339), n, stop)
	}
	return n, nil
}

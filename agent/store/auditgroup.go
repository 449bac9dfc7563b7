package store

import (
	"bytes"
	"fmt"
	"os"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// auditGroup commits audit appends that arrive together in one transaction.
//
// Every durable append costs a write and an fsync of the audit log, whether
// it carries one record or ten. An append that finds no commit running commits
// at once, alone, so a lone call waits for nothing; appends that arrive
// while a commit is running wait for it and then go together in the next
// one. Each append still returns only after the commit holding its record
// is on disk. bbolt's own Batch would do the grouping too, but holds every
// call for up to its MaxBatchDelay even when nothing else is coming.
type auditGroup struct {
	mu      sync.Mutex
	pending []*auditReq
	running bool // a goroutine is committing; it will take pending next
}

// auditReq is one append waiting to be committed; r is filled in (Seq,
// PrevHash, Hash) by the commit, done receives its outcome.
type auditReq struct {
	r     AuditRecord
	after WitnessPoint
	done  chan error
}

// submit queues req and returns once it is committed or has failed. The
// first caller to find nothing running becomes the committer: it commits
// what is pending, again and again, until the queue is empty, so no request
// is left behind and no goroutine is started.
func (g *auditGroup) submit(db *DB, req *auditReq) error {
	g.mu.Lock()
	g.pending = append(g.pending, req)
	if g.running {
		g.mu.Unlock()
		return <-req.done
	}
	g.running = true
	for len(g.pending) > 0 {
		batch := g.pending
		g.pending = nil
		g.mu.Unlock()
		db.commitAudit(batch)
		g.mu.Lock()
	}
	g.running = false
	g.mu.Unlock()
	return <-req.done
}

// commitAudit appends batch to the audit log in one write and one fsync, in
// order. Should that fail, each record is tried again on its own, so one bad
// record cannot fail the others'.
func (db *DB) commitAudit(batch []*auditReq) {
	l := db.log
	l.mu.Lock()
	defer l.mu.Unlock()
	err := db.logAudit(batch)
	if err != nil && len(batch) > 1 {
		for _, q := range batch {
			q.done <- db.logAudit([]*auditReq{q})
		}
	} else {
		for _, q := range batch {
			q.done <- err
		}
	}
	if l.size >= auditLogFoldAt {
		// The records are durable in the log already; a fold that
		// fails is tried again after the next append.
		_ = db.foldLocked()
	}
}

// logAudit chains, encodes and durably writes reqs to the log. db.log.mu
// must be held. Requests are filled in only once their lines are on disk.
func (db *DB) logAudit(reqs []*auditReq) error {
	l := db.log
	tip, err := db.auditTip()
	if err != nil {
		return err
	}
	recs := make([]AuditRecord, len(reqs))
	ents := make([]logEntry, len(reqs))
	var lines []byte
	for i, q := range reqs {
		tip = followWitness(tip, q.after)
		r := q.r
		r.Seq, r.PrevHash = tip.Seq+1, tip.Hash
		if r.Hash, err = recordHash(r); err != nil {
			return fmt.Errorf("audit record %d: hash: %w", r.Seq, err)
		}
		val, err := encodeRecord(&r)
		if err != nil {
			return fmt.Errorf("audit record %d: encode: %w", r.Seq, err)
		}
		if bytes.IndexByte(val, '\n') >= 0 {
			// encoding/json escapes newlines inside strings; this
			// guards the log's one-record-per-line framing anyway.
			return fmt.Errorf("audit record %d: encoded record spans lines", r.Seq)
		}
		recs[i] = r
		ents[i] = logEntry{key: seqKey(r.Seq), raw: val, seq: r.Seq, hash: r.Hash,
			f: auditFilterFields{Principal: r.Principal, Tool: r.Tool, Decision: r.Decision, ErrorCode: r.ErrorCode}}
		lines = append(append(lines, val...), '\n')
		tip = chainPoint{Seq: r.Seq, Hash: r.Hash}
	}
	if err := db.checkRoom(int64(len(lines))); err != nil {
		return err
	}
	if err := l.write(lines, db.bolt.NoSync); err != nil {
		return err
	}
	l.entries = append(l.entries, ents...)
	for i, q := range reqs {
		q.r = recs[i]
	}
	return nil
}

// checkRoom refuses n more bytes of log when the database file and its log
// together would pass MaxSize: the log must not become the way round the
// cap that keeps the file mappable on a 32-bit Pi.
func (db *DB) checkRoom(n int64) error {
	if db.maxSize <= 0 {
		return nil
	}
	fi, err := os.Stat(db.path)
	if err != nil {
		return err
	}
	if total := fi.Size() + db.log.size + n; total > db.maxSize {
		return fmt.Errorf("database and audit log would reach %d bytes, past the %d-byte limit", total, db.maxSize)
	}
	return nil
}

// auditTip is where the next record links: the newest record in the log,
// or, when bbolt holds a later one or the log is empty, bbolt's tip (see
// chainTip). db.log.mu must be held.
func (db *DB) auditTip() (chainPoint, error) {
	var tip chainPoint
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if audit := bucket(tx, bucketAudit); audit != nil {
			tip = chainTip(audit, bucket(tx, bucketMeta))
		}
		return nil
	})
	if err != nil {
		return chainPoint{}, fmt.Errorf("chain tip: %w", err)
	}
	if last, ok := db.log.lastGood(); ok && last.Seq >= tip.Seq {
		tip = last
	}
	return tip, nil
}

package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// auditGroup commits audit appends that arrive together in one transaction.
//
// Every durable commit costs the same few 4 KiB pages (the audit leaf, its
// branch, the root bucket's leaf, the meta page) and an fsync, whether it
// carries one record or ten. An append that finds no commit running commits
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

// commitAudit appends batch in one transaction, in order. Should that
// transaction fail, each record is tried again in a transaction of its own,
// so one bad record cannot fail the others'.
func (db *DB) commitAudit(batch []*auditReq) {
	run := func(reqs []*auditReq) error {
		// Work on copies: a failed transaction must leave each request
		// as it came for the retry.
		recs := make([]AuditRecord, len(reqs))
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			for i, q := range reqs {
				recs[i] = q.r
				if err := appendAuditTx(tx, &recs[i], q.after); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for i, q := range reqs {
				q.r = recs[i]
			}
		}
		return err
	}
	err := run(batch)
	if err != nil && len(batch) > 1 {
		for _, q := range batch {
			q.done <- run([]*auditReq{q})
		}
		return
	}
	for _, q := range batch {
		q.done <- err
	}
}

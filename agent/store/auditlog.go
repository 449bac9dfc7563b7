package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Audit appends go to a small append-only file beside the database first, and
// are folded into bbolt in bulk later.
//
// A durable bbolt commit writes at least the touched leaf, the branch pages
// above it, the root bucket's leaf and the 4 KiB meta page, ~16 KiB and more
// for one ~0.6 KB record: on an SD card that is most of what a busy agent
// writes. The log costs one write of the record's line and one fsync, and
// the fold writes full pages of records at once. Every guarantee is kept:
//   - an append returns only after its line is fsynced, so a record exists
//     before the tool answers;
//   - the line is the record as bbolt stores it, hash-chained like any
//     other, so reads, verification and the witness see one chain: the
//     records in bbolt, then the log's;
//   - a kill -9 can only tear the last line, whose append never returned
//     (so nobody was answered and the witness never saw it): reopening
//     drops it before anything is appended after it, never sealing it in;
//   - a line edited or cut out of the log shows up like an edited or
//     deleted record: hash_mismatch, gap, or against the witness.
//
// The log is folded when it grows past auditLogFoldAt, before retention, at
// open and at a clean close.
//
// Appending grows the file, so each fsync also commits ext4's journal. A
// file kept at a fixed size, zero-filled and overwritten in place, would
// avoid that, but measured far worse: the zeros went into the page cache
// as 64 KiB folios, and every append then wrote back a whole folio (65 KB
// per append against 4.7 KB appending, /proc/self/io write_bytes).
const auditLogFoldAt = 64 << 10

// auditLogPath is the log of the database at path.
func auditLogPath(path string) string { return path + ".auditlog" }

// auditLog is the open log and the records in it, in file order. mu orders
// appends, folds and reads: a reader holding it shared sees each record
// either in the log or in bbolt, never in both or neither.
type auditLog struct {
	mu      sync.RWMutex
	path    string
	f       *os.File // nil for a read-only DB
	entries []logEntry
	size    int64 // bytes of whole lines in the file
}

// logEntry is one line of the log. key is where fold stores it: the
// record's sequence key, or, for a line that does not decode, the previous
// record's key with a suffix (not an 8-byte key, so verification reports it
// as undecodable, in place, and keeps it as evidence).
type logEntry struct {
	key  []byte
	raw  []byte // the line without its newline
	seq  uint64 // 0 when the line does not decode
	hash string
	f    auditFilterFields
}

func (e *logEntry) good() bool { return e.seq != 0 }

// parseLogLine reads what the log needs from one line: the record's seq and
// hash, and the fields the counts use. prev is the key of the entry before.
func parseLogLine(line, prev []byte, n int) logEntry {
	e := logEntry{raw: line}
	var h struct {
		Seq  *uint64 `json:"seq"`
		Hash *string `json:"hash"`
		auditFilterFields
	}
	if err := json.Unmarshal(line, &h); err == nil && h.Seq != nil && *h.Seq != 0 && h.Hash != nil {
		e.seq, e.hash, e.f = *h.Seq, *h.Hash, h.auditFilterFields
		e.key = seqKey(e.seq)
		return e
	}
	e.key = append(append(append([]byte(nil), prev...), 0xff), byte(n>>8), byte(n))
	return e
}

// openAuditLog reads the log at path into l. A torn last line (bytes after
// the last newline) is ignored; writable, it is also cut off the file before
// anything is appended. A missing log is an empty one; writable, it is
// created 0600.
func openAuditLog(path string, readOnly bool) (*auditLog, error) {
	l := &auditLog{path: path}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("store: audit log %s: %w", path, err)
	}
	whole := bytes.LastIndexByte(data, '\n') + 1
	var prev []byte
	rest := data[:whole]
	for i := 0; len(rest) > 0; i++ {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		e := parseLogLine(line, prev, i)
		prev = e.key
		l.entries = append(l.entries, e)
	}
	l.size = int64(whole)
	if readOnly {
		return l, nil
	}
	created := errors.Is(err, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: audit log %s: %w", path, err)
	}
	if whole < len(data) {
		// The torn line's append never returned; cut it so the next
		// record is not written onto its end.
		if err := f.Truncate(int64(whole)); err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("store: audit log %s: drop torn last line: %w", path, err)
		}
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("store: audit log %s: %w", path, err)
		}
	}
	if err := tightenMode(path); err != nil {
		_ = f.Close()
		return nil, err
	}
	l.f = f
	return l, nil
}

// lastGood is the newest record in the log that decodes.
func (l *auditLog) lastGood() (chainPoint, bool) {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if e := &l.entries[i]; e.good() {
			return chainPoint{Seq: e.seq, Hash: e.hash}, true
		}
	}
	return chainPoint{}, false
}

// stats counts the log's decodable records.
func (l *auditLog) stats() auditStats {
	var s auditStats
	for i := range l.entries {
		if e := &l.entries[i]; e.good() {
			s.add(&AuditRecord{Decision: e.f.Decision, ErrorCode: e.f.ErrorCode}, 1)
		}
	}
	return s
}

// write appends lines (each ending in a newline) and fsyncs. On failure the
// file is cut back to what it held, so a partly written line is never
// followed by a later record; nosync is bbolt's NoSync, for test fixtures.
func (l *auditLog) write(lines []byte, nosync bool) error {
	if l.f == nil {
		return errors.New("audit log is read-only")
	}
	_, err := l.f.Write(lines)
	if err == nil && !nosync {
		err = l.f.Sync()
	}
	if err != nil {
		if terr := l.f.Truncate(l.size); terr != nil {
			err = errors.Join(err, fmt.Errorf("cut back to %d bytes: %w", l.size, terr))
		}
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	l.size += int64(len(lines))
	return nil
}

// foldLocked moves the log's records into bbolt in one commit and empties
// the log. l.mu must be held. Should emptying the file fail after the
// commit, the records are both in bbolt and in the file; the next fold
// finds them stored already and skips them.
func (db *DB) foldLocked() error {
	l := db.log
	if l == nil || l.f == nil || len(l.entries) == 0 {
		return nil
	}
	if err := db.bolt.Update(func(tx *bolt.Tx) error { return foldTx(tx, l.entries) }); err != nil {
		return fmt.Errorf("store: fold audit log %s: %w", l.path, err)
	}
	l.entries = nil
	err := l.f.Truncate(0)
	if err == nil {
		err = l.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("store: fold audit log %s: empty it: %w", l.path, err)
	}
	l.size = 0
	return nil
}

// foldTx stores the log's entries under their keys, then the chain head and
// the running counts, as appendAuditTx would have. An entry already stored
// byte for byte (a fold whose emptying of the log failed) is skipped; one
// stored with other content is kept beside it under a suffixed key, so
// verification reports both rather than one silently replacing the other.
func foldTx(tx *bolt.Tx, entries []logEntry) error {
	audit, err := writableBucket(tx, bucketAudit)
	if err != nil {
		return err
	}
	audit.FillPercent = 1.0 // keys only grow: pack leaves full
	meta, err := writableBucket(tx, bucketMeta)
	if err != nil {
		return err
	}
	var (
		added auditStats
		head  *logEntry
	)
	for i := range entries {
		e := &entries[i]
		key := e.key
		if old := audit.Get(key); old != nil {
			if bytes.Equal(old, e.raw) {
				continue
			}
			key = append(append([]byte(nil), key...), 0xfe, byte(i>>8), byte(i))
		} else if e.good() {
			added.add(&AuditRecord{Decision: e.f.Decision, ErrorCode: e.f.ErrorCode}, 1)
			if head == nil || e.seq > head.seq {
				head = e
			}
		}
		if err := audit.Put(key, e.raw); err != nil {
			return fmt.Errorf("audit record %x: %w", key, err)
		}
	}
	if head != nil {
		if cur, ok, err := readPoint(meta, metaAuditHead); !ok || err != nil || head.seq >= cur.Seq {
			if err := putJSON(meta, metaAuditHead, chainPoint{Seq: head.seq, Hash: head.hash}); err != nil {
				return err
			}
		}
	}
	stats, stored := loadStats(audit, meta)
	if stored {
		// A recount already includes what was just written.
		stats.Total += added.Total
		stats.Denied += added.Denied
		stats.Errors += added.Errors
	}
	return putJSON(meta, metaAuditStats, stats)
}

// eachAudit calls fn with every stored record, bbolt's then the log's,
// oldest first, or newest first when !oldest, until fn returns false. It
// must run inside a transaction with db.log.mu held (shared is enough).
func (db *DB) eachAudit(tx *bolt.Tx, oldest bool, fn func(k, v []byte) bool) {
	var ents []logEntry
	if db.log != nil {
		ents = db.log.entries
	}
	fromLog := func() bool {
		for i := range ents {
			j := i
			if !oldest {
				j = len(ents) - 1 - i
			}
			if !fn(ents[j].key, ents[j].raw) {
				return false
			}
		}
		return true
	}
	if !oldest && !fromLog() {
		return
	}
	if audit := bucket(tx, bucketAudit); audit != nil {
		c := audit.Cursor()
		first, next := c.Last, c.Prev
		if oldest {
			first, next = c.First, c.Next
		}
		for k, v := first(); k != nil; k, v = next() {
			if !fn(k, v) {
				return
			}
		}
	}
	if oldest {
		fromLog()
	}
}

// viewAudit runs fn in a read transaction with the log held still.
func (db *DB) viewAudit(fn func(tx *bolt.Tx) error) error {
	if db.log != nil {
		db.log.mu.RLock()
		defer db.log.mu.RUnlock()
	}
	return db.bolt.View(fn)
}

// Package store is the agent's one persistent file: a bbolt database holding
// the hash-chained audit trail, change tokens for critical tools, small
// metadata, metric samples and the jobs that take them.
//
// One file keeps backup, permissions and locking simple: the agent holds it
// open with an exclusive flock, and the CLI can open it read-only when the
// agent is stopped. Every write is one bbolt transaction, and bbolt fsyncs on
// commit, so a write method that returned nil survives power loss, which is
// what lets a tool promise its audit record exists before it answers. Audit
// records are the exception: they go to an fsynced append-only log beside
// the file first and are folded into it in bulk (see auditLogFoldAt).
//
// The file is kept small on purpose: a 32-bit Raspberry Pi OS can map at most
// 2 GB, and SD cards wear with every page written. Records are compact JSON,
// audit keys are append-only so pages are packed full, and Options.MaxSize
// turns a runaway file into a clean error instead of a failed mmap.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names. All are created on every writable open so later code can
// rely on them existing. They are constants, not []byte vars, so no
// package-level value can be mutated.
const (
	bucketSamples      = "samples"
	bucketAudit        = "audit"
	bucketJobs         = "jobs"
	bucketChangeTokens = "tokens" // on-disk name kept from before HTTP tokens existed: old files must open
	bucketMeta         = "meta"
)

// Meta keys owned by this package. PutMeta refuses them (and anything with the
// "audit_" prefix) so no caller can break the audit chain by accident.
const (
	metaAuditHead       = "audit_head"
	metaAuditCheckpoint = "audit_checkpoint"
	metaAuditStats      = "audit_stats"
	metaSchema          = "schema_version"
	reservedMetaPrefix  = "audit_"
)

// SchemaVersion is written to meta "schema_version" when a file is created, so
// a later release can tell which layout it is reading.
const SchemaVersion = "3"

// DefaultMaxSize caps the file unless Options.MaxSize says otherwise. Audit
// records are ~0.5 KB, so this is hundreds of thousands of records, far past
// any sane retention, yet well under what a 32-bit process can map.
const DefaultMaxSize = 256 << 20

// ErrLocked means another process (normally the running agent) holds the file.
var ErrLocked = errors.New("store: database is locked by another process")

// ErrReservedKey is returned by PutMeta for keys this package manages itself.
var ErrReservedKey = errors.New("store: meta key is reserved")

// Options tunes Open.
type Options struct {
	// ReadOnly opens with a shared lock and never writes, for the CLI reading
	// a stopped agent's file. The file must already exist.
	ReadOnly bool
	// Timeout is how long to wait for the flock: 0 means 1 s, negative means
	// try once. A file still locked after it returns an error wrapping ErrLocked.
	Timeout time.Duration
	// MaxSize is the largest the file may grow to, in bytes: 0 means
	// DefaultMaxSize, negative means no limit. Writes that would grow past it
	// fail instead of the file outgrowing the 32-bit address space.
	MaxSize int64
}

// DB is an open store file. All methods are safe for concurrent use: bbolt
// allows many readers and serializes writers, and DB itself holds no mutable
// state but the queue of audit appends waiting to be committed together.
type DB struct {
	bolt     *bolt.DB
	path     string
	readOnly bool
	maxSize  int64 // 0: no limit
	audit    auditGroup
	log      *auditLog // audit records not yet folded into bbolt
	file     *os.File  // bbolt's own descriptor of path, for forgetCached
}

// Open opens (or, unless o.ReadOnly, creates) the store at path. A new file's
// parent directory is created 0700 and the file 0600: it holds change tokens
// with the arguments of pending critical actions, which are nobody else's
// business.
//
// The file's meta "schema_version" is checked before anything is written: a
// file from an older raspi-mcp is migrated to this build's layout (after a
// backup next to it, see initSchema), and one from a newer raspi-mcp is
// refused with ErrNewerSchema, read-only too, and left untouched. A read-only
// open of a file not yet migrated fails with ErrOlderSchema.
func Open(path string, o Options) (*DB, error) {
	return open(path, o, currentSchema())
}

// open is Open bringing the file to sc rather than this build's schema, so
// tests can play a later release opening today's files.
func open(path string, o Options, sc schema) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: open: empty path")
	}
	timeout := o.Timeout
	switch {
	case timeout == 0:
		timeout = time.Second
	case timeout < 0:
		// bbolt treats 0 as "wait forever"; any tiny positive value makes
		// it give up after the first failed attempt.
		timeout = time.Nanosecond
	}
	maxSize := o.MaxSize
	switch {
	case maxSize == 0:
		maxSize = DefaultMaxSize
	case maxSize < 0:
		maxSize = 0
	}
	if !o.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	bo := &bolt.Options{
		Timeout:  timeout,
		ReadOnly: o.ReadOnly,
		MaxSize:  int(min(maxSize, int64(maxInt))),
		// Not writing the freelist on every commit saves one of the ~6
		// pages each durable audit append writes (24 KB -> 20 KB in
		// BenchmarkAppendAudit), i.e. SD-card wear. The price is
		// rebuilding the freelist by scanning on open, trivial for a file
		// this size; the file stays readable by stock bbolt tools.
		NoFreelistSync: true,
	}
	var file *os.File
	bo.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	bdb, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, timeout)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, readOnly: o.ReadOnly, maxSize: maxSize, file: file}
	found, err := checkSchema(bdb, path, o.ReadOnly, sc)
	if err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if o.ReadOnly {
		// Records a killed agent left in its log are read, not folded.
		if db.log, err = openAuditLog(auditLogPath(path), true); err != nil {
			_ = bdb.Close()
			return nil, err
		}
		return db, nil
	}
	if err := tightenMode(path); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if err := initSchema(bdb, path, found, sc); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	if db.log, err = openAuditLog(auditLogPath(path), false); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	db.log.mu.Lock()
	// A fold that fails leaves the records in the log, where reads and
	// verification still find them; the next fold tries again.
	_ = db.foldLocked()
	db.log.mu.Unlock()
	db.forgetCached()
	return db, nil
}

const maxInt = int(^uint(0) >> 1)

// tightenMode makes an existing file 0600 again if something widened it: the
// 0600 passed to bbolt only applies when the file is created.
func tightenMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("store: open %s: chmod 0600: %w", path, err)
		}
	}
	return nil
}

// Close folds the audit log into the file, then releases the file and its
// lock. Closing twice is harmless.
func (db *DB) Close() error {
	var ferr error
	if l := db.log; l != nil {
		l.mu.Lock()
		if l.f != nil {
			ferr = db.foldLocked()
			if err := l.f.Close(); err != nil && ferr == nil {
				ferr = fmt.Errorf("store: close audit log %s: %w", l.path, err)
			}
			l.f = nil
		}
		l.mu.Unlock()
	}
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", db.path, err)
	}
	return ferr
}

// Path is the file this DB was opened from.
func (db *DB) Path() string { return db.path }

// ReadOnly reports whether the DB was opened with Options.ReadOnly.
func (db *DB) ReadOnly() bool { return db.readOnly }

// Size is the file's size on disk in bytes, for status screens and for
// watching it against the 32-bit mapping limit. bbolt never shrinks the file;
// space freed by pruning is reused.
func (db *DB) Size() (int64, error) {
	fi, err := os.Stat(db.path)
	if err != nil {
		return 0, fmt.Errorf("store: size %s: %w", db.path, err)
	}
	return fi.Size(), nil
}

// GetMeta returns a copy of the value stored under key, or nil, nil when the
// key is absent.
func (db *DB) GetMeta(key string) ([]byte, error) {
	if key == "" {
		return nil, errors.New("store: get meta: empty key")
	}
	var out []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := bucket(tx, bucketMeta)
		if b == nil {
			return nil
		}
		if v := b.Get([]byte(key)); v != nil {
			// bbolt values are only valid inside the transaction.
			out = append(make([]byte, 0, len(v)), v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: get meta %q: %w", key, err)
	}
	return out, nil
}

// PutMeta stores val under key, durably. Keys this package manages (the
// "audit_" prefix and "schema_version") are refused with ErrReservedKey.
func (db *DB) PutMeta(key string, val []byte) error {
	if key == "" {
		return errors.New("store: put meta: empty key")
	}
	if strings.HasPrefix(key, reservedMetaPrefix) || key == metaSchema {
		return fmt.Errorf("%w: %q", ErrReservedKey, key)
	}
	if val == nil {
		val = []byte{}
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableBucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), val)
	})
	if err != nil {
		return fmt.Errorf("store: put meta %q: %w", key, err)
	}
	return nil
}

// writableBucket returns a bucket inside a write transaction. Open creates
// all buckets; recreating a missing one here means someone deleting a bucket
// from the file cannot stop the agent writing (VerifyAudit still reports what
// went missing).
func writableBucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	b, err := tx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", name, err)
	}
	return b, nil
}

// bucket returns a bucket for reading, or nil if the file lacks it (possible
// only for a read-only open of a file Open never initialised).
func bucket(tx *bolt.Tx, name string) *bolt.Bucket {
	return tx.Bucket([]byte(name))
}

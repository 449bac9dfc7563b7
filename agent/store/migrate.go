package store

// Schema versions and migrations.
//
// The .deb restarts the agent on upgrade and keeps its state file, so a new
// build must read what an older one wrote, and an older one (after a
// downgrade) must not quietly misread what a newer one wrote. Meta
// "schema_version" says which layout a file has; Open brings an older file up
// to this build's layout and refuses a newer one.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// schemaVersion is the layout this build reads and writes, as an integer.
// SchemaVersion is the same number as it is spelled on disk; a test keeps the
// two equal. Bump both, and add the step from the old number to migrations(),
// whenever a change to buckets, keys or value encodings would make an older
// build misread the file.
const schemaVersion = 3

// legacySchema is what a file holding data but no schema_version is taken to
// be. Every raspi-mcp build has written the key in the same transaction that
// first created the buckets, so no file this package wrote lacks it; only a
// hand-edited file (meta deleted) or a bbolt file from elsewhere can, and 1,
// the oldest layout, is the only honest guess.
const legacySchema = 1

// Meta keys recording the last migration, for whoever later wonders why a
// file looks the way it does. They are informational only: nothing reads
// them back, so PutMeta need not guard them.
const (
	metaMigratedFrom = "schema_migrated_from" // version the file had before, decimal
	metaMigratedAt   = "schema_migrated_at"   // RFC 3339, UTC
)

// ErrNewerSchema means the file was written by a newer raspi-mcp than this
// one (a downgrade). Open refuses it, read-write or read-only, and leaves it
// untouched.
var ErrNewerSchema = errors.New("store: file has a newer schema than this build")

// ErrOlderSchema means a read-only Open found a file that needs migrating,
// which only a read-write Open (the agent starting) does.
var ErrOlderSchema = errors.New("store: file has an older schema, not yet migrated")

// migration turns a file at schema From into schema From+1. Apply runs inside
// the one write transaction that also runs every other pending step and bumps
// schema_version, so an error (or a crash) anywhere leaves the file exactly as
// it was. Apply must therefore not commit, and must finish well within what a
// Raspberry Pi can hold in one transaction's dirty pages.
type migration struct {
	From  int
	Name  string // short and unique, it names the step in errors
	Apply func(tx *bolt.Tx) error
}

// migrations is the production table, one step per version below
// schemaVersion, in order. It is a function, not a package variable, so
// nothing can change it at run time; tests pass their own steps to open.
func migrations() []migration {
	return []migration{
		{From: 1, Name: "samples-to-chunks", Apply: migrateSamplesToChunks},
		{From: 2, Name: "chunks-to-blocks", Apply: migrateChunksToBlocks},
	}
}

// migrateSamplesToChunks is schema 1 to 2: each job's samples, one key per
// sample (8-byte unix ms -> EncodeSample) in schema 1, become chunks
// (chunk.go). The stored bytes of every sample are kept as they are, so a
// sample that did not decode before still does not, and says so at its
// time. A bucket's values that are chunks or blocks already (a file whose
// schema_version was lost, taken for schema 1) are left alone, so the step
// can run twice. A key that is not an 8-byte time, or a nested bucket where
// samples belong, stops the migration with an error naming it: the file
// then stays schema 1, untouched.
func migrateSamplesToChunks(tx *bolt.Tx) error {
	return eachJob(tx, chunkJob)
}

// chunkJob rewrites one job's bucket as chunks.
func chunkJob(p *bolt.Bucket, job []byte) error {
	b := p.Bucket(job)
	var c chunkBuilder
	var kept [][2][]byte // chunks already, copied out of the transaction's pages
	converted := 0
	cur := b.Cursor()
	var blocks [][2][]byte // schema 3 blocks: a file whose schema_version was lost
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		ms, _, err := keyTime(k)
		if err != nil {
			return err
		}
		if v == nil {
			bv, err := blockAt(b, k, v)
			if err != nil {
				return fmt.Errorf("key %x: nested bucket where a sample belongs", k)
			}
			blocks = append(blocks, [2][]byte{append([]byte(nil), k...), append([]byte(nil), bv...)})
			continue
		}
		if len(v) > 0 && v[0] == chunkFormat {
			kept = append(kept, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			continue
		}
		// Keys ascend, so no two share a millisecond and each is later.
		c.add(rawSample{ms: ms, enc: v})
		converted++
	}
	if converted == 0 {
		return nil
	}
	c.finish()
	nb, err := emptyJob(p, job)
	if err != nil {
		return err
	}
	for i := range c.keys {
		if err := nb.Put(c.keys[i], c.vals[i]); err != nil {
			return err
		}
	}
	for _, kv := range kept {
		if err := nb.Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	for _, kv := range blocks {
		if err := putBlock(nb, kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// migrateChunksToBlocks is schema 2 to 3: each job's chunks (chunk.go,
// five or six samples each) become blocks (block.go, up to an hour of
// samples deflated together), so later flushes and the history already kept
// take a third of the pages. The samples' stored bytes are kept as they are.
// A chunk that does not decode stays as it was, a plain value among the
// blocks, for scans to report at its time as before, and no block spans
// across it. Blocks already there are left alone, so the step can run twice.
// A key that is not an 8-byte time stops the migration with an error naming
// it: the file then stays schema 2, untouched.
func migrateChunksToBlocks(tx *bolt.Tx) error {
	return eachJob(tx, blockJob)
}

// eachJob calls rewrite for every job's bucket in the samples bucket. The
// jobs are listed first, since rewrite replaces the bucket it is given.
func eachJob(tx *bolt.Tx, rewrite func(p *bolt.Bucket, job []byte) error) error {
	p := tx.Bucket([]byte(bucketSamples))
	if p == nil {
		return nil
	}
	var jobs [][]byte
	err := p.ForEach(func(k, v []byte) error {
		if v != nil {
			return fmt.Errorf("samples: key %q is a value, not a job's bucket", k)
		}
		jobs = append(jobs, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		return err
	}
	for _, job := range jobs {
		if err := rewrite(p, job); err != nil {
			return fmt.Errorf("samples of job %q: %w", job, err)
		}
	}
	return nil
}

// blockJob rewrites one job's chunks as blocks.
func blockJob(p *bolt.Bucket, job []byte) error {
	b := p.Bucket(job)
	type kv struct {
		k, v  []byte
		block bool
	}
	var (
		blocks [][]rawSample // runs of decoded chunks, split at the damaged ones
		run    []rawSample
		kept   []kv // damaged chunks, and blocks already there
		chunks int
	)
	cur := b.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if _, _, err := keyTime(k); err != nil {
			return err
		}
		if v == nil {
			bv, err := blockAt(b, k, v)
			if err != nil {
				return fmt.Errorf("key %x: %w", k, err)
			}
			kept = append(kept, kv{append([]byte(nil), k...), append([]byte(nil), bv...), true})
			continue
		}
		chunks++
		got, err := decodeChunk(nil, k, v)
		if err != nil {
			kept = append(kept, kv{append([]byte(nil), k...), append([]byte(nil), v...), false})
			if len(run) > 0 {
				blocks, run = append(blocks, run), nil
			}
			continue
		}
		run = append(run, got...)
	}
	if chunks == 0 {
		return nil
	}
	if len(run) > 0 {
		blocks = append(blocks, run)
	}
	nb, err := emptyJob(p, job)
	if err != nil {
		return err
	}
	for _, r := range blocks {
		if err := putBlocks(nb, r); err != nil {
			return err
		}
	}
	for _, e := range kept {
		if e.block {
			if err := putBlock(nb, e.k, e.v); err != nil {
				return err
			}
		} else if err := nb.Put(e.k, e.v); err != nil {
			return fmt.Errorf("key %x: %w", e.k, err)
		}
	}
	return nil
}

// emptyJob replaces job's bucket with an empty one, set for appends, for a
// migration step to refill.
func emptyJob(p *bolt.Bucket, job []byte) (*bolt.Bucket, error) {
	if err := p.DeleteBucket(job); err != nil {
		return nil, err
	}
	nb, err := p.CreateBucket(job)
	if err != nil {
		return nil, err
	}
	nb.FillPercent = sampleFillPercent
	return nb, nil
}

// schema is what an open brings a file to: the version and the steps that
// lead there. Open always uses currentSchema(); tests build others to play a
// later release opening today's files.
type schema struct {
	version int
	steps   []migration
}

func currentSchema() schema {
	return schema{version: schemaVersion, steps: migrations()}
}

// validate checks the table is usable: one step per version from 1 up to
// sc.version, each named and with an Apply. It runs before a migration
// touches anything, so a bad table costs an error, not a half-migrated file.
func (sc schema) validate() error {
	if sc.version < 1 {
		return fmt.Errorf("schema version %d is not positive", sc.version)
	}
	seen := make(map[int]bool, len(sc.steps))
	names := make(map[string]bool, len(sc.steps))
	for _, m := range sc.steps {
		switch {
		case m.From < 1 || m.From >= sc.version:
			return fmt.Errorf("migration %q: from schema %d is outside 1..%d", m.Name, m.From, sc.version-1)
		case seen[m.From]:
			return fmt.Errorf("migration %q: a second step from schema %d", m.Name, m.From)
		case m.Name == "" || names[m.Name]:
			return fmt.Errorf("migration from schema %d: name %q is empty or not unique", m.From, m.Name)
		case m.Apply == nil:
			return fmt.Errorf("migration %q: no Apply", m.Name)
		}
		seen[m.From], names[m.Name] = true, true
	}
	for v := 1; v < sc.version; v++ {
		if !seen[v] {
			return fmt.Errorf("no migration step from schema %d to %d", v, v+1)
		}
	}
	return nil
}

// plan returns the steps from version from up to sc.version, in order.
func (sc schema) plan(from int) []migration {
	var out []migration
	for v := from; v < sc.version; v++ {
		for _, m := range sc.steps {
			if m.From == v {
				out = append(out, m)
			}
		}
	}
	return out
}

// fileSchema is the version found in a file. fresh means the file has no
// buckets at all (just created, or never initialised); stamped means
// schema_version is present.
type fileSchema struct {
	version int
	stamped bool
	fresh   bool
}

// readSchema reads meta "schema_version", a positive decimal integer with no
// sign, spaces or leading zeros (the format version 1 wrote as "1"). Anything
// else is refused rather than guessed at: a wrong guess would run the wrong
// migrations.
func readSchema(tx *bolt.Tx) (fileSchema, error) {
	if meta := tx.Bucket([]byte(bucketMeta)); meta != nil {
		if v := meta.Get([]byte(metaSchema)); v != nil {
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 1 || strconv.Itoa(n) != string(v) {
				return fileSchema{}, fmt.Errorf("meta %s %q is not a positive integer", metaSchema, v)
			}
			return fileSchema{version: n, stamped: true}, nil
		}
	}
	if k, _ := tx.Cursor().First(); k == nil {
		return fileSchema{fresh: true}, nil
	}
	return fileSchema{version: legacySchema}, nil
}

// checkSchema reads the file's schema and refuses what this build must not
// open, before anything is written. A newer schema is refused read-only too:
// its layout may differ in ways this build cannot see, and a CLI reporting a
// healthy audit trail as tampered (or the reverse) from misread records is
// worse than one saying plainly that it is too old. An older schema is
// refused read-only because migrating needs a write; starting the agent
// migrates it.
func checkSchema(bdb *bolt.DB, path string, readOnly bool, sc schema) (fileSchema, error) {
	var found fileSchema
	err := bdb.View(func(tx *bolt.Tx) error {
		var err error
		found, err = readSchema(tx)
		return err
	})
	if err != nil {
		return fileSchema{}, fmt.Errorf("store: open %s: %w", path, err)
	}
	switch {
	case found.fresh:
	case found.version > sc.version:
		return fileSchema{}, fmt.Errorf("%w: %s has schema %d, this build reads schema %d: "+
			"a newer raspi-mcp wrote it (a downgrade); left unchanged, "+
			"reinstall the newer raspi-mcp or restore %s by hand if it exists",
			ErrNewerSchema, path, found.version, sc.version, backupPath(path, sc.version))
	case readOnly && found.version < sc.version:
		return fileSchema{}, fmt.Errorf("%w: %s has schema %d, this build reads schema %d: "+
			"start the agent once to migrate it",
			ErrOlderSchema, path, found.version, sc.version)
	}
	return found, nil
}

// initSchema creates the buckets and brings the file from found (what
// checkSchema found) to sc.version, all in one write transaction: the steps,
// the buckets this layout expects and the new schema_version commit together
// or not at all. A file that has data and needs migrating is first copied to
// backupPath(path, found.version), so a migration that commits but turns out
// wrong can be rolled back by hand. The copy costs one read of the whole file
// and as much again in free space, only when the schema changes, which is
// rare and happens on an upgrade, not during normal running.
func initSchema(bdb *bolt.DB, path string, found fileSchema, sc schema) error {
	var steps []migration
	if !found.fresh && found.version < sc.version {
		if err := sc.validate(); err != nil {
			return fmt.Errorf("store: open %s: migrate schema %d to %d: %w", path, found.version, sc.version, err)
		}
		steps = sc.plan(found.version)
		if err := writeBackup(bdb, backupPath(path, found.version)); err != nil {
			return fmt.Errorf("store: open %s: backup before migrating schema %d to %d: %w", path, found.version, sc.version, err)
		}
	}
	err := bdb.Update(func(tx *bolt.Tx) error {
		// The exclusive flock makes this the only writer, but reading the
		// version again in the write transaction costs nothing and ties the
		// steps to the version they were chosen for.
		now, err := readSchema(tx)
		if err != nil {
			return err
		}
		if now != found {
			return fmt.Errorf("schema changed under us: %+v, was %+v", now, found)
		}
		for _, m := range steps {
			if err := m.Apply(tx); err != nil {
				return fmt.Errorf("step %q (schema %d to %d): %w", m.Name, m.From, m.From+1, err)
			}
		}
		for _, name := range []string{bucketSamples, bucketAudit, bucketJobs, bucketChangeTokens, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket([]byte(bucketMeta))
		if k, _ := tx.Bucket([]byte(bucketAudit)).Cursor().First(); k == nil && meta.Get([]byte(metaAuditStats)) == nil {
			// An empty trail counts from zero, so verification compares
			// the count with the records from the first append on, not
			// only after the audit log is first folded.
			if err := putJSON(meta, metaAuditStats, auditStats{}); err != nil {
				return err
			}
		}
		if found.stamped && found.version == sc.version {
			return nil
		}
		if err := meta.Put([]byte(metaSchema), []byte(strconv.Itoa(sc.version))); err != nil {
			return err
		}
		if len(steps) == 0 {
			return nil
		}
		if err := meta.Put([]byte(metaMigratedFrom), []byte(strconv.Itoa(found.version))); err != nil {
			return err
		}
		return meta.Put([]byte(metaMigratedAt), []byte(time.Now().UTC().Format(time.RFC3339)))
	})
	if err != nil {
		if len(steps) > 0 {
			return fmt.Errorf("store: open %s: migrate schema %d to %d: %w (nothing committed, the file is still schema %d)",
				path, found.version, sc.version, err, found.version)
		}
		return fmt.Errorf("store: open %s: init: %w", path, err)
	}
	return nil
}

// backupPath is where the copy taken before migrating from version goes.
func backupPath(path string, version int) string {
	return fmt.Sprintf("%s.schema%d.bak", path, version)
}

// writeBackup copies the database, as one read transaction sees it, to dst:
// written to a temporary file, fsynced, then renamed, so dst is either the
// previous backup or a complete new one, never half a file. 0600 like the
// file itself: it holds the same tokens.
func writeBackup(bdb *bolt.DB, dst string) error {
	tmp := dst + ".tmp"
	// A leftover from a crash may have any mode; O_EXCL below then
	// guarantees the 0600 applies.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = bdb.View(func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(f)
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const (
	v1Records = 20
	v1Samples = 30
)

// writeV1 makes a file as a schema 1 build wrote it: an audit trail, one
// job's samples one key per sample (appendSamplesV1, the old code path) and
// a caller's meta key.
func writeV1(t *testing.T) string {
	t.Helper()
	path := testPath(t)
	db, err := open(path, Options{}, schema{version: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, v1Records)
	for b := range 3 {
		batch := make([]Sample, v1Samples/3)
		for j := range batch {
			batch[j] = realisticSample(b*len(batch) + j)
		}
		if err := appendSamplesV1(db, "job-a", batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutMeta("agent.version", []byte("1.0.0")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// appendSamplesV1 is how schema 1 stored a batch, kept so tests can write
// the files a migration meets: one key per sample, the 8-byte big-endian
// unix millisecond, to EncodeSample, in one transaction.
func appendSamplesV1(db *DB, job string, batch []Sample) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableJobSamples(tx, job)
		if err != nil {
			return err
		}
		for _, s := range batch {
			if err := b.Put(millisKey(uint64(s.Time.UnixMilli())), EncodeSample(nil, s)); err != nil {
				return err
			}
		}
		return nil
	})
}

// rawMeta reads a meta key straight from the file, whatever its schema.
func rawMeta(t *testing.T, path, key string) string {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var out string
	err = bdb.View(func(tx *bolt.Tx) error {
		out = string(tx.Bucket([]byte(bucketMeta)).Get([]byte(key)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requireV1Data checks db still holds exactly what writeV1 wrote, the audit
// chain verifying.
func requireV1Data(t *testing.T, db *DB) {
	t.Helper()
	if v := requireOK(t, db); v.Records != v1Records || v.HeadSeq != v1Records {
		t.Errorf("audit after migration: %+v, want %d records", v, v1Records)
	}
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != v1Samples {
		t.Errorf("SampleStats = %+v, %v; want %d samples", st, err, v1Samples)
	}
	var zero time.Time
	wantIndexes(t, "samples", collect(t, db, "job-a", zero, zero, false), span(0, v1Samples)...)
	if got, err := db.GetMeta("agent.version"); err != nil || string(got) != "1.0.0" {
		t.Errorf("GetMeta(agent.version) = %q, %v", got, err)
	}
}

// requireV1Backup checks a schema 1 file (a backup taken before migrating)
// holds what writeV1 wrote, read the schema 1 way: samples one key each.
func requireV1Backup(t *testing.T, db *DB) {
	t.Helper()
	if v := requireOK(t, db); v.Records != v1Records {
		t.Errorf("audit in backup: %+v, want %d records", v, v1Records)
	}
	if got, err := db.GetMeta("agent.version"); err != nil || string(got) != "1.0.0" {
		t.Errorf("GetMeta(agent.version) = %q, %v", got, err)
	}
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return jobSamples(tx, "job-a").ForEach(func(k, v []byte) error {
			s, err := DecodeSample(v)
			if err != nil {
				return err
			}
			s.Time = time.UnixMilli(int64(binary.BigEndian.Uint64(k))).UTC()
			if d := sameSample(stored(realisticSample(n)), s); d != "" {
				t.Errorf("backup sample %d: %s", n, d)
			}
			n++
			return nil
		})
	})
	if err != nil || n != v1Samples {
		t.Errorf("backup: %d samples, %v; want %d one key each", n, err, v1Samples)
	}
}

func metaString(t *testing.T, db *DB, key string) string {
	t.Helper()
	v, err := db.GetMeta(key)
	if err != nil {
		t.Fatalf("GetMeta(%s): %v", key, err)
	}
	return string(v)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func requireNoFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (%v), want none", path, err)
	}
}

// setSchemaRaw writes schema_version (or deletes it, for nil) with plain
// bbolt, as a file from another build or a hand edit would have it.
func setSchemaRaw(t *testing.T, path string, v []byte) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(bucketMeta))
		if v == nil {
			return meta.Delete([]byte(metaSchema))
		}
		return meta.Put([]byte(metaSchema), v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// countingStep is a 1 -> 2 step that records how often it ran and leaves a
// mark (a bucket) it can be recognised by. It also does the production
// steps, so the migrated file reads like this build's.
func countingStep(runs *int) migration {
	return migration{From: 1, Name: "add-mark", Apply: func(tx *bolt.Tx) error {
		*runs++
		if _, err := tx.CreateBucket([]byte("mark")); err != nil {
			return err
		}
		if err := migrateSamplesToChunks(tx); err != nil {
			return err
		}
		return migrateChunksToBlocks(tx)
	}}
}

func hasBucket(t *testing.T, db *DB, name string) bool {
	t.Helper()
	var ok bool
	if err := db.bolt.View(func(tx *bolt.Tx) error { ok = tx.Bucket([]byte(name)) != nil; return nil }); err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestSchemaConstantsAgree(t *testing.T) {
	if got := strconv.Itoa(schemaVersion); got != SchemaVersion {
		t.Errorf("schemaVersion %s, SchemaVersion %q: bump both together", got, SchemaVersion)
	}
	if err := currentSchema().validate(); err != nil {
		t.Errorf("production migrations: %v", err)
	}
}

func TestSchemaValidate(t *testing.T) {
	ok := func(*bolt.Tx) error { return nil }
	for _, tc := range []struct {
		name string
		sc   schema
		want string // substring of the error, "" for valid
	}{
		{"current, no steps", schema{version: 1}, ""},
		{"two steps", schema{version: 3, steps: []migration{{2, "b", ok}, {1, "a", ok}}}, ""},
		{"zero version", schema{version: 0}, "not positive"},
		{"gap", schema{version: 3, steps: []migration{{1, "a", ok}}}, "no migration step from schema 2"},
		{"duplicate", schema{version: 2, steps: []migration{{1, "a", ok}, {1, "b", ok}}}, "second step"},
		{"beyond", schema{version: 2, steps: []migration{{1, "a", ok}, {2, "b", ok}}}, "outside"},
		{"same name", schema{version: 3, steps: []migration{{1, "a", ok}, {2, "a", ok}}}, "not unique"},
		{"no apply", schema{version: 2, steps: []migration{{1, "a", nil}}}, "no Apply"},
	} {
		err := tc.sc.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestMigrateV1ToV2(t *testing.T) {
	path := writeV1(t)
	runs := 0
	v2 := schema{version: 2, steps: []migration{countingStep(&runs)}}

	before := time.Now().UTC().Truncate(time.Second)
	db, err := open(path, Options{}, v2)
	if err != nil {
		t.Fatalf("open as schema 2: %v", err)
	}
	if runs != 1 {
		t.Errorf("step ran %d times, want 1", runs)
	}
	if !hasBucket(t, db, "mark") {
		t.Error("step's bucket missing after migration")
	}
	requireV1Data(t, db)
	if got := metaString(t, db, metaSchema); got != "2" {
		t.Errorf("schema_version = %q, want 2", got)
	}
	if got := metaString(t, db, metaMigratedFrom); got != "1" {
		t.Errorf("%s = %q, want 1", metaMigratedFrom, got)
	}
	at := metaString(t, db, metaMigratedAt)
	if ts, err := time.Parse(time.RFC3339, at); err != nil || ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("%s = %q (%v), want about now", metaMigratedAt, at, err)
	}
	// The chain goes on from the migrated file.
	if _, err := db.AppendAudit(sampleRecord(v1Records + 1)); err != nil {
		t.Fatal(err)
	}
	if v := requireOK(t, db); v.Records != v1Records+1 {
		t.Errorf("records after append = %d", v.Records)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The backup is the v1 file as it was: 0600, opens with this (schema 1)
	// build, holds all of the data and none of the step's work.
	bak := path + ".schema1.bak"
	fi, err := os.Stat(bak)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode = %o, want 600", fi.Mode().Perm())
	}
	requireNoFile(t, bak+".tmp")
	old, err := open(bak, Options{ReadOnly: true}, schema{version: 1})
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	requireV1Backup(t, old)
	if got := metaString(t, old, metaSchema); got != "1" {
		t.Errorf("backup schema_version = %q, want 1", got)
	}
	if hasBucket(t, old, "mark") {
		t.Error("backup has the step's bucket")
	}
	old.Close()

	// Reopening the migrated file runs nothing and rewrites nothing.
	bakBytes := readFile(t, bak)
	db, err = open(path, Options{}, v2)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if runs != 1 {
		t.Errorf("step ran again on reopen: %d runs", runs)
	}
	if got := metaString(t, db, metaMigratedAt); got != at {
		t.Errorf("%s rewritten on reopen: %q, was %q", metaMigratedAt, got, at)
	}
	if !bytes.Equal(readFile(t, bak), bakBytes) {
		t.Error("backup rewritten on reopen")
	}
}

func TestMigrateFailingStepLeavesFileAlone(t *testing.T) {
	path := writeV1(t)
	boom := errors.New("boom")
	v3 := schema{version: 3, steps: []migration{
		{From: 1, Name: "wreck-audit", Apply: func(tx *bolt.Tx) error {
			// A first step that succeeds and does damage, so the test
			// sees it rolled back with the failing one.
			return tx.DeleteBucket([]byte(bucketAudit))
		}},
		{From: 2, Name: "fails", Apply: func(*bolt.Tx) error { return boom }},
	}}
	db, err := open(path, Options{}, v3)
	if err == nil {
		db.Close()
		t.Fatal("open with a failing step succeeded")
	}
	if !errors.Is(err, boom) {
		t.Errorf("error %v does not wrap the step's", err)
	}
	for _, want := range []string{"store: open ", path, `step "fails"`, "schema 2 to 3", "still schema 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	if got := rawMeta(t, path, metaSchema); got != "1" {
		t.Errorf("schema_version = %q after failed migration, want 1", got)
	}
	if got := rawMeta(t, path, metaMigratedFrom); got != "" {
		t.Errorf("%s = %q after failed migration", metaMigratedFrom, got)
	}
	// Untouched: this build migrates it and finds everything.
	db = openAt(t, path)
	defer db.Close()
	requireV1Data(t, db)
}

func TestMigrateMissingStepTouchesNothing(t *testing.T) {
	path := writeV1(t)
	orig := readFile(t, path)
	runs := 0
	v3 := schema{version: 3, steps: []migration{countingStep(&runs)}}
	db, err := open(path, Options{}, v3)
	if err == nil {
		db.Close()
		t.Fatal("open with no step from 2 succeeded")
	}
	if !strings.Contains(err.Error(), "no migration step from schema 2") || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v", err)
	}
	if runs != 0 {
		t.Errorf("step ran %d times", runs)
	}
	if !bytes.Equal(readFile(t, path), orig) {
		t.Error("file changed")
	}
	requireNoFile(t, path+".schema1.bak")
}

func TestNewerSchemaRefused(t *testing.T) {
	// A file as the next schema's build writes it: a new file is stamped
	// with the build's version, no steps involved.
	path := testPath(t)
	db, err := open(path, Options{}, schema{version: schemaVersion + 1})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, 3)
	db.Close()
	orig := readFile(t, path)

	for _, o := range []Options{{}, {ReadOnly: true}} {
		db, err := Open(path, o)
		if err == nil {
			db.Close()
			t.Fatalf("Open(%+v) of a schema %d file succeeded", o, schemaVersion+1)
		}
		if !errors.Is(err, ErrNewerSchema) {
			t.Errorf("Open(%+v) = %v, want ErrNewerSchema", o, err)
		}
		for _, want := range []string{"store: ", path, "schema 3", "schema " + SchemaVersion, "newer raspi-mcp", "downgrade"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Open(%+v) error %q lacks %q", o, err, want)
			}
		}
		if !bytes.Equal(readFile(t, path), orig) {
			t.Fatalf("Open(%+v) changed the newer file", o)
		}
	}
	requireNoFile(t, path+".schema3.bak")
	requireNoFile(t, path+".schema1.bak")
}

func TestReadOnlyOlderSchemaRefused(t *testing.T) {
	path := writeV1(t)
	orig := readFile(t, path)
	runs := 0
	v2 := schema{version: 2, steps: []migration{countingStep(&runs)}}
	db, err := open(path, Options{ReadOnly: true}, v2)
	if err == nil {
		db.Close()
		t.Fatal("read-only open of a schema 1 file as schema 2 succeeded")
	}
	if !errors.Is(err, ErrOlderSchema) || !strings.Contains(err.Error(), path) {
		t.Errorf("error = %v, want ErrOlderSchema naming the file", err)
	}
	if runs != 0 || !bytes.Equal(readFile(t, path), orig) {
		t.Errorf("read-only open migrated: %d runs, file changed %v", runs, !bytes.Equal(readFile(t, path), orig))
	}
}

func TestUpToDateRunsNothing(t *testing.T) {
	runs := 0
	v2 := schema{version: 2, steps: []migration{countingStep(&runs)}}
	path := testPath(t)
	for i := range 3 {
		db, err := open(path, Options{}, v2)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if got := metaString(t, db, metaSchema); got != "2" {
			t.Errorf("open %d: schema_version = %q, want 2", i, got)
		}
		if got := metaString(t, db, metaMigratedFrom); got != "" {
			t.Errorf("open %d: %s = %q on a file never migrated", i, metaMigratedFrom, got)
		}
		appendN(t, db, 1)
		db.Close()
	}
	if runs != 0 {
		t.Errorf("step ran %d times on a file created at schema 2", runs)
	}
	requireNoFile(t, path+".schema1.bak")

	// The same for this build's own files.
	path = testPath(t)
	db := openAt(t, path)
	appendN(t, db, 3)
	appendBatches(t, db, "job-a", 0, 2, 12)
	db.Close()
	db = openAt(t, path)
	defer db.Close()
	if got := metaString(t, db, metaMigratedFrom); got != "" {
		t.Errorf("%s = %q on a file never migrated", metaMigratedFrom, got)
	}
	requireNoFile(t, path+".schema1.bak")
	requireNoFile(t, path+".schema2.bak")
}

func TestMissingSchemaKey(t *testing.T) {
	// No raspi-mcp build wrote data without schema_version; a hand edit can
	// remove it. Such a file is schema 1.
	path := writeV1(t)
	setSchemaRaw(t, path, nil)
	db := openAt(t, path)
	if got := metaString(t, db, metaSchema); got != SchemaVersion {
		t.Errorf("schema_version = %q, want it stamped %s", got, SchemaVersion)
	}
	requireV1Data(t, db)
	db.Close()

	// Taken for schema 1 again, the chunks already there are left alone.
	setSchemaRaw(t, path, nil)
	runs := 0
	db, err := open(path, Options{}, schema{version: 2, steps: []migration{countingStep(&runs)}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if runs != 1 || metaString(t, db, metaSchema) != "2" || metaString(t, db, metaMigratedFrom) != "1" {
		t.Errorf("keyless file not migrated as schema 1: %d runs", runs)
	}
	requireV1Data(t, db)
}

func TestBadSchemaValueRefused(t *testing.T) {
	path := writeV1(t)
	for _, v := range []string{"", "abc", "0", "-1", "01", "+1", " 1", "1.0", "99999999999999999999999"} {
		setSchemaRaw(t, path, []byte(v))
		orig := readFile(t, path)
		for _, o := range []Options{{}, {ReadOnly: true}} {
			db, err := Open(path, o)
			if err == nil {
				db.Close()
				t.Errorf("Open(%+v) with schema_version %q succeeded", o, v)
				continue
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), strconv.Quote(v)) {
				t.Errorf("Open(%+v) with schema_version %q: error %q names neither file nor value", o, v, err)
			}
		}
		if !bytes.Equal(readFile(t, path), orig) {
			t.Errorf("schema_version %q: file changed", v)
		}
	}
}

package store

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestDecodeBlockRejects: malformed blocks are errors, never panics or
// huge allocations.
func TestDecodeBlockRejects(t *testing.T) {
	keys, vals := buildBlocks([]rawSample{
		{ms: 1000, enc: EncodeSample(nil, realisticSample(0))},
		{ms: 6000, enc: EncodeSample(nil, realisticSample(1))},
	})
	if len(keys) != 1 {
		t.Fatalf("%d blocks, want 1", len(keys))
	}
	good := vals[0]
	if got, err := decodeBlock(nil, keys[0], good); err != nil || len(got) != 2 || got[1].ms != 6000 {
		t.Fatalf("good block: %+v, %v", got, err)
	}
	for i := range good {
		if _, err := decodeBlock(nil, keys[0], good[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
	deflated := func(rec []byte) []byte {
		var b bytes.Buffer
		w, _ := flate.NewWriter(&b, flate.BestSpeed)
		w.Write(rec)
		w.Close()
		return b.Bytes()
	}
	block := func(n, span uint64, rec []byte) []byte {
		v := binary.AppendUvarint([]byte{blockFormat}, n)
		return append(binary.AppendUvarint(v, span), deflated(rec)...)
	}
	for name, v := range map[string][]byte{
		"trailing":       append(append([]byte(nil), good...), 0),
		"zero count":     block(0, 0, nil),
		"huge count":     block(1<<40, 0, []byte{1, 1}),
		"format 2":       append([]byte{chunkFormat}, good[1:]...),
		"zero time step": block(2, 0, []byte{1, 1, 0, 1, 1}),
		"short record":   block(1, 0, []byte{5, 1}),
		"extra records":  block(1, 0, []byte{1, 1, 1, 1, 1}),
		"wrong span":     block(2, 7, []byte{1, 1, 5, 1, 1}),
		"not deflate":    append(binary.AppendUvarint([]byte{blockFormat, 1}, 0), 0xff, 0xff),
		"bomb":           block(1, 0, append(binary.AppendUvarint(nil, maxBlockRaw), make([]byte, maxBlockRaw)...)),
	} {
		if _, err := decodeBlock(nil, keys[0], v); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := decodeBlock(nil, []byte{1, 2}, good); err == nil {
		t.Error("short key: no error")
	}
}

func FuzzDecodeBlock(f *testing.F) { fuzzRoundTrip(f, buildBlocks, decodeBlock) }

// TestBlocksSplitAtLimits: a flush longer than maxBlockSpan becomes blocks
// of at most an hour, each sample once, in order.
func TestBlocksSplitAtLimits(t *testing.T) {
	var raw []rawSample
	for i := range 2000 { // 2000 s at one a second, 2 s apart: 4000 s
		raw = append(raw, rawSample{ms: uint64(1000 + 2000*i), enc: EncodeSample(nil, realisticSample(i))})
	}
	keys, vals := buildBlocks(raw)
	if len(keys) != 2 {
		t.Fatalf("%d blocks for 4000 s, want 2", len(keys))
	}
	var back []rawSample
	for i := range keys {
		h, err := parseBlockHead(vals[i])
		if err != nil || h.span >= maxBlockSpan {
			t.Fatalf("block %d: %+v, %v", i, h, err)
		}
		if back, err = decodeBlock(back, keys[i], vals[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(back) != len(raw) || back[len(back)-1].ms != raw[len(raw)-1].ms {
		t.Fatalf("%d samples back, want %d", len(back), len(raw))
	}
}

// schema2 is the layout before blocks: files written by it are what the
// chunks-to-blocks step meets.
var schema2 = schema{version: 2, steps: migrations()[:1]}

// appendSamplesV2 is how schema 2 stored a batch later than every stored
// sample, kept so tests can write the files a migration meets: chunks of a
// few samples (chunk.go), one key each, in one transaction.
func appendSamplesV2(db *DB, job string, batch []Sample) error {
	raw := make([]rawSample, len(batch))
	for i, s := range batch {
		raw[i] = rawSample{ms: uint64(s.Time.UnixMilli()), enc: EncodeSample(nil, s)}
	}
	keys, vals := buildChunks(raw)
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := writableJobSamples(tx, job)
		if err != nil {
			return err
		}
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestMigrateChunksToBlocks is the production 2 -> 3 step on a file the
// schema 2 code wrote: every sample comes back, as one block per hour of
// chunks; a chunk that does not decode stays where it was and scans report
// it at its time; the schema 2 file is kept as a backup.
func TestMigrateChunksToBlocks(t *testing.T) {
	path := testPath(t)
	db, err := open(path, Options{}, schema2)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, 5)
	for b := range 10 { // 10 flushes of 12 minutes at 5 s: 1440 samples, 2 hours
		batch := make([]Sample, 144)
		for j := range batch {
			batch[j] = realisticSample(b*144 + j)
		}
		if err := appendSamplesV2(db, "job-a", batch); err != nil {
			t.Fatal(err)
		}
	}
	for _, pair := range [][]Sample{{realisticSample(0), realisticSample(1)}, {realisticSample(9), realisticSample(10)}} {
		if err := appendSamplesV2(db, "job-b", pair); err != nil {
			t.Fatal(err)
		}
	}
	// A damaged chunk between job-b's samples 1 and 9.
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return jobSamples(tx, "job-b").Put(millisKey(uint64(at(5).UnixMilli())), []byte{chunkFormat, 1, 0xff})
	})
	if err != nil {
		t.Fatal(err)
	}
	before, err := db.Size()
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openAt(t, path)
	defer db.Close()
	if got := metaString(t, db, metaSchema); got != SchemaVersion {
		t.Errorf("schema_version = %q", got)
	}
	if got := metaString(t, db, metaMigratedFrom); got != "2" {
		t.Errorf("%s = %q", metaMigratedFrom, got)
	}
	if v := requireOK(t, db); v.Records != 5 {
		t.Errorf("audit after migration: %+v", v)
	}
	var zero time.Time
	wantIndexes(t, "job-a", collect(t, db, "job-a", zero, zero, false), span(0, 1440)...)
	wantIndexes(t, "job-a newest first, cut", collect(t, db, "job-a", at(700), at(731), true), reversed(span(700, 731))...)
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 1440 || !st.First.Equal(at(0)) || !st.Last.Equal(at(1439)) {
		t.Errorf("SampleStats = %+v, %v", st, err)
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if n := keyCount(jobSamples(tx, "job-a")); n != 2 {
			t.Errorf("job-a: %d blocks for two hours, want 2", n)
		}
		if n := keyCount(jobSamples(tx, "job-b")); n != 3 {
			t.Errorf("job-b: %d keys, want a block, the damaged chunk, a block", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantIndexes(t, "job-b after the damaged chunk", collect(t, db, "job-b", at(9), zero, false), 9, 10)
	n := 0
	err = db.ScanSamples("job-b", zero, zero, func(Sample) bool { n++; return true })
	if err == nil || n != 2 || !strings.Contains(err.Error(), at(5).Format(time.RFC3339Nano)) {
		t.Errorf("scan over the damaged chunk: %d samples, %v", n, err)
	}
	// The backup is the schema 2 file, readable the schema 2 way.
	old, err := open(path+".schema2.bak", Options{ReadOnly: true}, schema2)
	if err != nil {
		t.Fatal(err)
	}
	err = old.bolt.View(func(tx *bolt.Tx) error {
		n := 0
		err := jobSamples(tx, "job-a").ForEach(func(k, v []byte) error {
			got, err := decodeChunk(nil, k, v)
			n += len(got)
			return err
		})
		if n != 1440 {
			t.Errorf("backup holds %d samples as chunks, want 1440", n)
		}
		return err
	})
	old.Close()
	if err != nil {
		t.Fatal(err)
	}
	// New samples follow the migrated ones; retention takes whole blocks.
	appendBatches(t, db, "job-a", 1440, 1, 12)
	if n, err := db.PruneSamples("job-a", at(800)); err != nil || n != 720 {
		t.Errorf("PruneSamples(at 800) = %d, %v; want the first hour's block, 720", n, err)
	}
	wantIndexes(t, "after append and prune", collect(t, db, "job-a", zero, zero, false), span(720, 1452)...)
	after, _ := db.Size()
	t.Logf("file %d bytes as schema 2, %d after migrating", before, after)
}

const envKillV2 = "RASPI_STORE_KILL_V2_CHILD"

// TestSamplesKillV2Child is the child of TestMigrateV2AfterKill: a schema 2
// writer appending chunks the schema 2 way until it is killed.
func TestSamplesKillV2Child(t *testing.T) {
	path := os.Getenv(envKillV2)
	if path == "" {
		t.Skip("helper process for TestMigrateV2AfterKill")
	}
	db, err := open(path, Options{}, schema2)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	writeUntilKilled(0, func(b []Sample) error { return appendSamplesV2(db, "job-k", b) })
}

// TestMigrateV2AfterKill: a schema 2 agent SIGKILLed in the middle of a
// flush leaves a file this build opens, migrates to blocks and verifies.
func TestMigrateV2AfterKill(t *testing.T) {
	killThenMigrate(t, "TestSamplesKillV2Child", envKillV2, "2")
}

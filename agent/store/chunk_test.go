package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestChunksMergeOverlap: samples landing inside stored chunks (a clock that
// stepped back, a replayed batch) are merged, a shared millisecond taking
// the newer sample, so scans stay in strict time order.
func TestChunksMergeOverlap(t *testing.T) {
	db := openTest(t)
	appendBatches(t, db, "job-a", 0, 2, 12) // 0..23
	// Odd samples again, with another temperature, and 30..32 beyond.
	var again []Sample
	for i := 1; i < 24; i += 2 {
		s := realisticSample(i)
		s.TempC = 99
		again = append(again, s)
	}
	again = append(again, realisticSample(30), realisticSample(31), realisticSample(32))
	if err := db.AppendSamples("job-a", again); err != nil {
		t.Fatal(err)
	}
	got := collect(t, db, "job-a", time.Time{}, time.Time{}, false)
	want := append(span(0, 24), 30, 31, 32)
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}
	for k, i := range want {
		w := stored(realisticSample(i))
		if i < 24 && i%2 == 1 {
			w.TempC = 99
		}
		if d := sameSample(w, got[k]); d != "" {
			t.Fatalf("sample %d (index %d): %s", k, i, d)
		}
	}
	desc := collect(t, db, "job-a", at(5), at(31), true)
	if len(desc) != 20 || !desc[0].Time.Equal(at(30)) || !desc[19].Time.Equal(at(5)) {
		t.Fatalf("desc [5, 31): %d samples from %v to %v", len(desc), desc[0].Time, desc[len(desc)-1].Time)
	}
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 27 || !st.Last.Equal(at(32)) {
		t.Fatalf("SampleStats = %+v, %v", st, err)
	}
}

// TestAppendSamplesPruning: retention in the flush's own commit deletes
// the blocks wholly before the bound; the block reaching across it stays
// whole (rewriting it would cost a flush's pages every hour). Batches of 20
// minutes make a block each; a small last block takes the next batch in.
func TestAppendSamplesPruning(t *testing.T) {
	db := openTest(t)
	appendBatches(t, db, "job-a", 0, 3, 240) // blocks 0..239, 240..479, 480..719
	n, err := db.AppendSamplesPruning("job-a", []Sample{realisticSample(720)}, at(7))
	if err != nil || n != 0 {
		t.Fatalf("AppendSamplesPruning inside the first block = %d, %v; want 0", n, err)
	}
	wantIndexes(t, "after a bound inside a block", collect(t, db, "job-a", time.Time{}, time.Time{}, false), span(0, 721)...)
	n, err = db.AppendSamplesPruning("job-a", []Sample{realisticSample(721)}, at(240))
	if err != nil || n != 240 {
		t.Fatalf("AppendSamplesPruning at the second block = %d, %v; want 240", n, err)
	}
	wantIndexes(t, "after", collect(t, db, "job-a", time.Time{}, time.Time{}, false), span(240, 722)...)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if n := keyCount(jobSamples(tx, "job-a")); n != 3 {
			t.Errorf("%d blocks, want 3: two of 240 and the two single samples in one", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing to add and nothing old: no error, nothing pruned.
	if n, err := db.AppendSamplesPruning("job-a", nil, at(240)); err != nil || n != 0 {
		t.Fatalf("empty AppendSamplesPruning = %d, %v", n, err)
	}
	if n, err := db.AppendSamplesPruning("job-none", nil, at(7)); err != nil || n != 0 {
		t.Fatalf("AppendSamplesPruning of no job = %d, %v", n, err)
	}
	if _, err := db.AppendSamplesPruning("job-a", nil, time.Time{}); err == nil {
		t.Fatal("zero bound accepted")
	}
	// Everything old: the job's blocks all go.
	if n, err := db.AppendSamplesPruning("job-a", nil, at(1000)); err != nil || n != 482 {
		t.Fatalf("prune all = %d, %v; want 482", n, err)
	}
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 0 {
		t.Fatalf("SampleStats after pruning all = %+v, %v", st, err)
	}
}

// TestDecodeChunkRejects: malformed chunks are errors, never panics or
// huge allocations.
func TestDecodeChunkRejects(t *testing.T) {
	keys, vals := buildChunks([]rawSample{
		{ms: 1000, enc: EncodeSample(nil, realisticSample(0))},
		{ms: 6000, enc: EncodeSample(nil, realisticSample(1))},
	})
	if len(keys) != 1 {
		t.Fatalf("%d chunks, want 1", len(keys))
	}
	good := vals[0]
	if got, err := decodeChunk(nil, keys[0], good); err != nil || len(got) != 2 || got[1].ms != 6000 {
		t.Fatalf("good chunk: %+v, %v", got, err)
	}
	for i := range good {
		if _, err := decodeChunk(nil, keys[0], good[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
	for name, v := range map[string][]byte{
		"trailing":       append(append([]byte(nil), good...), 0),
		"zero count":     {chunkFormat, 0},
		"huge count":     {chunkFormat, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"format 1":       append([]byte{1}, good[1:]...),
		"delta first":    {chunkFormat, 1, 3, 0},
		"zero time step": {chunkFormat, 2, 2, 7, 0, 3, 0},
	} {
		if _, err := decodeChunk(nil, keys[0], v); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := decodeChunk(nil, []byte{1, 2}, good); err == nil {
		t.Error("short key: no error")
	}
}

func FuzzDecodeChunk(f *testing.F) { fuzzRoundTrip(f, buildChunks, decodeChunk) }

// fuzzRoundTrip fuzzes a stored sample format: decode never panics, and
// what decodes survives re-encoding: the same samples come back.
func fuzzRoundTrip(f *testing.F, build func([]rawSample) (keys, vals [][]byte), decode func([]rawSample, []byte, []byte) ([]rawSample, error)) {
	_, vals := build([]rawSample{
		{ms: 1000, enc: EncodeSample(nil, realisticSample(0))},
		{ms: 6000, enc: EncodeSample(nil, realisticSample(1))},
	})
	f.Add(vals[0])
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := decode(nil, millisKey(1000), v)
		if err != nil {
			return
		}
		keys, vals := build(got)
		var back []rawSample
		for i := range keys {
			if back, err = decode(back, keys[i], vals[i]); err != nil {
				t.Fatalf("re-encoded value %d does not decode: %v", i, err)
			}
		}
		if len(back) != len(got) {
			t.Fatalf("%d samples, %d after re-encoding", len(got), len(back))
		}
		for i := range got {
			if back[i].ms != got[i].ms || string(back[i].enc) != string(got[i].enc) {
				t.Fatalf("sample %d changed by re-encoding", i)
			}
		}
	})
}

// TestMigrateSamplesToChunks is the production 1 -> 2 -> 3 steps on a file
// the schema 1 code wrote: every sample is there, as blocks, with a backup of the
// schema 1 file beside it; a second job and an empty job come along.
func TestMigrateSamplesToChunks(t *testing.T) {
	path := writeV1(t)
	db, err := open(path, Options{}, schema{version: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := []Sample{realisticSample(500), realisticSample(501)}
	if err := appendSamplesV1(db, "job-b", b); err != nil {
		t.Fatal(err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error { _, err := writableJobSamples(tx, "job-empty"); return err })
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openAt(t, path)
	defer db.Close()
	requireV1Data(t, db)
	if got := metaString(t, db, metaSchema); got != SchemaVersion {
		t.Errorf("schema_version = %q", got)
	}
	if got := metaString(t, db, metaMigratedFrom); got != "1" {
		t.Errorf("%s = %q", metaMigratedFrom, got)
	}
	wantIndexes(t, "job-b", collect(t, db, "job-b", time.Time{}, time.Time{}, false), 500, 501)
	wantIndexes(t, "cut through chunks", collect(t, db, "job-a", at(4), at(21), true), reversed(span(4, 21))...)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		for _, job := range []string{"job-a", "job-b"} {
			b := jobSamples(tx, job)
			keys := 0
			err := b.ForEach(func(k, v []byte) error {
				keys++
				bv, err := blockAt(b, k, v)
				if err == nil {
					_, err = parseBlockHead(bv)
				}
				if err != nil {
					return fmt.Errorf("%s: key %x is not a block: %w", job, k, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if keys != 1 {
				t.Errorf("%s: %d blocks, want 1", job, keys)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := open(path+".schema1.bak", Options{ReadOnly: true}, schema{version: 1})
	if err != nil {
		t.Fatal(err)
	}
	requireV1Backup(t, old)
	old.Close()
	// New samples follow the migrated ones.
	appendBatches(t, db, "job-a", v1Samples, 1, 12)
	wantIndexes(t, "after append", collect(t, db, "job-a", time.Time{}, time.Time{}, false), span(0, v1Samples+12)...)
}

// TestMigrateRefusesBadSampleKey: a schema 1 bucket with a key that is not a
// time stops the migration; the file stays schema 1, as it was.
func TestMigrateRefusesBadSampleKey(t *testing.T) {
	path := writeV1(t)
	db, err := open(path, Options{}, schema{version: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error { return jobSamples(tx, "job-a").Put([]byte("odd"), []byte{1}) })
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	orig := readFile(t, path)
	db, err = Open(path, Options{})
	if err == nil {
		db.Close()
		t.Fatal("migration over a bad key succeeded")
	}
	for _, want := range []string{"samples-to-chunks", `job "job-a"`, "6f6464", "still schema 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := rawMeta(t, path, metaSchema); got != "1" {
		t.Errorf("schema_version = %q, want 1", got)
	}
	// The backup was taken; the file itself is as it was.
	if string(readFile(t, path)) != string(orig) {
		t.Error("file changed by the failed migration")
	}
}

const envKillV1 = "RASPI_STORE_KILL_V1_CHILD"

// TestSamplesKillV1Child is the child of TestMigrateAfterKill: a schema 1
// writer appending batches the schema 1 way until it is killed.
func TestSamplesKillV1Child(t *testing.T) {
	path := os.Getenv(envKillV1)
	if path == "" {
		t.Skip("helper process for TestMigrateAfterKill")
	}
	db, err := open(path, Options{}, schema{version: 1})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	writeUntilKilled(0, func(b []Sample) error { return appendSamplesV1(db, "job-k", b) })
}

// TestMigrateAfterKill: a schema 1 agent SIGKILLed in the middle of a flush
// leaves a file this build opens, migrates and verifies: bbolt's check is
// clean, every reported batch is there as blocks, no partial batch.
func TestMigrateAfterKill(t *testing.T) {
	killThenMigrate(t, "TestSamplesKillV1Child", envKillV1, "1")
}

// killThenMigrate runs the kill-test child named child (which writes the way
// schema old did, into the file named by env), SIGKILLs it after some
// commits, and opens the file with this build, which migrates it; every
// committed sample must be there.
func killThenMigrate(t *testing.T, child, env, old string) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	for round := range 2 {
		path := testPath(t)
		cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		target := 10 + 17*round
		committed, seen := 0, 0
		sc := bufio.NewScanner(out)
		deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			line := sc.Text()
			if msg, ok := strings.CutPrefix(line, "error "); ok {
				_ = cmd.Process.Kill()
				t.Fatalf("child: %s", msg)
			}
			if v, ok := strings.CutPrefix(line, "committed "); ok {
				committed, _ = strconv.Atoi(v)
				if seen++; seen == target {
					_ = cmd.Process.Kill()
					break
				}
			}
		}
		deadline.Stop()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
			t.Fatalf("child ended with %v after %d commits, want killed", err, seen)
		}
		if got := rawMeta(t, path, metaSchema); got != old {
			t.Fatalf("child wrote schema %q, want %s", got, old)
		}
		n := checkFile(t, path, "job-k", killBatch) // opens with this build: migrates
		if got := rawMeta(t, path, metaSchema); got != SchemaVersion {
			t.Fatalf("after migrating: schema %q", got)
		}
		t.Logf("round %d: killed after %d commits; migrated file holds %d samples", round, seen, n)
		if n < committed {
			t.Fatalf("%d samples after migration, %d were reported committed", n, committed)
		}
	}
}

// TestAppendAfterDamagedChunk: a last chunk that does not decode does not
// stop new samples being stored; scans still report it.
func TestAppendAfterDamagedChunk(t *testing.T) {
	db := openTest(t)
	appendBatches(t, db, "job-a", 0, 1, 6)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return jobSamples(tx, "job-a").Put(millisKey(uint64(at(10).UnixMilli())), []byte{chunkFormat, 1, 0xff})
	})
	if err != nil {
		t.Fatal(err)
	}
	appendBatches(t, db, "job-a", 20, 1, 6)
	wantIndexes(t, "after the damaged chunk", collect(t, db, "job-a", at(20), time.Time{}, false), span(20, 26)...)
	if err := db.ScanSamples("job-a", time.Time{}, time.Time{}, func(Sample) bool { return true }); err == nil ||
		!strings.Contains(err.Error(), at(10).Format(time.RFC3339Nano)) {
		t.Fatalf("full scan over the damaged chunk: %v", err)
	}
}

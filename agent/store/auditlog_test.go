package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// crashCopy is what a kill -9 leaves: db's file and its audit log as they
// are on disk now, copied elsewhere while db stays open (an open copy of
// the same path would wait for db's lock). edit, when set, rewrites the
// log's bytes first, as a power cut or an attacker would.
func crashCopy(t *testing.T, db *DB, edit func(log []byte) []byte) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "state.db")
	for _, p := range []string{db.Path(), auditLogPath(db.Path())} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		to := dst
		if p != db.Path() {
			to = auditLogPath(dst)
			if edit != nil {
				data = edit(data)
			}
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func logLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(auditLogPath(path))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func auditKeysInBolt(t *testing.T, db *DB) int {
	t.Helper()
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = bucket(tx, bucketAudit).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An append is one line of the log, durable before it returns, and leaves
// bbolt alone; every read sees it; a clean close folds it into bbolt.
func TestAuditLogAppendReadFold(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	recs := appendN(t, db, 5)
	if n := auditKeysInBolt(t, db); n != 0 {
		t.Fatalf("%d records in bbolt before any fold, want them in the log only", n)
	}
	lines := logLines(t, path)
	if len(lines) != 5 || !strings.Contains(lines[4], `"hash":"`+recs[4].Hash+`"`) {
		t.Fatalf("log lines = %q", lines)
	}
	if r, err := db.GetAudit(3); err != nil || r.Hash != recs[2].Hash {
		t.Fatalf("GetAudit(3) = %+v, %v", r, err)
	}
	if total, _, _, last, err := db.AuditCounts(); err != nil || total != 5 || last.Seq != 5 {
		t.Fatalf("AuditCounts = %d, last %d, %v", total, last.Seq, err)
	}
	if got, total, err := db.QueryAudit(AuditQuery{Limit: 2}); err != nil || total != 5 || len(got) != 2 || got[0].Seq != 5 {
		t.Fatalf("QueryAudit newest = %+v, %d, %v", got, total, err)
	}
	if got, _, err := db.QueryAudit(AuditQuery{Oldest: true, Limit: 1}); err != nil || got[0].Seq != 1 {
		t.Fatalf("QueryAudit oldest = %+v, %v", got, err)
	}
	if v := requireOK(t, db); v.Records != 5 || v.HeadSeq != 5 || v.StoredCount != 5 {
		t.Fatalf("verify = %+v", v)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(auditLogPath(path)); err != nil || fi.Size() != 0 {
		t.Fatalf("log after a clean close: %v, %v; want empty", fi, err)
	}
	db = openAt(t, path)
	defer db.Close()
	if n := auditKeysInBolt(t, db); n != 5 {
		t.Fatalf("%d records in bbolt after the fold, want 5", n)
	}
	if v := requireOK(t, db); v.Records != 5 || v.HeadSeq != 5 || v.StoredCount != 5 {
		t.Fatalf("verify after fold = %+v", v)
	}
	if r, err := db.AppendAudit(sampleRecord(6)); err != nil || r.Seq != 6 || r.PrevHash != recs[4].Hash {
		t.Fatalf("append after fold: %+v, %v", r, err)
	}
}

// The log folds itself once it passes auditLogFoldAt, and the chain runs
// across folds unbroken.
func TestAuditLogFoldsWhenFull(t *testing.T) {
	db := openTest(t)
	n := auditLogFoldAt/500 + 20 // records are ~0.5 KB
	appendN(t, db, n)
	if db.log.size >= auditLogFoldAt {
		t.Fatalf("log holds %d bytes, past the %d it folds at", db.log.size, auditLogFoldAt)
	}
	if auditKeysInBolt(t, db) == 0 {
		t.Fatal("nothing folded into bbolt")
	}
	if v := requireOK(t, db); v.Records != n || v.StoredCount != n {
		t.Fatalf("verify = %+v", v)
	}
}

// kill -9 mid-append tears at most the last line, whose append never
// returned: reopening drops it before the next append, so it is never
// sealed into the chain, and every record that was answered is there.
func TestAuditLogTornLastLine(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 4)
	torn := `{"seq":5,"time":"2025-03-01T12:05:00Z","correlation_id":"req-0`
	path := crashCopy(t, db, func(b []byte) []byte { return append(b, torn...) })

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := requireOK(t, ro); v.Records != 4 {
		t.Fatalf("read-only verify = %+v", v)
	}
	ro.Close()
	if data, _ := os.ReadFile(auditLogPath(path)); !bytes.HasSuffix(data, []byte(torn)) {
		t.Fatal("a read-only open changed the log")
	}

	db2 := openAt(t, path)
	defer db2.Close()
	r, err := db2.AppendAudit(sampleRecord(5))
	if err != nil || r.Seq != 5 || r.PrevHash != recs[3].Hash {
		t.Fatalf("append after the crash: %+v, %v", r, err)
	}
	if v := requireOK(t, db2); v.Records != 5 {
		t.Fatalf("verify = %+v", v)
	}
	db2.log.mu.Lock()
	db2.foldLocked()
	db2.log.mu.Unlock()
	if raw := storedRaw(t, db2, 5); bytes.Contains(raw, []byte("req-0`")) || !bytes.HasPrefix(raw, []byte(`{"seq":5,`)) {
		t.Fatalf("record 5 = %s", raw)
	}
	requireOK(t, db2)
}

// A line edited, cut out of the middle, or cut off the end of the log is
// found like the same change to records in bbolt: by the chain, or, for a
// cut tail (as for a tail cut with its head), by the witness.
func TestAuditLogTamper(t *testing.T) {
	db := openTest(t)
	recs := appendN(t, db, 6)
	w := witnessOf(recs)
	edit := func(fn func(lines [][]byte) [][]byte) func([]byte) []byte {
		return func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte("\n"))
			return bytes.Join(fn(lines[:len(lines)-1]), nil)
		}
	}
	cases := []struct {
		name string
		fn   func(lines [][]byte) [][]byte
		kind string
		seq  uint64
	}{
		{"edit", func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"gpio.read"`), []byte(`"gpio.readX"`), 1)
			return l
		}, ProblemHash, 3},
		{"cut middle", func(l [][]byte) [][]byte { return append(l[:2:2], l[3:]...) }, ProblemGap, 3},
		{"garbage line", func(l [][]byte) [][]byte { l[1] = []byte("not json\n"); return l }, ProblemDecode, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := crashCopy(t, db, edit(c.fn))
			for _, ro := range []bool{true, false} {
				d, err := Open(p, Options{ReadOnly: ro})
				if err != nil {
					t.Fatal(err)
				}
				v := mustVerify(t, d)
				if v.OK || kinds(v)[c.kind] == "" || v.Problems[0].Seq != c.seq {
					t.Fatalf("read-only %v: problems = %+v, want %s at %d", ro, v.Problems, c.kind, c.seq)
				}
				// Writable, the open folded it: the evidence is in bbolt now.
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	t.Run("cut tail", func(t *testing.T) {
		p := crashCopy(t, db, edit(func(l [][]byte) [][]byte { return l[:4] }))
		d := openAt(t, p)
		defer d.Close()
		if v := verifyWith(t, d, w); v.OK || !strings.Contains(kinds(v)[ProblemWitnessMissing], "records 5-6 missing") {
			t.Fatalf("problems = %+v", v.Problems)
		}
		// The next record follows the witness, keeping the cut visible.
		r, err := d.AppendAuditAfter(sampleRecord(7), w.head())
		if err != nil || r.Seq != 7 {
			t.Fatalf("append after the cut: %+v, %v", r, err)
		}
		if v := mustVerify(t, d); v.OK || !strings.Contains(kinds(v)[ProblemGap], "records 5..6 missing") {
			t.Fatalf("problems = %+v", v.Problems)
		}
	})
}

// Retention folds the log first, so it prunes records however recent the
// fold, and the witness still learns the checkpoint first.
func TestAuditLogPrune(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 10)
	var cp WitnessPoint
	n, err := db.PruneAuditWitnessed(baseTime.Add(5*time.Minute), func(p WitnessPoint) error { cp = p; return nil })
	if err != nil || n != 4 || cp.Seq != 4 {
		t.Fatalf("prune = %d, %v, checkpoint %d", n, err, cp.Seq)
	}
	if len(db.log.entries) != 0 {
		t.Fatal("log not folded before pruning")
	}
	if v := requireOK(t, db); v.Records != 6 || v.CheckpointSeq != 4 {
		t.Fatalf("verify = %+v", v)
	}
	// A witness that refuses leaves everything in place.
	n, err = db.PruneAuditWitnessed(baseTime.Add(8*time.Minute), func(WitnessPoint) error { return errors.New("helper down") })
	if err == nil || n != 0 {
		t.Fatalf("prune with a refusing witness = %d, %v", n, err)
	}
}

// A read-only open refuses to append: the log is read, never written.
func TestAuditLogReadOnlyRefusesAppend(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 2)
	p := crashCopy(t, db, nil)
	ro, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	before, _ := os.ReadFile(auditLogPath(p))
	if _, err := ro.AppendAudit(sampleRecord(3)); err == nil {
		t.Fatal("read-only append succeeded")
	}
	if after, _ := os.ReadFile(auditLogPath(p)); !bytes.Equal(before, after) {
		t.Fatal("read-only append changed the log")
	}
}

package store

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestOpenCreatesPrivateFileAndBuckets(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	defer db.Close()

	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %o, want 700", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode = %o, want 600", got)
	}
	size, err := db.Size()
	if err != nil || size != fi.Size() || size == 0 {
		t.Errorf("Size() = %d, %v; stat says %d", size, err, fi.Size())
	}
	v, err := db.GetMeta(metaSchema)
	if err != nil || string(v) != SchemaVersion {
		t.Errorf("schema_version = %q, %v", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"samples", "audit", "jobs", "tokens", "meta"} {
			if tx.Bucket([]byte(name)) == nil {
				t.Errorf("bucket %s missing", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenTightensWidenedMode(t *testing.T) {
	path := testPath(t)
	openAt(t, path).Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	db := openAt(t, path)
	defer db.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode after reopen = %o, want 600", got)
	}
}

func TestOpenLocked(t *testing.T) {
	path := testPath(t)
	owner := openAt(t, path)
	defer owner.Close()

	for _, o := range []Options{
		{ReadOnly: true, Timeout: 200 * time.Millisecond},
		{Timeout: 200 * time.Millisecond},
		{ReadOnly: true, Timeout: -1},
	} {
		// Open gives up by its own timeout: the minute here only stops a
		// hang (bbolt waits forever without one).
		type opened struct {
			db  *DB
			err error
		}
		done := make(chan opened, 1)
		go func() {
			db, err := Open(path, o)
			done <- opened{db, err}
		}()
		var got opened
		select {
		case got = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("Open(%+v) while locked still waiting after a minute", o)
		}
		if got.err == nil {
			got.db.Close()
			t.Fatalf("Open(%+v) while locked succeeded", o)
		}
		want := fmt.Sprintf("(waited %s)", max(o.Timeout, time.Nanosecond))
		if !errors.Is(got.err, ErrLocked) || !strings.Contains(got.err.Error(), want) {
			t.Errorf("Open(%+v) error = %v, want ErrLocked %s", o, got.err, want)
		}
	}
}

func TestReadOnlyOfStoppedAgent(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	appendN(t, db, 5)
	if err := db.PutMeta("agent.version", []byte("1.2.3")); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() {
		t.Error("ReadOnly() = false")
	}
	v := requireOK(t, ro)
	if v.Records != 5 || v.HeadSeq != 5 {
		t.Errorf("verify = %+v", v)
	}
	recs, total, err := ro.QueryAudit(AuditQuery{Limit: 2})
	if err != nil || total != 5 || len(recs) != 2 || recs[0].Seq != 5 {
		t.Errorf("QueryAudit = %d recs, total %d, %v", len(recs), total, err)
	}
	if got, _ := ro.GetMeta("agent.version"); string(got) != "1.2.3" {
		t.Errorf("GetMeta = %q", got)
	}
	// A second reader may share the file.
	ro2, err := Open(path, Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("second read-only open: %v", err)
	}
	ro2.Close()

	if _, err := ro.AppendAudit(sampleRecord(6)); err == nil {
		t.Error("AppendAudit on read-only store succeeded")
	}
	if err := ro.PutMeta("x", []byte("y")); err == nil {
		t.Error("PutMeta on read-only store succeeded")
	}
}

func TestReadOnlyMissingFile(t *testing.T) {
	path := testPath(t)
	_, err := Open(path, Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open read-only of missing file: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only open created the directory: %v", err)
	}
}

func TestMeta(t *testing.T) {
	db := openTest(t)
	if v, err := db.GetMeta("absent"); v != nil || err != nil {
		t.Errorf("GetMeta(absent) = %q, %v; want nil, nil", v, err)
	}
	if err := db.PutMeta("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := db.PutMeta("k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := db.GetMeta("k"); err != nil || !bytes.Equal(v, []byte("v2")) {
		t.Errorf("GetMeta(k) = %q, %v", v, err)
	}
	if err := db.PutMeta("empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := db.GetMeta("empty"); err != nil || v == nil || len(v) != 0 {
		t.Errorf("GetMeta(empty) = %#v, %v; want empty non-nil", v, err)
	}
	for _, k := range []string{metaAuditHead, metaAuditCheckpoint, "audit_anything", metaSchema} {
		if err := db.PutMeta(k, []byte("x")); !errors.Is(err, ErrReservedKey) {
			t.Errorf("PutMeta(%q) = %v, want ErrReservedKey", k, err)
		}
	}
	if err := db.PutMeta("", []byte("x")); err == nil {
		t.Error("PutMeta with empty key succeeded")
	}
}

func TestMaxSize(t *testing.T) {
	db, err := Open(testPath(t), Options{MaxSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	big := bytes.Repeat([]byte("x"), 64<<10)
	var putErr error
	for i := 0; i < 16 && putErr == nil; i++ {
		putErr = db.PutMeta("blob"+string(rune('a'+i)), big)
	}
	if putErr == nil {
		t.Fatal("file grew past MaxSize without an error")
	}
	if size, _ := db.Size(); size > 256<<10 {
		t.Errorf("file is %d bytes, over MaxSize", size)
	}
	// Reads still work after the refusal.
	if v, err := db.GetMeta("bloba"); err != nil || len(v) != len(big) {
		t.Errorf("GetMeta after MaxSize refusal: %d bytes, %v", len(v), err)
	}
}

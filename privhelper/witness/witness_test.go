package witness

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func hash(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func TestWitnessGrowsAndRefusesRewind(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, w, err := l.Witness(3, hash('a')); err != nil || !w {
		t.Fatalf("first head: written %v, %v", w, err)
	}
	if _, w, err := l.Witness(3, hash('a')); err != nil || w {
		t.Fatalf("same head again: written %v, %v; want accepted without a line", w, err)
	}
	for _, bad := range []struct {
		seq  uint64
		hash string
	}{{2, hash('b')}, {3, hash('b')}, {1, hash('a')}} {
		head, w, err := l.Witness(bad.seq, bad.hash)
		if !errors.Is(err, ErrRewind) || w || head.Seq != 3 || head.Hash != hash('a') {
			t.Fatalf("Witness(%d, %s) = %+v, %v, %v; want ErrRewind and head 3", bad.seq, bad.hash, head, w, err)
		}
	}
	for _, bad := range []string{"", "sha256:xyz", hash('A'), "md5:" + strings.Repeat("a", 64)} {
		if _, _, err := l.Witness(9, bad); err == nil || errors.Is(err, ErrRewind) {
			t.Fatalf("hash %q accepted or called a rewind: %v", bad, err)
		}
	}
	if _, w, err := l.Witness(10, hash('c')); err != nil || !w {
		t.Fatalf("seq 10: %v, %v", w, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(Path(dir))
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("witness file mode = %v, %v; want 0644", st.Mode(), err)
	}
	f, err := Read(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Points) != 2 || f.Points[0].Seq != 3 || f.Points[1].Seq != 10 || f.Points[1].Hash != hash('c') || f.Bad != 0 || f.Torn {
		t.Fatalf("read back %+v", f)
	}
	// Reopened, the head is what the file says: no rewind after a restart.
	l2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, _, err := l2.Witness(9, hash('d')); !errors.Is(err, ErrRewind) {
		t.Fatalf("rewind after reopening: %v", err)
	}
}

// A line cut by power loss is dropped by readers (the witness lags, which is
// not tampering) and removed by the helper before it appends again.
func TestTornLine(t *testing.T) {
	dir := t.TempDir()
	good := "5 " + hash('a') + " 2026-11-24T22:00:00Z\n"
	if err := os.WriteFile(Path(dir), []byte(good+"6 sha256:abab"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Read(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Torn || f.Bad != 0 || len(f.Points) != 1 || f.Points[0].Seq != 5 {
		t.Fatalf("read %+v", f)
	}
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Witness(6, hash('b')); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, _ = Read(Path(dir))
	if f.Torn || f.Bad != 0 || len(f.Points) != 2 || f.Points[1].Seq != 6 {
		t.Fatalf("after the next append: %+v", f)
	}
}

func TestReadBadLines(t *testing.T) {
	dir := t.TempDir()
	body := "# comment\n5 " + hash('a') + " 2026-11-24T22:00:00Z\nnonsense\n4 " + hash('b') + " 2026-11-24T22:00:01Z\n7 " + hash('c') + " 2026-11-24T22:00:02Z\n"
	os.WriteFile(Path(dir), []byte(body), 0o644)
	f, err := Read(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	head, ok := f.Head()
	if f.Bad != 2 || len(f.Points) != 2 || !ok || head.Seq != 7 {
		t.Fatalf("read %+v", f)
	}
	if _, err := Read(Path(t.TempDir())); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Checkpoint(1, hash('a')); !errors.Is(err, ErrRewind) {
		t.Fatalf("checkpoint with no head: %v", err)
	}
	l.Witness(10, hash('9'))
	if _, _, err := l.Checkpoint(11, hash('8')); !errors.Is(err, ErrRewind) {
		t.Fatalf("checkpoint beyond the head: %v", err)
	}
	if _, _, err := l.Checkpoint(10, hash('8')); !errors.Is(err, ErrRewind) {
		t.Fatalf("checkpoint at the head with another hash: %v", err)
	}
	if _, w, err := l.Checkpoint(4, hash('d')); err != nil || !w {
		t.Fatalf("checkpoint 4: %v %v", w, err)
	}
	if _, w, err := l.Checkpoint(4, hash('d')); err != nil || w {
		t.Fatalf("checkpoint 4 again: %v %v", w, err)
	}
	if _, _, err := l.Checkpoint(3, hash('c')); !errors.Is(err, ErrRewind) {
		t.Fatalf("checkpoint going back: %v", err)
	}
	if _, _, err := l.Checkpoint(4, hash('e')); !errors.Is(err, ErrRewind) {
		t.Fatalf("checkpoint 4 rehashed: %v", err)
	}
	l.Close()
	f, err := Read(Path(dir))
	if err != nil {
		t.Fatal(err)
	}
	cp, ok := f.Checkpoint()
	head, _ := f.Head()
	if !ok || cp.Seq != 4 || cp.Hash != hash('d') || head.Seq != 10 || len(f.Points) != 1 || f.Bad != 0 {
		t.Fatalf("read %+v", f)
	}
	l2, _ := Open(dir)
	defer l2.Close()
	if got := l2.CheckpointPoint(); got.Seq != 4 {
		t.Fatalf("reopened checkpoint = %+v", got)
	}
}

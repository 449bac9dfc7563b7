// Package witness is the audit witness: an append-only file, kept by the
// root helper in its own state directory, of the audit chain's head as the
// agent reported it after each append. The agent's user can read the file but
// not write it, so a chain cut, rewritten or wiped by that user no longer
// matches what the witness saw.
//
// One line per update: "<seq> <hash> <time>\n" for a head, and
// "checkpoint <seq> <hash> <time>\n" when retention pruned the chain up to
// and including that record, for example
//
//	57 sha256:ab12… 2026-11-24T22:10:22Z
//	checkpoint 40 sha256:cd34… 2026-11-25T03:00:00Z
//
// Sequence numbers only grow: the helper refuses a head that goes backwards,
// or a different hash for the head it already holds, so the agent's user
// cannot rewind the witness through the helper either. A checkpoint must be
// at or behind the head and never go backwards. Witnessed checkpoints let a
// reader tell retention from a file edit that deletes old records and
// forges a checkpoint: records the witness saw that are gone without a
// witnessed checkpoint are reported missing.
//
// The helper does not fsync each line. The agent sends a head only after
// bbolt has made the record durable, so a line lost on power loss only makes
// the witness lag the chain, which readers accept; a witness ahead of the
// chain, or disagreeing with it, is what tampering looks like. The package
// is stdlib-only: the helper links it and must not link bbolt or MCP.
package witness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FileName is the witness file's name inside the helper's state directory.
const FileName = "audit.witness"

// Path is the witness file in the helper's state directory dir.
func Path(dir string) string { return filepath.Join(dir, FileName) }

// Point is one witnessed head: a record's sequence number and hash.
type Point struct {
	Seq  uint64    `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time,omitzero"` // when the helper wrote the line
}

// ValidHash reports whether h has the audit chain's hash form,
// "sha256:" and 64 lower-case hex digits.
func ValidHash(h string) bool {
	hex, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Short is a hash shortened for messages: "ab12cd34…".
func Short(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// checkpointWord starts a checkpoint line.
const checkpointWord = "checkpoint"

func parseLine(line string) (p Point, checkpoint bool, err error) {
	f := strings.Fields(line)
	if len(f) == 4 && f[0] == checkpointWord {
		checkpoint, f = true, f[1:]
	}
	p, err = parseFields(f)
	return p, checkpoint, err
}

func parseFields(f []string) (Point, error) {
	if len(f) != 3 {
		return Point{}, fmt.Errorf("want 3 fields, got %d", len(f))
	}
	seq, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || seq == 0 {
		return Point{}, fmt.Errorf("seq %q is not a positive integer", f[0])
	}
	if !ValidHash(f[1]) {
		return Point{}, fmt.Errorf("hash %q is not sha256:<hex>", f[1])
	}
	t, err := time.Parse(time.RFC3339Nano, f[2])
	if err != nil {
		return Point{}, fmt.Errorf("time %q: %v", f[2], err)
	}
	return Point{Seq: seq, Hash: f[1], Time: t}, nil
}

func formatLine(p Point, checkpoint bool) string {
	line := fmt.Sprintf("%d %s %s\n", p.Seq, p.Hash, p.Time.UTC().Format(time.RFC3339Nano))
	if checkpoint {
		line = checkpointWord + " " + line
	}
	return line
}

// File is a witness file as read.
type File struct {
	Path string
	// Points are the readable head lines, in file order: strictly growing seq.
	Points []Point
	// Checkpoints are the readable checkpoint lines, in file order.
	Checkpoints []Point
	// Bad counts unreadable lines and lines whose seq does not grow.
	// Only root writes the file, so they come from a crash or the disk.
	Bad int
	// Torn is set when the last line had no newline: a write cut by power
	// loss. It is not counted in Bad, and the helper removes it at start.
	Torn bool
}

// Head is the last witnessed point; ok is false when there is none.
func (f File) Head() (p Point, ok bool) {
	if len(f.Points) == 0 {
		return Point{}, false
	}
	return f.Points[len(f.Points)-1], true
}

// Checkpoint is the last witnessed checkpoint; ok is false when there is none.
func (f File) Checkpoint() (p Point, ok bool) {
	if len(f.Checkpoints) == 0 {
		return Point{}, false
	}
	return f.Checkpoints[len(f.Checkpoints)-1], true
}

// Read reads the witness file at path. A file that does not exist reads as
// an error wrapping fs.ErrNotExist, so callers can tell "never witnessed"
// from "empty".
func Read(path string) (File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return File{Path: path}, fmt.Errorf("witness: %w", err)
	}
	f := parse(b)
	f.Path = path
	return f, nil
}

func parse(b []byte) File {
	var f File
	if n := len(b); n > 0 && b[n-1] != '\n' {
		f.Torn = true
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 256), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, checkpoint, err := parseLine(line)
		list := &f.Points
		if checkpoint {
			list = &f.Checkpoints
		}
		if err != nil || (len(*list) > 0 && p.Seq < (*list)[len(*list)-1].Seq) || (!checkpoint && len(f.Points) > 0 && p.Seq == f.Points[len(f.Points)-1].Seq) {
			f.Bad++
			continue
		}
		*list = append(*list, p)
	}
	if sc.Err() != nil {
		f.Bad++
	}
	return f
}

// ErrRewind is wrapped by Log.Witness when the head would go backwards or
// change its hash: what the witness saw cannot be taken back.
var ErrRewind = errors.New("witness: head may not go backwards")

// Log is the helper's writer of the witness file. It is safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	path string
	head Point
	cp   Point // last witnessed checkpoint
	now  func() time.Time
}

// Open opens (creating) the witness file in dir, mode 0644, and reads its
// head. A torn last line, left by a power loss in the middle of a write, is
// cut off so the next line starts on its own.
func Open(dir string) (*Log, error) {
	path := Path(dir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	// The helper runs with UMask=0077; readers (the agent, `raspi-mcp
	// audit verify`) need the file world-readable, and nobody but its
	// owner may write it.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return nil, fmt.Errorf("witness: chmod %s: %w", path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("witness: read %s: %w", path, err)
	}
	parsed := parse(b)
	if parsed.Torn {
		if err := f.Truncate(int64(bytes.LastIndexByte(b, '\n') + 1)); err != nil {
			f.Close()
			return nil, fmt.Errorf("witness: cut torn line of %s: %w", path, err)
		}
	}
	l := &Log{f: f, path: path, now: time.Now}
	l.head, _ = parsed.Head()
	l.cp, _ = parsed.Checkpoint()
	return l, nil
}

// CheckpointPoint is the last witnessed checkpoint (zero when none).
func (l *Log) CheckpointPoint() Point {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cp
}

// Path is the file written.
func (l *Log) Path() string { return l.path }

// Head is the last witnessed point (zero when none).
func (l *Log) Head() Point {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head
}

// Witness records p as the chain's head. A seq beyond the head appends a
// line; the head itself again is accepted without writing; a seq behind the
// head, or the head's seq with another hash, is refused with an error
// wrapping ErrRewind and the file is left alone. It returns the head after
// the call and whether a line was written.
func (l *Log) Witness(seq uint64, hash string) (Point, bool, error) {
	if seq == 0 || !ValidHash(hash) {
		return Point{}, false, fmt.Errorf("witness: seq %d hash %q: want seq > 0 and sha256:<hex>", seq, hash)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case seq < l.head.Seq:
		return l.head, false, fmt.Errorf("%w: seq %d is behind the witnessed seq %d", ErrRewind, seq, l.head.Seq)
	case seq == l.head.Seq && hash != l.head.Hash:
		return l.head, false, fmt.Errorf("%w: seq %d was witnessed with hash %s, not %s", ErrRewind, seq, l.head.Hash, hash)
	case seq == l.head.Seq:
		return l.head, false, nil
	}
	p, err := l.write(seq, hash, false)
	if err != nil {
		return l.head, false, err
	}
	l.head = p
	return p, true, nil
}

// Checkpoint records that retention pruned the chain up to and including
// seq, whose hash is hash. seq must be at or behind the witnessed head (with
// the head's hash when equal) and not behind the last checkpoint; the same
// checkpoint again is accepted without writing. A refusal wraps ErrRewind.
// It returns the checkpoint after the call and whether a line was written.
func (l *Log) Checkpoint(seq uint64, hash string) (Point, bool, error) {
	if seq == 0 || !ValidHash(hash) {
		return Point{}, false, fmt.Errorf("witness: checkpoint seq %d hash %q: want seq > 0 and sha256:<hex>", seq, hash)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case seq > l.head.Seq:
		return l.cp, false, fmt.Errorf("%w: checkpoint %d is beyond the witnessed head %d", ErrRewind, seq, l.head.Seq)
	case seq == l.head.Seq && hash != l.head.Hash:
		return l.cp, false, fmt.Errorf("%w: checkpoint %d has hash %s, the witnessed head %s", ErrRewind, seq, hash, l.head.Hash)
	case seq < l.cp.Seq:
		return l.cp, false, fmt.Errorf("%w: checkpoint %d is behind the witnessed checkpoint %d", ErrRewind, seq, l.cp.Seq)
	case seq == l.cp.Seq && hash != l.cp.Hash:
		return l.cp, false, fmt.Errorf("%w: checkpoint %d was witnessed with hash %s, not %s", ErrRewind, seq, l.cp.Hash, hash)
	case seq == l.cp.Seq:
		return l.cp, false, nil
	}
	p, err := l.write(seq, hash, true)
	if err != nil {
		return l.cp, false, err
	}
	// Unlike a head, a checkpoint is synced: the agent prunes only after
	// this returns, so a checkpoint lost on power loss could make legitimate
	// retention look like deleted records. Pruning is rare, so this costs
	// the SD card next to nothing.
	if err := l.f.Sync(); err != nil {
		return l.cp, false, fmt.Errorf("witness: sync %s: %w", l.path, err)
	}
	l.cp = p
	return p, true, nil
}

// write appends one line. The caller holds mu.
func (l *Log) write(seq uint64, hash string, checkpoint bool) (Point, error) {
	p := Point{Seq: seq, Hash: hash, Time: l.now().UTC().Truncate(time.Millisecond)}
	// One write of one short line to an O_APPEND file: it lands whole or,
	// on power loss, as a torn tail that Open removes. No fsync: see the
	// package comment for why a lost line is harmless.
	if _, err := l.f.WriteString(formatLine(p, checkpoint)); err != nil {
		return Point{}, fmt.Errorf("witness: write %s: %w", l.path, err)
	}
	return p, nil
}

// Close syncs and closes the file: a clean stop keeps every line.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	serr := l.f.Sync()
	if err := l.f.Close(); err != nil {
		return err
	}
	return serr
}

package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Errors a caller may want to tell apart: both are about the machine's
// setup, not about the query, and both have a fix the owner can apply.
var (
	// ErrNotReadable: the process may not read the system journal.
	ErrNotReadable = errors.New("journal: not readable")
	// ErrNoJournal: journalctl found no journal files at all.
	ErrNoJournal = errors.New("journal: no journal files were found")
)

// maxStderr bounds what is kept of journalctl's stderr for error messages.
const maxStderr = 16 << 10

// waitDelay bounds Wait after journalctl was killed, in case something
// else still holds its pipes.
const waitDelay = 2 * time.Second

// Journalctl reads the journal by running journalctl. Path "" looks
// journalctl up in PATH.
type Journalctl struct {
	Path string
}

var _ Reader = Journalctl{}

// Query runs journalctl with Args(q) and streams its stdout into Parse;
// once Parse has what it needs journalctl is killed, so a query never reads
// more of the journal than its answer needs. journalctl's environment is
// minimal (no pager, no colours, C locale) so its behaviour and messages do
// not depend on the caller's.
func (j Journalctl) Query(ctx context.Context, q Query) (Result, error) {
	if err := q.Validate(); err != nil {
		return Result{}, err
	}
	bin := j.Path
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("journalctl"); err != nil {
			return Result{}, fmt.Errorf("journal: journalctl not found (is systemd installed?): %w", err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(runCtx, bin, Args(q)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C.UTF-8", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=", "SYSTEMD_LOG_COLOR=0"}
	cmd.WaitDelay = waitDelay
	stderr := &capBuffer{max: maxStderr}
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, fmt.Errorf("journal: %s: %w", bin, err)
	}
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("journal: start %s: %w", bin, err)
	}
	out := &eofReader{r: pipe}
	res, perr := Parse(out, q)
	if !out.eof {
		// Parse has enough (or failed): journalctl may be blocked writing.
		stop()
	}
	werr := cmd.Wait()
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("journal: journalctl: %w", err)
	}
	if err := stderrProblem(stderr.String()); err != nil {
		return Result{}, err
	}
	if werr != nil && out.eof {
		return Result{}, fmt.Errorf("journal: %s %s: %w%s", bin, strings.Join(Args(q), " "), werr, stderrTail(stderr.String()))
	}
	if perr != nil {
		return Result{}, perr
	}
	return res, nil
}

// stderrProblem recognises journalctl's notices about permissions and
// missing journals. journalctl exits 0 in both cases and just prints
// fewer (or no) entries; for an agent that needs the system journal, that
// silence would be a wrong answer, so it becomes an error saying what to do.
func stderrProblem(stderr string) error {
	switch {
	case strings.Contains(stderr, "insufficient permissions"),
		strings.Contains(stderr, "not seeing messages from other users"),
		strings.Contains(stderr, "Permission denied"):
		return fmt.Errorf("%w by uid %d: add the user to group systemd-journal (or adm)%s", ErrNotReadable, os.Getuid(), stderrTail(stderr))
	case strings.Contains(stderr, "No journal files were found"):
		return fmt.Errorf("%w: is systemd-journald running?%s", ErrNoJournal, stderrTail(stderr))
	}
	return nil
}

// stderrTail is the first lines of journalctl's stderr for an error message.
func stderrTail(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return " (journalctl: " + strings.Join(lines, "; ") + ")"
}

// eofReader records whether r reached the end, which tells Query whether
// journalctl finished writing (so its exit status means something) or has
// to be killed.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.eof = true
	}
	return n, err
}

// capBuffer keeps the first max bytes written to it and drops the rest;
// os/exec copies stderr into it from its own goroutine.
type capBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

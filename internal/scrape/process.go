package scrape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// Process is the Renderer a serving agent uses: the exporter binary
// (raspi-mcp-exporter, whose Serve renders with the client library) as a
// child process, started at the first scrape and kept for the next ones,
// started again at the next scrape if it died. It answers one scrape at a
// time; a scrape waits for its turn and its answer no longer than its
// context and exchangeTimeout allow, so a stuck child costs a failed
// scrape, never a hung one. The child has an empty environment, its own
// process group (a terminal's ^C is the agent's to handle) and, on Linux,
// dies with the agent; it also exits when its stdin closes.
type Process struct {
	bin    string
	stderr io.Writer     // the child's stderr; nil discards it
	grace  time.Duration // closeGrace; a test waits longer

	turn chan struct{} // held by the one exchange under way

	mu     sync.Mutex
	closed bool
	child  *child // nil before the first scrape and after one failed
}

// exchangeTimeout bounds one request and its answer. Rendering a Pi's
// scrape takes milliseconds; this only ends a child that stopped answering.
const exchangeTimeout = 20 * time.Second

// closeGrace is how long Close lets the child exit by itself after its
// stdin closed before killing it.
const closeGrace = 3 * time.Second

// NewProcess renders with the exporter binary bin; the child's stderr goes
// to stderr (nil: discarded).
func NewProcess(bin string, stderr io.Writer) *Process {
	return &Process{bin: bin, stderr: stderr, grace: closeGrace, turn: make(chan struct{}, 1)}
}

// Render sends s to the child and returns its page. A child that had
// answered before and fails now may have died in between (killed, out of
// memory), so a fresh one gets a second try; a fresh one that fails is the
// answer.
func (p *Process) Render(ctx context.Context, accept string, s *Snapshot) (Page, error) {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return Page{}, fmt.Errorf("scrape: waiting for the scrape before this one: %w", ctx.Err())
	}
	defer func() { <-p.turn }()
	for {
		c, err := p.running()
		if err != nil {
			return Page{}, err
		}
		page, errMsg, err := c.exchange(ctx, accept, s)
		if err == nil {
			if errMsg != "" {
				return Page{}, fmt.Errorf("scrape: %s: %s", p.bin, errMsg)
			}
			return page, nil
		}
		p.drop(c)
		if !c.served || ctx.Err() != nil {
			return Page{}, err
		}
	}
}

// Close stops the child, if one runs, and refuses every later Render: the
// agent is stopping.
func (p *Process) Close() error {
	p.mu.Lock()
	p.closed = true
	c := p.child
	p.child = nil
	p.mu.Unlock()
	if c != nil {
		c.stop(p.grace)
	}
	return nil
}

// Pid is the running child's process id, 0 when none runs.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.child == nil {
		return 0
	}
	return p.child.cmd.Process.Pid
}

// running returns the child, starting one if none runs.
func (p *Process) running() (*child, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("scrape: the exporter is closed: the agent is stopping")
	}
	if p.child != nil {
		select {
		case <-p.child.done:
			go p.child.stop(0) // gone between scrapes; collect its pipes
			p.child = nil
		default:
			return p.child, nil
		}
	}
	c, err := startChild(p.bin, p.stderr)
	if err != nil {
		return nil, err
	}
	p.child = c
	return c, nil
}

// drop forgets c and kills it.
func (p *Process) drop(c *child) {
	p.mu.Lock()
	if p.child == c {
		p.child = nil
	}
	p.mu.Unlock()
	c.stop(0)
}

// child is one running exporter process.
type child struct {
	bin  string
	cmd  *exec.Cmd
	in   *os.File // the child's stdin
	out  *os.File // the child's stdout
	r    *bufio.Reader
	done chan struct{} // closed once it has exited
	err  error         // how it exited, once done is closed

	// Touched only by the exchange under way.
	fams   []Family // the table it was sent
	served bool     // it answered at least once
	wbuf   []byte
	rbuf   []byte

	once sync.Once
}

func startChild(bin string, stderr io.Writer) (*child, error) {
	if bin == "" {
		return nil, errors.New("scrape: no exporter binary to start")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("scrape: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("scrape: pipe: %w", err)
	}
	cmd := exec.Command(bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.Env = []string{} // nothing of the agent's: not its NOTIFY_SOCKET, not its secrets
	cmd.SysProcAttr = childAttr()
	cmd.WaitDelay = time.Second // its stderr copy, should anything hold the pipe
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("scrape: starting %s: %w", bin, err)
	}
	c := &child{bin: bin, cmd: cmd, in: inW, out: outR, r: bufio.NewReaderSize(outR, 64<<10), done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exchange sends one request and reads the answer: the page and the
// renderer's error message, or err when the pipe failed and the child is
// no longer to be trusted.
func (c *child) exchange(ctx context.Context, accept string, s *Snapshot) (Page, string, error) {
	deadline := time.Now().Add(exchangeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.in.SetWriteDeadline(deadline)
	_ = c.out.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() {
		now := time.Now()
		_ = c.in.SetWriteDeadline(now)
		_ = c.out.SetReadDeadline(now)
	})
	defer stop()

	withFams := c.fams == nil || !SameFamilies(c.fams, s.Families)
	c.wbuf = appendRequest(c.wbuf[:0], accept, s, withFams)
	if _, err := c.in.Write(c.wbuf); err != nil {
		return Page{}, "", c.failed(ctx, "sending the scrape to", err)
	}
	if withFams {
		c.fams = slices.Clone(s.Families)
		if c.fams == nil {
			c.fams = []Family{}
		}
	}
	payload, err := readFrame(c.r, c.rbuf)
	if err != nil {
		return Page{}, "", c.failed(ctx, "reading the answer of", err)
	}
	c.rbuf = payload[:cap(payload)][:0]
	page, errMsg, err := decodeResponse(payload)
	if err != nil {
		return Page{}, "", c.failed(ctx, "reading the answer of", err)
	}
	c.served = true
	return page, errMsg, nil
}

// failed says in one line why the exchange failed: the context, a child
// that exited (and how), one that did not answer in time, or the pipe.
func (c *child) failed(ctx context.Context, doing string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("scrape: %s %s: %w", doing, c.bin, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			// The pipe's deadline was the context's, and fired first.
			return fmt.Errorf("scrape: %s %s: %w", doing, c.bin, context.DeadlineExceeded)
		}
		return fmt.Errorf("scrape: %s %s: no answer within %s", doing, c.bin, exchangeTimeout)
	}
	select {
	case <-c.done:
		return fmt.Errorf("scrape: %s %s: it exited (%v)", doing, c.bin, c.err)
	case <-time.After(100 * time.Millisecond): // its exit may lag the pipe's end
	}
	return fmt.Errorf("scrape: %s %s: %w", doing, c.bin, err)
}

// stop closes the child's stdin, which ends it, waits up to grace for it
// to exit, kills it if it has not, and closes the pipes.
func (c *child) stop(grace time.Duration) {
	c.once.Do(func() {
		c.in.Close()
		if grace > 0 {
			select {
			case <-c.done:
			case <-time.After(grace):
			}
		}
		_ = c.cmd.Process.Kill() // an error only says it is gone already
		<-c.done
		c.out.Close()
	})
}

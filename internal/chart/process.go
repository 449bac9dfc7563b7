package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// Process is the Renderer a serving agent uses: raspi-mcp-chart started
// for each chart, so an agent that draws none carries neither the library
// nor its memory. The child has an empty environment, its own process
// group and, on Linux, dies with the agent; it is killed when ctx ends or
// after Timeout, and what it writes beyond MaxPNGBytes is refused.
type Process struct {
	Bin     string
	Timeout time.Duration // 0: DefaultTimeout
}

// DefaultTimeout bounds one chart. A Pi Zero draws one in about a second;
// this only ends a child that stopped making progress.
const DefaultTimeout = 30 * time.Second

// Render runs the child on r.
func (p Process) Render(ctx context.Context, r *Request) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	in, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	d := p.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Bin)
	cmd.Env = []string{}
	cmd.SysProcAttr = childAttr()
	cmd.Stdin = bytes.NewReader(in)
	var out, errOut capped
	out.max, errOut.max = MaxPNGBytes, 512
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %s did not finish within %s", ErrUnavailable, p.Bin, d)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v: %s", ErrUnavailable, p.Bin, err, strings.TrimSpace(errOut.b.String()))
	case out.over:
		return nil, fmt.Errorf("%w: %s wrote more than %d bytes", ErrUnavailable, p.Bin, MaxPNGBytes)
	}
	return out.b.Bytes(), nil
}

// capped keeps the first max bytes written to it and notes the rest, so a
// runaway child costs the agent no more memory than that.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); len(p) > room {
		c.over = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}

var _ io.Writer = (*capped)(nil)

package approval

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// The console is a Unix socket beside the agent's MCP socket. Who may use
// it is decided once per connection from the kernel's peer credentials:
// root, or a user named in [guard] approvers. Never a token, never an MCP
// session: the MCP doors do not lead here, and nothing a client sends
// reaches it. The socket's mode lets any local user connect; the peer
// check is the gate, so an approver need not be in the agent's group.

// SocketMode is the console socket's mode.
const SocketMode = 0o666

// Bounds of the console: a local user who is not an approver, or one who
// connects and says nothing, costs a refusal, not the agent's resources.
const (
	maxConsoleConns = 8
	requestTimeout  = 10 * time.Second
	maxRequest      = 4 << 10
	maxListWait     = 10 * time.Minute
)

// SocketPath is the console socket beside the agent's MCP socket.
func SocketPath(agentSocket string) string {
	return filepath.Join(filepath.Dir(agentSocket), "approve.sock")
}

// Request is one console request, a JSON line.
type Request struct {
	Op string `json:"op"` // "list", "approve" or "deny"
	ID string `json:"id,omitempty"`
	// Bind, when set, is the Bind the approver was shown: the answer
	// applies only to that call.
	Bind string `json:"bind,omitempty"`
	// WaitMS, for list: when nothing waits, wait up to this long for a
	// call to arrive.
	WaitMS int64 `json:"wait_ms,omitempty"`
}

// Response is the console's answer, a JSON line.
type Response struct {
	OK      bool      `json:"ok"`
	Error   string    `json:"error,omitempty"`
	Waiting []Waiting `json:"waiting,omitempty"`
	// Approver is the name the console knows the caller by.
	Approver string `json:"approver,omitempty"`
}

// Console serves the console socket for a broker.
type Console struct {
	B     *Broker
	Guard func() config.Guard
	Log   *slog.Logger
	// AgentUID is the agent's own uid, which never approves (unless it
	// is root, as in a test); -1 to not check.
	AgentUID int
	// lookup names a uid; nil: the system's user database.
	lookup func(uid int) string
}

// Serve answers console connections on ln until ctx ends.
func (c *Console) Serve(ctx context.Context, ln *net.UnixListener) error {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	slots := make(chan struct{}, maxConsoleConns)
	return unixsock.Serve(ctx, ln, c.Log, func(ctx context.Context, conn *net.UnixConn) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			c.reply(conn, Response{Error: "approval: the console is busy; try again"})
			return
		}
		c.serve(ctx, conn)
	})
}

// who is the approver at the other end, or why it is not one.
func (c *Console) who(conn *net.UnixConn) (Approver, error) {
	peer, err := unixsock.PeerOf(conn)
	if err != nil {
		return Approver{}, fmt.Errorf("approval: reading the caller's credentials: %w", err)
	}
	return c.approver(peer.UID, c.name(peer.UID))
}

// approver decides whether uid (named name) answers at the console: root,
// or a user of [guard] approvers that is not the agent itself.
func (c *Console) approver(uid int, name string) (Approver, error) {
	if uid == 0 {
		return Approver{Name: "root", UID: 0}, nil
	}
	if c.AgentUID >= 0 && uid == c.AgentUID {
		return Approver{}, fmt.Errorf("approval: the agent's own user (%s) never approves", name)
	}
	if !slices.Contains(c.Guard().Approvers, name) {
		return Approver{}, fmt.Errorf("approval: %s is not an approver: run it as root (sudo raspi-mcp approve), or the owner adds %q to [guard] approvers in %s", name, name, config.DefaultPath)
	}
	return Approver{Name: name, UID: uid}, nil
}

func (c *Console) name(uid int) string {
	if c.lookup != nil {
		return c.lookup(uid)
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return "uid:" + strconv.Itoa(uid)
}

func (c *Console) serve(ctx context.Context, conn *net.UnixConn) {
	who, err := c.who(conn)
	if err != nil {
		c.Log.Warn("approval: console refused", "err", err)
		c.reply(conn, Response{Error: err.Error()})
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(requestTimeout))
	line, err := bufio.NewReaderSize(conn, maxRequest).ReadSlice('\n')
	if err != nil {
		c.reply(conn, Response{Error: "approval: want one JSON request line of at most 4 KiB"})
		return
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		c.reply(conn, Response{Error: "approval: bad request: " + err.Error()})
		return
	}
	switch req.Op {
	case "list":
		c.reply(conn, Response{OK: true, Approver: who.Name, Waiting: c.list(ctx, req.WaitMS)})
	case "approve", "deny":
		if err := c.B.Decide(req.ID, req.Op == "approve", who, req.Bind); err != nil {
			c.reply(conn, Response{Error: fmt.Sprintf("approval: %s %q: %v", req.Op, req.ID, err), Approver: who.Name})
			return
		}
		c.reply(conn, Response{OK: true, Approver: who.Name})
	default:
		c.reply(conn, Response{Error: fmt.Sprintf("approval: unknown op %q: want list, approve or deny", req.Op)})
	}
}

// list is what waits; when nothing does, it waits up to waitMS for a call.
func (c *Console) list(ctx context.Context, waitMS int64) []Waiting {
	d := min(time.Duration(waitMS)*time.Millisecond, maxListWait)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		changed := c.B.Changed()
		if w := c.B.List(); len(w) > 0 || d <= 0 {
			return w
		}
		select {
		case <-changed:
		case <-deadline.C:
			return c.B.List()
		case <-ctx.Done():
			return nil
		}
	}
}

func (c *Console) reply(conn *net.UnixConn, r Response) {
	_ = conn.SetWriteDeadline(time.Now().Add(requestTimeout))
	b, _ := json.Marshal(r)
	_, _ = conn.Write(append(b, '\n'))
}

// Ask sends one request to the console socket at path and returns its
// answer: what `raspi-mcp approve` does.
func Ask(ctx context.Context, path string, req Request) (Response, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Response{}, fmt.Errorf("approval: no agent console at %s: is raspi-mcp running here?", path)
		}
		return Response{}, fmt.Errorf("approval: connecting to %s: %w", path, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return Response{}, fmt.Errorf("approval: sending to %s: %w", path, err)
	}
	var r Response
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return Response{}, fmt.Errorf("approval: reading the answer from %s: %w", path, err)
	}
	if !r.OK {
		return r, errors.New(r.Error)
	}
	return r, nil
}

package transport

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/internal/webguard"
)

// What the agent keeps across its sessions so that a hostile client costs
// it a bounded amount and the other sessions nothing (issue 28; the numbers
// and their reasons are config.Sessions'):
//
//   - answers and notifications wait in a bounded queue per session, drained
//     by a writer of the session's own (session.go), and the bytes queued
//     across sessions have a budget of their own (guard.queued);
//   - the requests in flight have a bound per session, enforced in the line
//     filter before go-sdk sees them (lines.go), and one per principal across
//     its sessions, socket and HTTP alike (InFlightMiddleware);
//   - connections have caps per uid and in total, with room kept for root,
//     and a connection that says nothing is closed (ServeConn);
//   - the refusals of unmapped callers are audited at most once a uid a
//     minute and a bounded number a minute in all (refusalGate).

// busyCode is the JSON-RPC code of a request refused for a bound: in the
// range JSON-RPC leaves to servers, beside -32001 (permission_denied).
const busyCode = -32000

// busyData is the data of such a refusal: classified as resource_exhausted,
// which may be retried.
var busyData = []byte(`{"error_code":"` + errcode.ResourceExhausted + `","retryable":true}`)

// guard is the state the bounds share across sessions; the zero value is
// ready.
type guard struct {
	queued    atomic.Int64 // bytes queued for the peers of all sessions, the HTTP endpoint's responses included
	maxQueued atomic.Int64 // the most queued at once since the agent started

	mu          sync.Mutex
	conns       map[int]int // open socket connections by uid
	total       int         // open socket connections, root's included
	byPrincipal map[string]int
	inFlight    int // requests in flight across principals
	// othersInFlight is inFlight less root's: what total_in_flight bounds.
	othersInFlight int

	refusals refusalGate
	capLog   webguard.Bursts // one log line a uid a minute for cap refusals
	cuts     webguard.Bursts // one audit record a principal a minute for sessions cut

	// peerOf reads a connection's peer credentials; tests inject it to
	// connect as other uids.
	peerOf func(*net.UnixConn) (unixsock.Peer, error)
}

// addQueued counts n bytes queued (negative: written or dropped).
func (g *guard) addQueued(n int64) int64 {
	v := g.queued.Add(n)
	for {
		m := g.maxQueued.Load()
		if v <= m || g.maxQueued.CompareAndSwap(m, v) {
			return v
		}
	}
}

// Load is what the sessions hold of the agent now.
type Load struct {
	Queued    int64 // bytes of answers and notifications waiting for their peers (socket and HTTP)
	MaxQueued int64 // the most that ever waited at once
	Conns     int   // open socket connections
	InFlight  int   // requests in flight, every principal's
}

// Load reports what the sessions hold of the agent now; tests and
// measurements read it (agent.SocketLoad).
func (d *Doors) Load() Load {
	g := &d.guard
	g.mu.Lock()
	defer g.mu.Unlock()
	return Load{Queued: g.queued.Load(), MaxQueued: g.maxQueued.Load(), Conns: g.total, InFlight: g.inFlight}
}

// admit takes a connection slot for uid, or says why there is none. Root
// is held to no per-uid cap and may pass the total by RootReserve: the
// others can fill Total at most, so root can always get in.
func (g *guard) admit(uid int, lim config.Sessions) (release func(), why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case uid == 0 && g.total >= lim.Total+lim.RootReserve:
		return nil, fmt.Sprintf("%d connections are open to the agent, its bound for root ([sessions] total + root_reserve)", g.total)
	case uid != 0 && g.conns[uid] >= lim.PerUID:
		return nil, fmt.Sprintf("uid %d has %d connections open to the agent, its bound ([sessions] per_uid)", uid, g.conns[uid])
	case uid != 0 && g.total >= lim.Total:
		return nil, fmt.Sprintf("%d connections are open to the agent, its bound ([sessions] total)", g.total)
	}
	if g.conns == nil {
		g.conns = map[int]int{}
	}
	g.conns[uid]++
	g.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.conns[uid]--; g.conns[uid] <= 0 {
				delete(g.conns, uid)
			}
			g.total--
		})
	}, ""
}

// busyLine is the one line a connection refused for a cap gets before it
// is closed: a JSON-RPC error under a null id (nothing was read), which a
// client shows, or the bridge prints.
func busyLine(why string) []byte {
	msg := "resource_exhausted: " + why + "; close a session and retry"
	return append(rpcid.AppendError(nil, nil, busyCode, msg, busyData), '\n')
}

// inflightKey names a principal for the in-flight bound: its kind and name,
// so a token and a user of the same name are two.
func inflightKey(ctx context.Context) string {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	return string(p.Kind) + "/" + p.Name
}

// InFlightMiddleware bounds the requests one principal has running across
// all its sessions, on the socket and over HTTP (where a session is cheap
// to open, so a per-session bound alone bounds nothing), and those of all
// principals but root together (total_in_flight: the bound that does not
// grow with the number of uids and tokens). A request beyond either is
// not run: it is answered with resource_exhausted, which may be
// retried. Notifications pass; they are not run concurrently by go-sdk's
// server and are never answered. It runs inside PrincipalMiddleware, which
// gives an HTTP request its own token's principal; the agent installs both.
func (d *Doors) InFlightMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		key := inflightKey(ctx)
		p, _ := identity.FromContext(ctx)
		root := p.Kind == identity.KindUnix && p.UID == 0
		lim := d.conf().Sessions
		g := &d.guard
		g.mu.Lock()
		if g.byPrincipal[key] >= lim.PrincipalInFlight {
			g.mu.Unlock()
			return nil, &jsonrpc.Error{Code: busyCode, Data: busyData, Message: fmt.Sprintf(
				"resource_exhausted: %d requests of %s are in flight across its sessions, its bound ([sessions] principal_in_flight); not run, retry once an answer has come", lim.PrincipalInFlight, key)}
		}
		if !root && g.othersInFlight >= lim.TotalInFlight {
			g.mu.Unlock()
			return nil, &jsonrpc.Error{Code: busyCode, Data: busyData, Message: fmt.Sprintf(
				"resource_exhausted: %d requests are in flight across all callers, the agent's bound ([sessions] total_in_flight); not run, retry once an answer has come", lim.TotalInFlight)}
		}
		if g.byPrincipal == nil {
			g.byPrincipal = map[string]int{}
		}
		g.byPrincipal[key]++
		g.inFlight++
		if !root {
			g.othersInFlight++
		}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if g.byPrincipal[key]--; g.byPrincipal[key] <= 0 {
				delete(g.byPrincipal, key)
			}
			g.inFlight--
			if !root {
				g.othersInFlight--
			}
			g.mu.Unlock()
		}()
		return next(ctx, method, req)
	}
}

// refusalGate decides which refusals of unmapped callers are audited: at
// most one a uid a RefusalWindow (webguard.Bursts), and at most a bounded
// number a window across uids, so a flood of connections from many uids
// (or one uid's flood in a window) writes a few fsynced records, not one a
// connection. The next record written counts those left out.
type refusalGate struct {
	bursts webguard.Bursts

	mu      sync.Mutex
	start   time.Time // the current window's start
	n       int       // records written in it
	leftOut int       // refusals not recorded since the last record
}

// record reports whether the refusal of uid at now is audited, and how many
// were left out before it.
func (g *refusalGate) record(uid int, now time.Time, perWindow int) (ok bool, leftOut int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bursts.Window == 0 {
		g.bursts.Window = RefusalWindow
	}
	first, _ := g.bursts.First("uid:"+strconv.Itoa(uid), now)
	if now.Sub(g.start) >= RefusalWindow {
		g.start, g.n = now, 0
	}
	if !first || g.n >= perWindow {
		g.leftOut++
		return false, 0
	}
	g.n++
	leftOut, g.leftOut = g.leftOut, 0
	return true, leftOut
}

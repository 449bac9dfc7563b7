// Package transport is the agent's doors: how an MCP client reaches the
// agent's *mcp.Server and what it may hold of it while there. It serves the
// Unix socket (newline-delimited JSON-RPC framing, the line filter that
// screens ids and bounds lines and requests, sessions with their bounded
// outbound queues, the connection caps and the audited refusal of callers
// without a role) and the Streamable HTTP front (bearer tokens, rate
// limits, session and connection caps, the sweep of revoked tokens,
// queued writes), and the middleware that gives every request its
// principal and bounds each principal's requests in flight.
//
// It knows no tool: it takes the server the agent built, a config getter
// for [sessions], [http] and [roles], a logger, and an audit hook for the
// refusals and cuts it decides (Refusal), which the agent records. It must
// not link the agent, its store, the helper or the devices (deps_test.go).
package transport

import (
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// Refusal is what the doors ask the agent to audit: a caller refused (no
// role, a bad token, a cap, a rate) or a session or stream cut for a bound.
// The decision is always deny; the agent adds the time and a correlation
// id.
type Refusal struct {
	Principal string // the principal's name; "anonymous" for no or an unknown token
	Role      string // the principal's role, "none" if it has none
	Tool      string // what was refused: "connect", "session", "http"
	Code      string // an internal/errcode code
	Message   string
	Remote    string // the HTTP client's address; "" on the socket
	In        any    // what the record's input hash is made of
}

// Options are what the doors need from the agent.
type Options struct {
	Server *mcp.Server
	// Config is the configuration in force, read anew for every
	// connection and request (a reload swaps it): its Sessions, HTTP,
	// Roles and Agent.State are used.
	Config func() *config.Config
	Log    *slog.Logger
	// Audit records a refusal or cut; it is called within the bounds each
	// door keeps on how often alike refusals are recorded. nil: none is.
	Audit func(Refusal)
}

// Doors serves one *mcp.Server on the agent socket and over HTTP, under
// bounds shared by both.
type Doors struct {
	server *mcp.Server
	conf   func() *config.Config
	log    *slog.Logger
	audit  func(Refusal)

	// guard holds the bounds on what sessions may hold of the agent
	// (inflight.go, session.go).
	guard      guard
	refused    atomic.Uint64              // connections refused before any call: the principal had no role
	httpStatus atomic.Pointer[HTTPStatus] // the HTTP endpoint once it serves (http.go)

	// Tests set these before serving: how long a socket session whose
	// input has ended waits for its answers (0: drainGrace), and a call
	// when that wait begins (lineFilter.drain).
	drainGrace time.Duration
	inputEnded func()
}

// New makes the doors of o.Server.
func New(o Options) *Doors {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Audit == nil {
		o.Audit = func(Refusal) {}
	}
	return &Doors{server: o.Server, conf: o.Config, log: o.Log, audit: o.Audit}
}

// RefusedConns counts the socket connections refused since the agent
// started because their principal has no role (the agent's /metrics).
func (d *Doors) RefusedConns() uint64 { return d.refused.Load() }

// HTTPStatus is the HTTP endpoint once it serves, nil before.
func (d *Doors) HTTPStatus() *HTTPStatus { return d.httpStatus.Load() }

// SetPeerOf replaces how a socket connection's peer credentials are read;
// tests use it to connect as other uids. Set it before serving.
func (d *Doors) SetPeerOf(peerOf func(*net.UnixConn) (unixsock.Peer, error)) {
	d.guard.peerOf = peerOf
}

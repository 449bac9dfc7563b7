// Package privhelper is the root helper's server: the small, boring process
// that alone touches hardware, systemd units and power on behalf of the
// unprivileged raspi-mcp agent.
//
// Trust is decided once per connection from the kernel's peer credentials (only
// root and the configured agent uid get in), then every request is decoded
// strictly, validated by its proto type and checked against the helper's own
// Policy before a backend is called. The helper never trusts the agent's
// view of what is allowed: the agent can be compromised, the helper's
// root-owned config cannot.
//
// This package must not import the MCP SDK or bbolt; deps_test.go enforces it.
package privhelper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// SocketMode is the mode of the helper's socket: owner (the agent's user,
// chowned by the binary) and root's group. It is defence in depth; the peer
// credentials checked on every connection are the gate.
const SocketMode = 0o660

// Timeouts and limits of the server. They are constants, not options,
// because nothing legitimate comes near them.
const (
	helloTimeout  = 5 * time.Second // an allowed peer must say hello within this
	writeTimeout  = 5 * time.Second // a peer that stops reading cannot pin a goroutine
	maxConns      = 16              // concurrent authorised connections; the agent uses one
	maxEchoedName = 64              // longest untrusted method name quoted back in an error
)

// A handler's bound is its method's class's (proto.Class): short for the
// quick methods, long enough for a loaded Pi Zero's systemd for the ones
// that wait on it. See proto/class.go for the numbers and why.

// Options configures a Server.
type Options struct {
	Policy   Policy       // who may connect, the switches and the allowlists (policy.go)
	Power    power.Power  // nil: the power.* methods are not served (not_found)
	Hardware Hardware     // GPIO, PWM, I2C backends; nil members are not served
	Ops      Ops          // systemd units and signals; nil members are not served
	Witness  *witness.Log // the audit witness file; nil: audit.witness is not served
	Updates  Updates      // updating raspi-mcp itself; zero: update.* is not served
	Backend  string       // "linux" or "sim", reported by Status
	Version  string       // helper version, e.g. "0.1.0"
	Logger   *slog.Logger // refusals are logged at Warn with uid/gid/pid; nil discards

	// ConfigPath is the config file the policy above came from: config.apply
	// writes its MCP drop-in beside it. "": config.apply and config.restore
	// are not served (not_found).
	ConfigPath string
	// Reload reads the config again into Options' Policy; Server.Reload
	// and config.apply call it. nil: the policy is fixed for the helper's
	// life.
	Reload func() (Options, error)

	// HandlerTimeout bounds the handler of a quick method (GPIO, I²C,
	// files); 0 means proto.DefaultQuickTimeout (8 s).
	HandlerTimeout time.Duration
	// SystemdTimeout bounds the handler of a method that waits on systemd,
	// logind or apt's cache (a daemon-reload, an enable, a transient
	// unit's start); 0 means proto.DefaultSystemdTimeout (90 s).
	// [helper] systemd_timeout.
	SystemdTimeout time.Duration
	// JobTimeout bounds the handler of a method that waits for a unit's
	// start or stop job; 0 means proto.DefaultJobTimeout (120 s).
	// [helper] job_timeout.
	JobTimeout time.Duration
}

// Server serves the helper protocol. It holds no per-connection state; one
// Server may Serve several listeners.
type Server struct {
	// cur is the policy in force, swapped whole by Reload (config.go).
	cur     atomic.Pointer[rules]
	power   power.Power
	hw      Hardware
	ops     Ops
	witness *witness.Log
	updates Updates
	backend string
	helper  string
	log     *slog.Logger
	started time.Time
	bounds  proto.Bounds     // per class; fixed for the helper's life
	mux     map[string]route // built by NewServer, read-only afterwards
	methods []string         // sorted names served, for Status
	slots   chan struct{}    // one token per open authorised connection
	cfgPath string
	reload  func() (Options, error)
	cfgMu   sync.Mutex  // one reload or config change at a time
	button  *buttonUnit // the approval button; nil without a button backend
}

// NewServer builds a Server. Methods are registered here from the proto
// table, so their wire names and types come from a single place.
func NewServer(o Options) *Server {
	s := &Server{
		power:   o.Power,
		hw:      o.Hardware,
		ops:     o.Ops,
		cfgPath: o.ConfigPath,
		reload:  o.Reload,
		witness: o.Witness,
		updates: o.Updates,
		backend: o.Backend,
		helper:  "raspi-mcp-helper/" + o.Version,
		log:     o.Logger,
		started: time.Now().UTC().Truncate(time.Microsecond),
		bounds:  proto.Bounds{Quick: o.HandlerTimeout, Systemd: o.SystemdTimeout, Job: o.JobTimeout},
		mux:     make(map[string]route),
		slots:   make(chan struct{}, maxConns),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cur.Store(&rules{policy: o.Policy, gen: 1})
	handle(s.mux, proto.Status, s.status)
	if s.power != nil {
		handle(s.mux, proto.PowerSchedule, s.powerSchedule)
		handle(s.mux, proto.PowerCancel, s.powerCancel)
		handle(s.mux, proto.PowerState, s.powerState)
	}
	s.registerHardware()
	s.registerOps()
	s.registerWitness()
	s.registerConfig()
	s.registerUpdates()
	s.registerButton()
	s.methods = append([]string{proto.Hello.Name}, slices.Sorted(maps.Keys(s.mux))...)
	return s
}

// Serve accepts connections on ln until ctx is done, then closes ln and every
// open connection, waits for their goroutines and returns nil. Running out of
// file descriptors pauses accepting rather than ending the helper (see
// unixsock.Serve); any other accept failure is returned.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if err := unixsock.Serve(ctx, ln, s.log, s.serveConn); err != nil {
		return fmt.Errorf("privhelper: %w", err)
	}
	return nil
}

type peerKey struct{}

// peerFrom is the kernel's word on who is at the other end of the request's
// connection.
func peerFrom(ctx context.Context) unixsock.Peer {
	p, _ := ctx.Value(peerKey{}).(unixsock.Peer)
	return p
}

// serveConn runs one connection: credentials, hello, then requests until
// EOF, a bad frame or shutdown. The caller closes conn.
func (s *Server) serveConn(ctx context.Context, conn *net.UnixConn) {
	p, err := unixsock.PeerOf(conn)
	if err != nil {
		s.log.Warn("privhelper: refused connection: no peer credentials", "err", err)
		s.writeResponse(conn, proto.Response{Error: proto.Errorf(proto.CodePermissionDenied,
			"privhelper: cannot identify the connecting process")})
		return
	}
	if !s.rules().policy.allowsPeer(p.UID) {
		s.log.Warn("privhelper: refused connection from a uid that is neither root nor the agent",
			"uid", p.UID, "gid", p.GID, "pid", p.PID, "agent_uid", s.rules().policy.AgentUID)
		s.writeResponse(conn, proto.Response{Error: proto.Errorf(proto.CodePermissionDenied,
			"privhelper: uid %d may not use the helper", p.UID).With("uid", p.UID)})
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		s.log.Warn("privhelper: refused connection: too many open", "uid", p.UID, "pid", p.PID, "max", maxConns)
		s.writeResponse(conn, proto.Response{Error: &proto.Error{Code: proto.CodeResourceExhausted,
			Message: fmt.Sprintf("privhelper: more than %d connections open", maxConns), Retryable: true}})
		return
	}
	log := s.log.With("uid", p.UID, "pid", p.PID)
	if !s.hello(conn, log) {
		return
	}
	ctx = context.WithValue(ctx, peerKey{}, p)
	for {
		var req proto.Request
		if err := proto.ReadFrame(conn, &req); err != nil {
			s.readFailed(conn, log, err)
			return
		}
		var resp proto.Response
		if rt, ok := s.mux[req.Method]; ok && rt.class == proto.Approval {
			// A wait for a person may last many minutes: watch the peer
			// meanwhile, so an agent that went away frees the button.
			wctx, stop := watchPeer(ctx, conn)
			resp = s.dispatch(wctx, req, log)
			if !stop() {
				log.Info("privhelper: the peer hung up (or spoke out of turn) while waiting for the approval button", "method", req.Method)
				return
			}
		} else {
			resp = s.dispatch(ctx, req, log)
		}
		if err := s.writeResponse(conn, resp); err != nil {
			if ctx.Err() == nil {
				log.Info("privhelper: connection lost writing a response", "err", err)
			}
			return
		}
	}
}

// readFailed answers a malformed frame with invalid_argument (the stream
// cannot be trusted after it, so the caller then closes) and logs real
// I/O errors; EOF is a normal goodbye.
func (s *Server) readFailed(conn *net.UnixConn, log *slog.Logger, err error) {
	switch {
	case errors.Is(err, proto.ErrMalformed):
		log.Warn("privhelper: bad frame; closing connection", "err", err)
		s.writeResponse(conn, proto.Response{Error: proto.Errorf(proto.CodeInvalidArgument,
			"privhelper: bad frame: %v", err)})
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		log.Info("privhelper: connection read failed", "err", err)
	}
}

// hello performs the handshake: the first frame must be a hello carrying
// proto.Version. It reports whether the connection may continue.
func (s *Server) hello(conn *net.UnixConn, log *slog.Logger) bool {
	conn.SetReadDeadline(time.Now().Add(helloTimeout))
	var req proto.Request
	if err := proto.ReadFrame(conn, &req); err != nil {
		s.readFailed(conn, log, err)
		return false
	}
	fail := func(e *proto.Error) bool {
		log.Warn("privhelper: hello refused", "err", e)
		s.writeResponse(conn, proto.Response{ID: req.ID, Error: e})
		return false
	}
	if req.Method != proto.Hello.Name {
		return fail(proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: first request must be %q, got %q", proto.Hello.Name, clip(req.Method)))
	}
	// Read the version leniently first, so a client whose hello gained
	// fields in a later version is told about the version, not a field.
	var probe struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(req.Params, &probe); err != nil {
		return fail(proto.Errorf(proto.CodeInvalidArgument, "privhelper: bad hello params: %v", err))
	}
	if probe.Version != proto.Version {
		return fail(proto.Errorf(proto.CodeFailedPrecondition,
			"privhelper: client speaks protocol version %d, helper speaks version %d", probe.Version, proto.Version).
			With("client_version", probe.Version).With("helper_version", proto.Version))
	}
	var h proto.HelloReq
	if err := proto.Decode(req.Params, &h); err != nil {
		return fail(proto.Errorf(proto.CodeInvalidArgument, "privhelper: bad hello params: %v", err))
	}
	if err := h.Validate(); err != nil {
		return fail(asProtoError(err))
	}
	result, err := json.Marshal(proto.HelloResp{Version: proto.Version, Helper: s.helper, PID: os.Getpid()})
	if err != nil {
		return fail(proto.Errorf(proto.CodeInternal, "privhelper: encode hello: %v", err))
	}
	if err := s.writeResponse(conn, proto.Response{ID: req.ID, Result: result}); err != nil {
		return false
	}
	conn.SetReadDeadline(time.Time{}) // the agent keeps its connection open between calls
	log.Info("privhelper: client connected", "client", h.Client)
	return true
}

// dispatch runs one request and always produces a response.
func (s *Server) dispatch(ctx context.Context, req proto.Request, log *slog.Logger) proto.Response {
	resp := proto.Response{ID: req.ID}
	if req.Method == proto.Hello.Name {
		resp.Error = proto.Errorf(proto.CodeFailedPrecondition, "privhelper: hello was already done on this connection")
		return resp
	}
	rt, ok := s.mux[req.Method]
	if !ok {
		resp.Error = proto.Errorf(proto.CodeNotFound, "privhelper: unknown method %q", clip(req.Method)).
			With("method", clip(req.Method))
		return resp
	}
	bound := s.bounds.Of(rt.class)
	if rt.bound != nil {
		if b, ok := rt.bound(req.Params); ok {
			bound = b
		}
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	result, err := s.run(ctx, rt.h, req.Params)
	if err == nil {
		resp.Result, err = json.Marshal(result)
		if err == nil && len(resp.Result) > proto.MaxMessage-1024 {
			err = proto.Errorf(proto.CodeResourceExhausted, "privhelper: %s result of %d bytes is too large", req.Method, len(resp.Result))
		}
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded && proto.CodeOf(err) == "" {
			err = (&proto.Error{Code: proto.CodeUnavailable, Retryable: true,
				Message: fmt.Sprintf("privhelper: %s did not finish within %s (the helper's bound on %s methods): %v", req.Method, bound, rt.class, err)}).
				With("method", req.Method).With("timeout_seconds", bound.Seconds())
		}
		e := asProtoError(fmt.Errorf("privhelper: %s: %w", req.Method, err))
		level := slog.LevelInfo
		if e.Code == proto.CodePermissionDenied || e.Code == proto.CodeInternal {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "privhelper: request failed", "method", req.Method, "code", e.Code, "err", e.Message)
		return proto.Response{ID: req.ID, Error: e}
	}
	return resp
}

// run calls h, turning a panic into an internal error: a bug in one handler
// must not take down the helper and with it every other hardware request.
func (s *Server) run(ctx context.Context, h handler, params json.RawMessage) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("privhelper: handler panicked", "panic", r)
			result, err = nil, proto.Errorf(proto.CodeInternal, "privhelper: handler panicked")
		}
	}()
	return h(ctx, params)
}

// asProtoError returns the *proto.Error in err's chain as is, or wraps any
// other error as internal with err's text.
func asProtoError(err error) *proto.Error {
	var e *proto.Error
	if errors.As(err, &e) {
		return e
	}
	return proto.Errorf(proto.CodeInternal, "%v", err)
}

func (s *Server) writeResponse(conn *net.UnixConn, resp proto.Response) error {
	conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	return proto.WriteFrame(conn, resp)
}

// clip shortens an untrusted name before it is quoted back or logged.
func clip(s string) string {
	if len(s) <= maxEchoedName {
		return s
	}
	return s[:maxEchoedName] + "…"
}

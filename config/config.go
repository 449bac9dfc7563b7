// Package config loads and checks raspi-mcp's TOML configuration.
//
// One file, /etc/raspi-mcp/config.toml, is read by both the agent and the root
// helper: the helper re-checks every request against its own reading of it, so
// a compromised agent cannot widen what the owner allowed. Unknown keys and
// wrong types are errors that name the key, because a misspelt "reboot = true"
// silently ignored is a safety bug.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// DefaultPath is where the packaged config lives.
const DefaultPath = "/etc/raspi-mcp/config.toml"

// Config is the whole file. Field comments give the TOML key; defaults are in Default.
type Config struct {
	Agent   Agent   `toml:"agent"`
	Helper  Helper  `toml:"helper"`
	Roles   Roles   `toml:"roles"`
	Audit   Audit   `toml:"audit"`
	Change  Change  `toml:"change"`
	Guard   Guard   `toml:"guard"`
	System  System  `toml:"system"`
	Metrics Metrics `toml:"metrics"`
	Logs    Logs    `toml:"logs"`
	Manage  Manage  `toml:"manage"`
	Network Domain  `toml:"network"`
	Service Service `toml:"service"`
	Process Process `toml:"process"`
	GPIO    GPIO    `toml:"gpio"`
	I2C     I2C     `toml:"i2c"`
	Camera  Camera  `toml:"camera"`
	// HTTP is the Streamable HTTP endpoint for the LAN (and /metrics for
	// Prometheus); off until listen is set.
	HTTP HTTP `toml:"http"`
	// Sessions bounds what one client of the agent socket may hold of the
	// agent (queued answers, requests in flight, connections).
	Sessions Sessions `toml:"sessions"`
	// Subscriptions bounds what clients may hold of resources/subscribe
	// and subscriptions/listen.
	Subscriptions Subscriptions `toml:"subscriptions"`
	// Upstreams are other MCP servers of the LAN mounted as extra namespaces
	// ([[upstream]], see upstream.go); none by default.
	Upstreams []Upstream `toml:"upstream"`
	// Profiles are named narrowings of a grant ([profiles.NAME], see
	// profiles.go) that a bearer token or a [roles] entry may carry.
	Profiles map[string]Profile `toml:"profiles"`
}

// Manage is the manage namespace: the server's status, its jobs, and the
// updates of the OS and of raspi-mcp itself, which are off until the owner
// turns them on.
type Manage struct {
	Enabled bool `toml:"enabled"`
	// Updates lets manage_preview_os_updates refresh the package lists and
	// the apply and self-update tools change installed packages.
	Updates bool `toml:"updates"`
	// UpdateHealthTimeout is how long a new raspi-mcp has, after
	// manage_update_server installed it, to start and pass its own check
	// before the previous version is reinstalled. The root helper reads
	// it from its own config; the agent cannot change it.
	UpdateHealthTimeout Duration `toml:"update_health_timeout"`
}

// HTTP is the Streamable HTTP endpoint. Who may call it is decided by the
// bearer tokens in Tokens (created with "raspi-mcp token create" on the
// device, never over MCP).
type HTTP struct {
	// Listen is host:port; "" = no HTTP endpoint (unless systemd hands the
	// agent a socket, raspi-mcp-http.socket).
	Listen string `toml:"listen"`
	// Tokens is the file of bearer tokens (names, roles, expiry and the
	// secrets' hashes only).
	Tokens string `toml:"tokens"`

	// TLS serves https: with TLSCert and TLSKey when both are set, else
	// with a self-signed certificate the agent makes on first start beside
	// its state file (its fingerprint is in `raspi-mcp status`).
	TLS     bool   `toml:"tls"`
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// InsecurePlaintext allows a listen address other than loopback
	// without TLS, where tokens cross the LAN readable; off, such a
	// listen is refused.
	InsecurePlaintext bool `toml:"insecure_plaintext"`
	// Names are the host names clients reach the device by (pi.local);
	// a request whose Host or Origin names anything else is refused, so a
	// web page cannot reach the endpoint by rebinding its own name to the
	// Pi. Loopback names and the address a client connected to are
	// always accepted.
	Names []string `toml:"names"`

	MaxBodyBytes      int64    `toml:"max_body_bytes"`      // a larger request is refused (413)
	ReadHeaderTimeout Duration `toml:"read_header_timeout"` // a client slower to send its headers is cut
	ReadTimeout       Duration `toml:"read_timeout"`        // ... or its whole request
	IdleTimeout       Duration `toml:"idle_timeout"`        // an idle keep-alive connection is closed
	// Rate is each token's sustained requests per second and Burst how
	// many it may send at once; beyond, 429 with Retry-After.
	Rate  float64 `toml:"rate"`
	Burst int     `toml:"burst"`
	// MaxSessions caps the MCP sessions (2025-11-25 clients) open at once;
	// SessionIdle closes one that has seen no request for that long.
	MaxSessions int      `toml:"max_sessions"`
	SessionIdle Duration `toml:"session_idle"`
	// MaxSessionsPerToken caps one token's sessions (MaxSessions when
	// higher), so one token cannot take every slot; a token at its cap that opens
	// another loses its own longest idle session (503 when none is idle).
	MaxSessionsPerToken int `toml:"max_sessions_per_token"`
	// MaxBatch caps the JSON-RPC messages in one request (400 beyond);
	// each counts against the token's rate.
	MaxBatch int `toml:"max_batch"`
	// MaxInFlight caps a token's requests being served at once, open
	// streams included (429 beyond).
	MaxInFlight int `toml:"max_in_flight"`
	// WriteTimeout bounds each write of an answer or stream event: a
	// client that stops reading is cut after it.
	WriteTimeout Duration `toml:"write_timeout"`
	// MaxConns caps open connections (past it the longest idle one is
	// closed, or the new one when none is idle), MaxConnsPerSource those
	// from one address.
	MaxConns          int `toml:"max_conns"`
	MaxConnsPerSource int `toml:"max_conns_per_source"`
}

// defaultHTTP is the [http] section of a fresh install: off.
func defaultHTTP() HTTP {
	return HTTP{Tokens: "/etc/raspi-mcp/tokens.toml", Names: []string{}, MaxBodyBytes: 1 << 20,
		ReadHeaderTimeout: Duration(10 * time.Second), ReadTimeout: Duration(60 * time.Second), IdleTimeout: Duration(120 * time.Second),
		Rate: 10, Burst: 40, MaxSessions: 16, SessionIdle: Duration(30 * time.Minute),
		MaxSessionsPerToken: 4, MaxBatch: 32, MaxInFlight: 16, WriteTimeout: Duration(10 * time.Second),
		MaxConns: 64, MaxConnsPerSource: 16}
}

// Sessions bounds what a client of the agent socket may hold of the agent,
// so that one that never reads, floods or hoards connections costs the
// agent a bounded amount and every other session nothing (issue 28). A
// session that passes a queue or stall bound is cut (its connection closed)
// and the cut audited once; a request beyond an in-flight bound is answered
// with resource_exhausted and not run; a connection beyond a cap gets a
// line that says why and is closed.
type Sessions struct {
	// QueueBytes bounds the answers and notifications a session's peer has
	// not read yet, 1 MiB: some six tools/list answers (~150 KB each), a
	// client that reads at all never comes near. One message larger than
	// the bound (a camera image) is accepted when nothing else waits.
	QueueBytes int64 `toml:"queue_bytes"`
	// TotalQueueBytes bounds the same across all sessions, 16 MiB: with the
	// live heap it stays under the agent's 24 MiB soft memory limit
	// ([agent] memory_limit_mib), past which the GC would run without end.
	// Past it, a session that asks to queue more while it still has
	// something waiting is cut.
	TotalQueueBytes int64 `toml:"total_queue_bytes"`
	// StallTimeout cuts a session whose peer has read nothing (less than
	// 64 KiB) for that long while answers wait, 1 minute: longer than any
	// pause of a person's client, short enough that a stuck peer does not
	// hold its queue and descriptors for long.
	StallTimeout Duration `toml:"stall_timeout"`
	// InFlight bounds a session's requests run and not yet answered, 16:
	// clients send one or a few at a time (a long-lived
	// subscriptions/listen counts as one); each costs a goroutine and its
	// answer. Responses and notifications from the client always pass.
	InFlight int `toml:"in_flight"`
	// PrincipalInFlight bounds the same across all sessions of one
	// principal, socket and HTTP alike, 32: two busy clients of one person.
	PrincipalInFlight int `toml:"principal_in_flight"`
	// TotalInFlight bounds the requests in flight of all principals but
	// root together, 96: the one bound that does not grow with the number
	// of uids or tokens, so the memory the running requests hold has a
	// ceiling (a tools/list answer is built in about 0.3 MB: 96 of them
	// are some 30 MB). Root at the console is never refused by it.
	TotalInFlight int `toml:"total_in_flight"`
	// MaxBatch bounds the messages of one JSON-RPC batch (2025-03-26
	// clients), 32; a larger batch is refused whole.
	MaxBatch int `toml:"max_batch"`
	// FirstLineTimeout closes a connection that has not sent a whole first
	// message (or handed its descriptors over) within it, 10 s: a client or
	// `raspi-mcp stdio` sends initialize at once; an idle connection is
	// only a held descriptor.
	FirstLineTimeout Duration `toml:"first_line_timeout"`
	// PerUID caps the connections of one uid at once, 16; Total caps all
	// connections but root's, 64; root (uid 0) may always open up to
	// RootReserve, 8, beyond Total, so nobody can lock root out. A session
	// handed over by `raspi-mcp stdio` holds 7 descriptors (the socket and
	// an epoll pair for each pipe), so (64+8)*7 = 504 stay under even a
	// soft limit of 1024 with room for bbolt, the helper and HTTP; the
	// unit sets no LimitNOFILE, and Go raises the soft limit to the hard
	// one (524288 under systemd).
	PerUID      int `toml:"per_uid"`
	Total       int `toml:"total"`
	RootReserve int `toml:"root_reserve"`
	// RefusalAudits caps the audit records of refused (unmapped) callers a
	// minute across all uids, 10; each uid gets at most one a minute. The
	// next record counts those left out. Every refusal is still counted in
	// /metrics.
	RefusalAudits int `toml:"refusal_audits"`
}

func defaultSessions() Sessions {
	return Sessions{QueueBytes: 1 << 20, TotalQueueBytes: 16 << 20, StallTimeout: Duration(time.Minute),
		InFlight: 16, PrincipalInFlight: 32, TotalInFlight: 96, MaxBatch: 32, FirstLineTimeout: Duration(10 * time.Second),
		PerUID: 16, Total: 64, RootReserve: 8, RefusalAudits: 10}
}

func (s Sessions) validate() error {
	var pr problems
	ints := []struct {
		key       string
		v, lo, hi int64
	}{
		{"sessions.queue_bytes", s.QueueBytes, 64 << 10, 64 << 20},
		{"sessions.total_queue_bytes", s.TotalQueueBytes, 64 << 10, 1 << 30},
		{"sessions.in_flight", int64(s.InFlight), 1, 1024},
		{"sessions.principal_in_flight", int64(s.PrincipalInFlight), 1, 4096},
		{"sessions.total_in_flight", int64(s.TotalInFlight), 1, 65536},
		{"sessions.max_batch", int64(s.MaxBatch), 1, 1024},
		{"sessions.per_uid", int64(s.PerUID), 1, 4096},
		{"sessions.total", int64(s.Total), 1, 65536},
		{"sessions.root_reserve", int64(s.RootReserve), 1, 1024},
		{"sessions.refusal_audits", int64(s.RefusalAudits), 1, 10000},
	}
	for _, f := range ints {
		if f.v < f.lo || f.v > f.hi {
			pr.addf("%s: want %d..%d, got %d", f.key, f.lo, f.hi, f.v)
		}
	}
	if s.TotalQueueBytes < s.QueueBytes {
		pr.addf("sessions.total_queue_bytes: want at least queue_bytes (%d), got %d", s.QueueBytes, s.TotalQueueBytes)
	}
	if s.PerUID > s.Total {
		pr.addf("sessions.per_uid: want at most total (%d), got %d", s.Total, s.PerUID)
	}
	for _, f := range []struct {
		key string
		d   Duration
	}{{"sessions.stall_timeout", s.StallTimeout}, {"sessions.first_line_timeout", s.FirstLineTimeout}} {
		if f.d.D() < 100*time.Millisecond || f.d.D() > time.Hour {
			pr.addf("%s: want 100ms..1h, got %s", f.key, f.d.D())
		}
	}
	return pr.err()
}

// Loopback reports whether listen (host:port) takes connections from this
// machine only; an empty or wildcard host does not.
func Loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (h HTTP) validate() error {
	var pr problems
	if h.Listen != "" {
		host, port, err := net.SplitHostPort(h.Listen)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			pr.addf("http.listen: want host:port (127.0.0.1:8765), got %q", h.Listen)
		}
		if host != "" && host != "localhost" && net.ParseIP(host) == nil {
			pr.addf("http.listen: want an IP address or localhost as host, got %q", host)
		}
		if !Loopback(h.Listen) && !h.TLS && !h.InsecurePlaintext {
			pr.addf("http.listen: %q is reachable from the network: set tls = true (tokens would cross the LAN readable), or insecure_plaintext = true on purpose", h.Listen)
		}
	}
	if (h.TLSCert == "") != (h.TLSKey == "") {
		pr.add(errors.New("http.tls_cert and http.tls_key: set both or neither"))
	}
	if h.TLSCert != "" && !h.TLS {
		pr.add(errors.New("http.tls_cert: set tls = true to use it"))
	}
	for _, f := range []struct{ key, path string }{{"http.tokens", h.Tokens}, {"http.tls_cert", h.TLSCert}, {"http.tls_key", h.TLSKey}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			pr.addf("%s: want an absolute path, got %q", f.key, f.path)
		}
	}
	for _, n := range h.Names {
		if n == "" || strings.ContainsAny(n, ":/ *") {
			pr.addf("http.names: want host names without port or scheme (pi.local), got %q", n)
		}
	}
	if h.MaxBodyBytes < 1024 || h.MaxBodyBytes > 64<<20 {
		pr.addf("http.max_body_bytes: want 1024..67108864, got %d", h.MaxBodyBytes)
	}
	for _, f := range []struct {
		key string
		d   Duration
	}{{"http.read_header_timeout", h.ReadHeaderTimeout}, {"http.read_timeout", h.ReadTimeout}, {"http.idle_timeout", h.IdleTimeout}, {"http.write_timeout", h.WriteTimeout}} {
		if f.d.D() < 100*time.Millisecond || f.d.D() > time.Hour {
			pr.addf("%s: want 100ms..1h, got %s", f.key, f.d.D())
		}
	}
	if h.Rate <= 0 || h.Rate > 10000 {
		pr.addf("http.rate: want requests per second per token, >0..10000, got %g", h.Rate)
	}
	if h.Burst < 1 || h.Burst > 100000 {
		pr.addf("http.burst: want 1..100000, got %d", h.Burst)
	}
	if h.MaxSessions < 1 || h.MaxSessions > 10000 {
		pr.addf("http.max_sessions: want 1..10000, got %d", h.MaxSessions)
	}
	if d := h.SessionIdle.D(); d < time.Second || d > 24*time.Hour {
		pr.addf("http.session_idle: want 1s..24h, got %s", d)
	}
	// Over max_sessions it is max_sessions: a config that lowered only
	// max_sessions stays valid.
	if h.MaxSessionsPerToken < 1 || h.MaxSessionsPerToken > 10000 {
		pr.addf("http.max_sessions_per_token: want 1..10000, got %d", h.MaxSessionsPerToken)
	}
	if h.MaxBatch < 1 || h.MaxBatch > 1000 {
		pr.addf("http.max_batch: want 1..1000, got %d", h.MaxBatch)
	}
	if h.MaxInFlight < 1 || h.MaxInFlight > 10000 {
		pr.addf("http.max_in_flight: want 1..10000, got %d", h.MaxInFlight)
	}
	if h.MaxConns < 1 || h.MaxConns > 100000 {
		pr.addf("http.max_conns: want 1..100000, got %d", h.MaxConns)
	}
	if h.MaxConnsPerSource < 1 || h.MaxConnsPerSource > 100000 {
		pr.addf("http.max_conns_per_source: want 1..100000, got %d", h.MaxConnsPerSource)
	}
	return pr.err()
}

// Camera is the camera namespace: off until the owner turns it on, since a
// photo of the room is a privacy decision.
type Camera struct {
	Enabled       bool   `toml:"enabled"`
	MediaRoot     string `toml:"media_root"`      // photos go here, with names the server makes up
	MaxImageBytes int    `toml:"max_image_bytes"` // camera.capture returns the image inline up to this size
	// PublicURL is where a web server of the owner's serves MediaRoot
	// (http://pi.local/media); when set, photos carry their public_url.
	PublicURL string `toml:"public_url"`
}

// GPIO is the gpio namespace: only the pins listed may be touched, and the
// helper puts each into its safe state when it starts.
type GPIO struct {
	Enabled bool   `toml:"enabled"`
	Writes  bool   `toml:"writes"` // gpio.configure_pin, gpio.write_pin, gpio.set_pwm (risk low)
	Revert  string `toml:"revert"` // what a timed write (duration_ms) returns to: "previous" or "inverse"
	Pins    []Pin  `toml:"pins"`
}

// Pin is one allowed BCM pin and its safe state.
type Pin struct {
	Pin   int    `toml:"pin"`
	Name  string `toml:"name"`  // what it drives, shown to the model ("relay", "fan")
	Mode  string `toml:"mode"`  // safe mode at helper start: "input" or "output"
	Value int    `toml:"value"` // safe output value
	Pull  string `toml:"pull"`  // "none", "up", "down"
	PWM   bool   `toml:"pwm"`   // gpio.set_pwm allowed on it
}

// I2C is the i2c namespace with separate read and write allowlists of
// "bus:address" entries ("1:0x76", or "1:*" for a whole bus).
type I2C struct {
	Enabled bool     `toml:"enabled"`
	Writes  bool     `toml:"writes"` // i2c.write (risk high)
	Read    []string `toml:"read"`   // scans and reads
	Write   []string `toml:"write"`
	Sensors []Sensor `toml:"sensors"` // known sensors, read by name
}

// Sensor is a known I2C sensor a model can ask for by name.
type Sensor struct {
	Name    string `toml:"name"`
	Type    string `toml:"type"` // bme280, bmp280, tmp102, or an LM75-family chip: lm75, tmp75, tmp105, tmp275
	Bus     int    `toml:"bus"`
	Address int    `toml:"address"`
}

// Agent configures the unprivileged MCP agent.
type Agent struct {
	Socket            string `toml:"socket"`              // MCP socket that `raspi-mcp stdio` bridges to
	SocketGroup       string `toml:"socket_group"`        // group allowed to connect ("" = the agent's own)
	State             string `toml:"state"`               // bbolt file: audit, tokens, jobs, samples
	LogLevel          string `toml:"log_level"`           // debug, info, warn, error
	ExposeDottedNames bool   `toml:"expose_dotted_names"` // wire names "system.reboot" instead of "system_reboot"

	// GCPercent is the Go collector's target (GOGC): how far the heap may
	// grow past the live data before a collection; -1 collects only at
	// MemoryLimitMiB. MemoryLimitMiB is the collector's soft limit
	// (GOMEMLIMIT), 0 for none. The environment variables win over both.
	GCPercent      int `toml:"gc_percent"`
	MemoryLimitMiB int `toml:"memory_limit_mib"`
	// MaxProcs is how many threads run Go code at once (GOMAXPROCS); 0
	// is one per core. The environment variable wins.
	MaxProcs int `toml:"max_procs"`
}

// Helper configures the root helper and how the agent reaches it.
type Helper struct {
	Socket    string   `toml:"socket"`
	AgentUser string   `toml:"agent_user"` // user name or numeric uid of the only non-root peer the helper accepts
	Timeout   Duration `toml:"timeout"`    // per quick privileged call (GPIO, I²C, files)
	// SystemdTimeout bounds the helper's methods that wait on systemd,
	// logind or apt's cache: enable/disable with its daemon-reload, power
	// scheduling, the start of a transient unit for apt or a self-update.
	// On a loaded Pi Zero a daemon-reload alone can take longer than
	// Timeout. The agent waits this plus a margin for those methods.
	SystemdTimeout Duration `toml:"systemd_timeout"`
	// JobTimeout bounds the methods that wait for a unit's start, stop,
	// restart or reload job, which systemd itself bounds by the unit's
	// TimeoutStartSec/TimeoutStopSec (90 s by default).
	JobTimeout Duration `toml:"job_timeout"`
	// StateDir is the helper's own directory (root's, mode 0755): it keeps
	// the audit witness there, which the agent and `raspi-mcp audit
	// verify` read but the agent's user cannot write.
	StateDir string `toml:"state_dir"`
}

// Roles maps Unix users and groups to roles. uid 0 is always admin; anyone
// unmapped is refused. A value is a role ("operate") or a role narrowed by
// a profile ("operate:sensors", see ParseGrant).
type Roles struct {
	Users  map[string]string `toml:"users"`
	Groups map[string]string `toml:"groups"`
}

// Audit configures the hash-chained audit trail.
type Audit struct {
	RecordReads bool `toml:"record_reads"` // also write a record for every read-only call
}

// Change configures prepare/commit tokens for critical tools.
type Change struct {
	TokenTTL Duration `toml:"token_ttl"`
}

// Guard says when the person at the client confirms a high or critical
// call. No tool changes it: a model must never be able to turn off the
// question that is put to the person.
type Guard struct {
	// Elicitation: "preferred" asks the person when the client can ask
	// (MCP elicitation) and falls back to confirm/reason and change tokens
	// when it cannot; "required" refuses high and critical calls from
	// clients that cannot ask; "off" never asks.
	Elicitation string `toml:"elicitation"`
	// ElicitationTimeout is how long the person has to answer; no answer
	// in time counts as a decline.
	ElicitationTimeout Duration `toml:"elicitation_timeout"`

	// High and Critical name the channel that approves a call of that
	// risk: ChannelClient (the MCP client: elicitation, confirm and
	// reason, change tokens) or ChannelDevice (the Pi itself: the button
	// when one is wired, or `raspi-mcp approve` at the console). Whatever
	// they say, a configuration change that widens a power needs the
	// device.
	High     string `toml:"high"`
	Critical string `toml:"critical"`
	// ApprovalTimeout is how long a call waits for a device approval; no
	// answer in time is a decline.
	ApprovalTimeout Duration `toml:"approval_timeout"`
	// Approvers are the users besides root who may approve at the console
	// (`raspi-mcp approve`, by peer credentials). Never the principal that
	// asked: a user cannot approve their own call unless as root.
	Approvers []string `toml:"approvers"`
	// Button is a push button on a GPIO input, held by the root helper.
	Button Button `toml:"button"`
}

// Approval channels of [guard] high and critical.
const (
	ChannelClient = "client"
	ChannelDevice = "device"
)

// Button is the approval button ([guard.button]): a short press approves
// the one call waiting, a long press declines it. Its pins are reserved: no
// tool may configure, read or write them.
type Button struct {
	// Pin is the BCM pin of the button's input; -1 (the default) means
	// no button is wired.
	Pin int `toml:"pin"`
	// Pull is the input's bias: "up" (a button to ground, the default),
	// "down" or "none".
	Pull string `toml:"pull"`
	// ActiveLow says a press reads 0 (true with pull "up").
	ActiveLow bool `toml:"active_low"`
	// Debounce is how long the line must hold a level to count.
	Debounce Duration `toml:"debounce"`
	// LongPress is how long a hold must last to decline rather than
	// approve.
	LongPress Duration `toml:"long_press"`
	// LED is the BCM pin of an optional LED that blinks while a call
	// waits and shows the outcome; -1 (the default) means none.
	LED int `toml:"led"`
}

// Wired reports whether a button is configured.
func (b Button) Wired() bool { return b.Pin >= 0 }

// Elicitation modes of [guard] elicitation.
const (
	ElicitPreferred = "preferred"
	ElicitRequired  = "required"
	ElicitOff       = "off"
)

// Domain is the switch every tool namespace has.
type Domain struct {
	Enabled bool `toml:"enabled"`
}

// Logs is the logs namespace: the audit trail, the agent's own logs and the
// systemd journal, limited to the units the owner lists.
type Logs struct {
	Enabled      bool     `toml:"enabled"`
	JournalUnits []string `toml:"journal_units"` // globs of units logs.query_journal and service.get_status may read
}

// Service is the service namespace: every unit can be read, only the listed
// ones changed, and only by the helper.
type Service struct {
	Enabled bool     `toml:"enabled"`
	Control bool     `toml:"control"` // service.control_service and service.set_enabled (risk high)
	Allow   []string `toml:"allow"`   // globs of units that may be changed ("nginx.service", "motion*")
}

// Process is the process namespace: listing is a read; signals are off
// until the owner allows them, and never reach PID 1, kernel threads,
// raspi-mcp itself or the protected users' processes.
type Process struct {
	Enabled        bool     `toml:"enabled"`
	Signals        bool     `toml:"signals"`         // process.send_signal (risk high)
	AllowedSignals []string `toml:"allowed_signals"` // names without SIG: TERM, HUP, ...
	ProtectedUsers []string `toml:"protected_users"` // their processes are never signalled
}

// Metrics is the metrics namespace and its history on the device.
type Metrics struct {
	Enabled          bool     `toml:"enabled"`
	Jobs             bool     `toml:"jobs"`              // metrics.start/stop_sampling_job (risk low)
	DefaultJob       bool     `toml:"default_job"`       // start one sampling job on first run
	DefaultInterval  Duration `toml:"default_interval"`  // its interval, 5s..1h
	DefaultRetention Duration `toml:"default_retention"` // its retention, 1h..168h
	FlushInterval    Duration `toml:"flush_interval"`    // samples are written in batches this often; at most this much is lost on power loss
	MaxJobs          int      `toml:"max_jobs"`
}

// Subscriptions bounds the resource subscriptions the agent keeps. Each one
// is an entry the watcher polls for and a notification per change, and
// until a session ends nothing else frees it, so a client must not be able
// to make them grow without bound.
type Subscriptions struct {
	// PerSession is how many distinct subscriptions (by meaning: the same
	// resource spelled differently is one) one session may hold. The
	// subscribable resources are the summary, the health snapshot and the
	// metrics (about 10 scalars, a few per network interface and disk, each
	// in any window): 32 lets a client watch everything it could show, and
	// no more than a screenful.
	PerSession int `toml:"per_session"`
	// Total is how many all sessions together may hold: 8 clients each at
	// per_session. Each costs the agent well under 1 KiB and a
	// notification per change; the bound keeps many sessions from
	// multiplying it.
	Total int `toml:"total"`
	// MaxURIBytes is the longest URI a subscription may name. The longest
	// meaningful one (a device metric with window and resolution) is about
	// 120 bytes; a subscriptions/listen request keeps the URIs it names for
	// its whole life, so a longer one is refused rather than held.
	MaxURIBytes int `toml:"max_uri_bytes"`
}

// System is the system namespace: reads, plus the power actions that are off
// until the owner turns them on.
type System struct {
	Enabled  bool `toml:"enabled"`
	Reboot   bool `toml:"reboot"`   // system.reboot (risk high: confirm + reason)
	Shutdown bool `toml:"shutdown"` // system.shutdown (risk critical: change token)
	// MinPowerInterval is the least time between two power actions raspi-mcp
	// schedules: a model that reboots after every boot cannot loop the device.
	MinPowerInterval Duration `toml:"min_power_interval"`
}

// Role names, lowest first.
var roleNames = []string{"read", "operate", "admin"}

// Default is the configuration of a fresh install: reads on, every write off,
// members of group raspi-mcp may read. The switches take their defaults from
// the switches table (switches.go).
func Default() Config {
	c := Config{
		Agent: Agent{
			Socket:   "/run/raspi-mcp/mcp.sock",
			State:    "/var/lib/raspi-mcp/state.db",
			LogLevel: "info",
			// The agent's live heap is a few MiB and each call allocates
			// much of it anew (mostly in the MCP SDK's decoder): at Go's
			// default of 100 it collects every few calls. 400 with a 24 MiB
			// soft limit spends about a third less CPU per call for some
			// MiB of heap, and the limit keeps a burst from growing it.
			GCPercent:      200,
			MemoryLimitMiB: 24,
			// A call is a few hundred µs of work handed between
			// goroutines; on one P the handoff needs no other thread to
			// wake, which measured about 40% less CPU and half the
			// context switches per call on two cores. A Pi Zero has one
			// core anyway.
			MaxProcs: 1,
		},
		Helper: Helper{
			Socket:    "/run/raspi-mcp-helper/helper.sock",
			AgentUser: "raspi-mcp",
			Timeout:   Duration(10 * time.Second),
			// privhelper/proto's DefaultSystemdTimeout and DefaultJobTimeout
			// (privhelper's tests check they agree): 90 s is systemd's own
			// default bound on what it waits for; a job gets 30 s more to
			// get through systemd's queue.
			SystemdTimeout: Duration(90 * time.Second),
			JobTimeout:     Duration(120 * time.Second),
			StateDir:       "/var/lib/raspi-mcp-helper",
		},
		Roles: Roles{
			Users:  map[string]string{},
			Groups: map[string]string{"raspi-mcp": "read"},
		},
		Profiles: map[string]Profile{},
		Change:   Change{TokenTTL: Duration(5 * time.Minute)},
		HTTP:     defaultHTTP(),
		Sessions: defaultSessions(),
		Guard: Guard{Elicitation: ElicitPreferred, ElicitationTimeout: Duration(120 * time.Second),
			High: ChannelClient, Critical: ChannelDevice, ApprovalTimeout: Duration(2 * time.Minute), Approvers: []string{},
			Button: Button{Pin: -1, LED: -1, Pull: "up", ActiveLow: true, Debounce: Duration(30 * time.Millisecond), LongPress: Duration(1500 * time.Millisecond)}},
		System: System{MinPowerInterval: Duration(10 * time.Minute)},
		GPIO:   GPIO{Revert: "previous", Pins: []Pin{}},
		Camera: Camera{MediaRoot: "/var/lib/raspi-mcp/media", MaxImageBytes: 1 << 20},
		I2C:    I2C{Read: []string{}, Write: []string{}, Sensors: []Sensor{}},
		Metrics: Metrics{DefaultJob: true, DefaultInterval: Duration(10 * time.Second),
			DefaultRetention: Duration(48 * time.Hour), FlushInterval: Duration(45 * time.Minute), MaxJobs: 8},
		Logs:    Logs{JournalUnits: []string{"*"}},
		Manage:  Manage{UpdateHealthTimeout: Duration(2 * time.Minute)},
		Service: Service{Allow: []string{}},
		Process: Process{AllowedSignals: []string{"TERM", "INT", "HUP", "USR1", "USR2"}, ProtectedUsers: []string{"root"}},
	}
	c.Subscriptions = Subscriptions{PerSession: 32, Total: 256, MaxURIBytes: 1024}
	for _, s := range Switches() {
		s.Set(&c, s.Default())
	}
	return c
}

// Load reads path over the defaults, then its drop-ins (see DropIns), and
// checks the result.
func Load(path string) (Config, error) { return load(path, nil) }

// DropIns lists the files that Load reads after path: config.d/*.toml beside
// it, in name order. The packaged config.toml is a conffile, so owners who
// put their settings in config.d/ never get asked about it on upgrade. Each
// file is decoded over the previous ones: tables merge key by key (roles
// from two files add up), arrays replace (a pins list is whole).
func DropIns(path string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(path), "config.d", "*.toml"))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	sort.Strings(files)
	return files, nil
}

// Parse decodes TOML over the defaults, rejecting unknown keys, and validates.
func Parse(data []byte) (Config, error) {
	c := Default()
	at := located{}
	if probs, _ := decodeFile(&c, "", data, at, map[string]bool{}); len(probs) > 0 {
		sortProblems(probs, nil)
		return Config{}, probs
	}
	if err := c.Validate(); err != nil {
		var ps Problems
		errors.As(err, &ps)
		for i := range ps {
			ps[i] = at.place(ps[i], "")
		}
		sortProblems(ps, nil)
		return Config{}, ps
	}
	return c, nil
}

// clearLists empties every list a drop-in sets before it is decoded. The
// TOML decoder fills a list's elements in place, so entry i of a drop-in's
// pins (or [[upstream]]) would inherit the keys it leaves out from entry i
// of the file before: another pin's pull, another upstream's token.
func clearLists(c *Config, data []byte) error {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return err // decode reports it with its position
	}
	isList := func(v any) bool {
		switch v.(type) {
		case []any, []map[string]any:
			return true
		}
		return false
	}
	top := reflect.ValueOf(c).Elem()
	for key, v := range doc {
		f := fieldByTag(top, key)
		switch {
		case !f.IsValid():
		case isList(v) && f.Kind() == reflect.Slice:
			f.SetZero()
		case f.Kind() == reflect.Struct:
			table, _ := v.(map[string]any)
			for sub, sv := range table {
				if sf := fieldByTag(f, sub); sf.IsValid() && isList(sv) && sf.Kind() == reflect.Slice {
					sf.SetZero()
				}
			}
		}
	}
	return nil
}

// fieldByTag finds the field of struct v whose toml tag names key.
func fieldByTag(v reflect.Value, key string) reflect.Value {
	t := v.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); name == key {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// positioned is a parse error with the offending line quoted, or only its
// message when the error's line is not one of data's: the decoder's
// ErrorWithPosition indexes the lines by it and panics otherwise (a file
// holding just `"\` reports line 0), which would crash the agent and the
// helper at start instead of naming the bad file.
func positioned(perr toml.ParseError, data []byte) string {
	if l := perr.Position.Line; l < 1 || l > bytes.Count(data, []byte("\n"))+1 {
		return perr.Error()
	}
	return strings.TrimSpace(perr.ErrorWithPosition())
}

// Validate checks values that TOML types cannot express.
func (c Config) Validate() error {
	var pr problems
	for key, p := range map[string]string{
		"agent.socket":     c.Agent.Socket,
		"agent.state":      c.Agent.State,
		"helper.socket":    c.Helper.Socket,
		"helper.state_dir": c.Helper.StateDir,
	} {
		if !filepath.IsAbs(p) {
			pr.addf("%s: want an absolute path, got %q", key, p)
		}
	}
	switch c.Agent.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		pr.addf("agent.log_level: want debug, info, warn or error, got %q", c.Agent.LogLevel)
	}
	if g := c.Agent.GCPercent; g != -1 && (g < 25 || g > 10000) {
		pr.addf("agent.gc_percent: want 25..10000, or -1 to collect only at memory_limit_mib, got %d", g)
	}
	if m := c.Agent.MemoryLimitMiB; m < 0 || m > 1<<20 || (m > 0 && m < 8) {
		pr.addf("agent.memory_limit_mib: want 0 (none) or 8..1048576, got %d", m)
	}
	if p := c.Agent.MaxProcs; p < 0 || p > 1024 {
		pr.addf("agent.max_procs: want 0 (one per core) or 1..1024, got %d", p)
	}
	if c.Agent.GCPercent == -1 && c.Agent.MemoryLimitMiB == 0 {
		pr.add(errors.New("agent.gc_percent: -1 needs a memory_limit_mib, or the heap grows without bound"))
	}
	if c.Helper.AgentUser == "" {
		pr.add(errors.New("helper.agent_user: must name the agent's user"))
	}
	if c.Helper.Timeout.D() <= 0 || c.Helper.Timeout.D() > 10*time.Minute {
		pr.addf("helper.timeout: want 1ms..10m, got %s", c.Helper.Timeout.D())
	}
	// Below 10 s a slow method would be cut where it was before issue 28;
	// above 30 m a stuck systemd holds the agent's only helper connection
	// for longer than anyone waits.
	for _, b := range []struct {
		key string
		d   time.Duration
	}{{"helper.systemd_timeout", c.Helper.SystemdTimeout.D()}, {"helper.job_timeout", c.Helper.JobTimeout.D()}} {
		if b.d < 10*time.Second || b.d > 30*time.Minute {
			pr.addf("%s: want 10s..30m, got %s", b.key, b.d)
		}
	}
	if c.Change.TokenTTL.D() < time.Second || c.Change.TokenTTL.D() > time.Hour {
		pr.addf("change.token_ttl: want 1s..1h, got %s", c.Change.TokenTTL.D())
	}
	switch c.Guard.Elicitation {
	case ElicitPreferred, ElicitRequired, ElicitOff:
	default:
		pr.addf("guard.elicitation: want %q, %q or %q, got %q", ElicitPreferred, ElicitRequired, ElicitOff, c.Guard.Elicitation)
	}
	if d := c.Guard.ElicitationTimeout.D(); d < time.Second || d > time.Hour {
		pr.addf("guard.elicitation_timeout: want 1s..1h, got %s", d)
	}
	pr.add(c.Guard.validateApproval())
	if d := c.Manage.UpdateHealthTimeout.D(); d < 10*time.Second || d > 30*time.Minute {
		pr.addf("manage.update_health_timeout: want 10s..30m, got %s", d)
	}
	if d := c.Metrics.DefaultInterval.D(); d < 5*time.Second || d > time.Hour {
		pr.addf("metrics.default_interval: want 5s..1h, got %s", d)
	}
	if d := c.Metrics.DefaultRetention.D(); d < time.Hour || d > 168*time.Hour {
		pr.addf("metrics.default_retention: want 1h..168h, got %s", d)
	}
	if d := c.Metrics.FlushInterval.D(); d < time.Second || d > time.Hour {
		pr.addf("metrics.flush_interval: want 1s..1h, got %s", d)
	}
	if c.Metrics.MaxJobs < 1 || c.Metrics.MaxJobs > 64 {
		pr.addf("metrics.max_jobs: want 1..64, got %d", c.Metrics.MaxJobs)
	}
	if n := c.Subscriptions.PerSession; n < 1 || n > 1024 {
		pr.addf("subscriptions.per_session: want 1..1024, got %d", n)
	}
	if n := c.Subscriptions.Total; n < c.Subscriptions.PerSession || n > 65536 {
		pr.addf("subscriptions.total: want per_session (%d)..65536, got %d", c.Subscriptions.PerSession, n)
	}
	if n := c.Subscriptions.MaxURIBytes; n < 128 || n > 64<<10 {
		pr.addf("subscriptions.max_uri_bytes: want 128..65536, got %d", n)
	}
	if !filepath.IsAbs(c.Camera.MediaRoot) {
		pr.addf("camera.media_root: want an absolute path, got %q", c.Camera.MediaRoot)
	}
	if c.Camera.MaxImageBytes < 1024 || c.Camera.MaxImageBytes > 8<<20 {
		pr.addf("camera.max_image_bytes: want 1024..8388608, got %d", c.Camera.MaxImageBytes)
	}
	if u := c.Camera.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" {
			pr.addf("camera.public_url: want an http or https URL without query, got %q", u)
		}
	}
	pr.add(c.GPIO.validate())
	// The button's pins are the owner's consent: a tool that could read
	// or drive them could watch for, or fake, an approval.
	for _, pin := range c.Guard.ReservedPins() {
		if p, ok := c.GPIO.Pin(pin); ok {
			pr.addf("guard.button: GPIO%d (the approval button or its LED) is also in [gpio] pins (%q): the button's pins are reserved, and config check refuses overlaps with tool allowlists; take it out of [gpio] pins or wire the button elsewhere", pin, p.Name)
		}
	}
	if d := c.System.MinPowerInterval.D(); d < 0 || d > 24*time.Hour {
		pr.addf("system.min_power_interval: want 0s..24h, got %s", d)
	}
	for key, globs := range map[string][]string{"service.allow": c.Service.Allow, "logs.journal_units": c.Logs.JournalUnits} {
		for _, g := range globs {
			if err := checkUnitGlob(g); err != nil {
				pr.addf("%s: %w", key, err)
			}
		}
	}
	for _, sig := range c.Process.AllowedSignals {
		if !knownSignal(sig) {
			pr.addf("process.allowed_signals: want signal names such as TERM or HUP, got %q", sig)
		}
	}
	for key, list := range map[string][]string{"i2c.read": c.I2C.Read, "i2c.write": c.I2C.Write} {
		for _, e := range list {
			if _, _, err := ParseI2CAddr(e); err != nil {
				pr.addf("%s: %w", key, err)
			}
		}
	}
	names := map[string]bool{}
	for i, sn := range c.I2C.Sensors {
		switch {
		case sn.Name == "" || names[sn.Name]:
			pr.addf("i2c.sensors[%d].name: want a unique name, got %q", i, sn.Name)
		case !slices.Contains([]string{"bme280", "bmp280", "tmp102", "lm75", "tmp75", "tmp105", "tmp275"}, sn.Type):
			pr.addf("i2c.sensors[%d].type: want bme280, bmp280, tmp102, lm75, tmp75, tmp105 or tmp275, got %q", i, sn.Type)
		case sn.Bus < 0 || sn.Address < 0x03 || sn.Address > 0x77:
			pr.addf("i2c.sensors[%d]: bus %d address 0x%x out of range", i, sn.Bus, sn.Address)
		}
		names[sn.Name] = true
	}
	pr.add(validateUpstreams(c.Upstreams))
	pr.add(c.HTTP.validate())
	pr.add(c.Sessions.validate())
	pr.add(c.validateProfiles())
	return pr.err()
}

func (g GPIO) validate() error {
	var pr problems
	if g.Revert != "previous" && g.Revert != "inverse" {
		pr.addf("gpio.revert: want previous or inverse, got %q", g.Revert)
	}
	seen := map[int]bool{}
	for i, p := range g.Pins {
		switch {
		case p.Pin < 0 || p.Pin > 53 || seen[p.Pin]:
			pr.addf("gpio.pins[%d].pin: want a unique BCM number 0..53, got %d", i, p.Pin)
		case p.Mode != "input" && p.Mode != "output":
			pr.addf("gpio.pins[%d].mode: want input or output, got %q", i, p.Mode)
		case p.Value != 0 && p.Value != 1:
			pr.addf("gpio.pins[%d].value: want 0 or 1, got %d", i, p.Value)
		case p.Pull != "" && p.Pull != "none" && p.Pull != "up" && p.Pull != "down":
			pr.addf("gpio.pins[%d].pull: want none, up or down, got %q", i, p.Pull)
		}
		seen[p.Pin] = true
	}
	return pr.err()
}

// checkUnitGlob accepts unit names and globs: systemd's unit name characters
// plus * ? [ ], never a leading "-" (it must never read as an option).
func checkUnitGlob(g string) error {
	if g == "" || len(g) > 256 || g[0] == '-' {
		return fmt.Errorf("want a unit name or glob, got %q", g)
	}
	for _, r := range g {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":_.@-\\*?[]", r)) {
			return fmt.Errorf("want a unit name or glob, got %q (character %q)", g, r)
		}
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", g, err)
	}
	return nil
}

// UnitMatches reports whether a unit ("nginx.service") matches one of the
// globs; a glob without a type suffix also matches its .service unit, so
// "nginx" allows nginx.service.
func UnitMatches(globs []string, unit string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, unit); ok {
			return true
		}
		if !strings.Contains(g, ".") {
			if ok, _ := path.Match(g+".service", unit); ok {
				return true
			}
		}
	}
	return false
}

// signalNames are the signals an owner may allow (Linux numbering is the
// helper's business; config speaks names).
var signalNames = []string{"HUP", "INT", "QUIT", "USR1", "USR2", "TERM", "KILL", "STOP", "CONT", "WINCH", "ALRM"}

func knownSignal(s string) bool { return slices.Contains(signalNames, s) }

// Pin returns the allowlist entry of a BCM pin.
func (g GPIO) Pin(n int) (Pin, bool) {
	for _, p := range g.Pins {
		if p.Pin == n {
			return p, true
		}
	}
	return Pin{}, false
}

// ParseI2CAddr reads "1:0x76" or "1:*" (addr -1).
func ParseI2CAddr(s string) (bus, addr int, err error) {
	b, a, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want bus:address such as 1:0x76 or 1:*, got %q", s)
	}
	if _, err := fmt.Sscanf(b, "%d", &bus); err != nil || bus < 0 || fmt.Sprint(bus) != b {
		return 0, 0, fmt.Errorf("bad bus in %q", s)
	}
	if a == "*" {
		return bus, -1, nil
	}
	v, err := strconv.ParseUint(a, 0, 8)
	if err != nil || v < 0x03 || v > 0x77 {
		return 0, 0, fmt.Errorf("want an address 0x03..0x77 in %q", s)
	}
	return bus, int(v), nil
}

// I2CAllowed reports whether list allows bus:addr.
func I2CAllowed(list []string, bus, addr int) bool {
	for _, e := range list {
		b, a, err := ParseI2CAddr(e)
		if err == nil && b == bus && (a == -1 || a == addr) {
			return true
		}
	}
	return false
}

// ValidRole reports whether s names a role.
func ValidRole(s string) bool {
	for _, r := range roleNames {
		if s == r {
			return true
		}
	}
	return false
}

// Encode writes c as TOML, used to hand the effective laptop-mode config to the helper.
func (c Config) Encode() ([]byte, error) {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	return b.Bytes(), nil
}

// Duration is a time.Duration written as "10s" or "5m" in TOML.
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalText implements encoding.TextUnmarshaler for TOML strings.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration such as \"10s\" or \"5m\", got %q", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// The simulated board's approval button and its LED ([guard.button] in
// laptop mode): BCM pins the laptop's [gpio] pins leave free.
const (
	LaptopButtonPin = 26
	LaptopButtonLED = 21
)

// Laptop returns the configuration of `raspi-mcp serve --sim`: sockets and
// state under dir, the invoking user as the helper's agent and as admin, and
// every domain and write switched on so the whole flow can be tried.
func Laptop(dir, user string) Config { return LaptopFrom(Default(), dir, user) }

// LaptopFrom applies the laptop-mode overrides to base, so `serve --sim
// --config FILE` keeps FILE's other settings (flush interval, upstreams).
func LaptopFrom(base Config, dir, user string) Config {
	c := base
	c.Agent.Socket = filepath.Join(dir, "mcp.sock")
	c.Agent.State = filepath.Join(dir, "state.db")
	c.Agent.SocketGroup = ""
	c.Helper.Socket = filepath.Join(dir, "helper.sock")
	c.Helper.AgentUser = user
	c.Helper.StateDir = dir
	if c.HTTP.Tokens == defaultHTTP().Tokens {
		c.HTTP.Tokens = filepath.Join(dir, "tokens.toml")
	}
	c.Roles.Users = map[string]string{user: "admin"}
	// The laptop's user answers at the console too; like anyone but
	// root, they may decline their own calls there, not approve them (the
	// simulated button approves: raspi-mcp sim press).
	if user != "" && !slices.Contains(c.Guard.Approvers, user) {
		c.Guard.Approvers = append(slices.Clone(c.Guard.Approvers), user)
	}
	c.System = System{Enabled: true, Reboot: true, Shutdown: true}
	c.Metrics.Enabled, c.Metrics.Jobs = true, true
	// The simulated board: a relay, an LED, a fan on hardware PWM, a button;
	// a BME280 and a TMP102 on bus 1.
	c.GPIO = GPIO{Enabled: true, Writes: true, Revert: base.GPIO.Revert, Pins: []Pin{
		{Pin: 17, Name: "relay", Mode: "output", Value: 0}, {Pin: 27, Name: "led", Mode: "output", Value: 0},
		{Pin: 18, Name: "fan", Mode: "output", Value: 0, PWM: true}, {Pin: 4, Name: "button", Mode: "input", Pull: "up"}}}
	// The approval button, on pins none of the above uses; `raspi-mcp sim
	// press` presses it. A button the base config wires stays as it is.
	if !base.Guard.Button.Wired() {
		c.Guard.Button.Pin, c.Guard.Button.LED = LaptopButtonPin, LaptopButtonLED
	}
	c.I2C = I2C{Enabled: true, Writes: true, Read: []string{"1:*"}, Write: []string{"1:0x48"},
		Sensors: []Sensor{{Name: "greenhouse", Type: "bme280", Bus: 1, Address: 0x76}, {Name: "case", Type: "tmp102", Bus: 1, Address: 0x48}}}
	c.Logs.Enabled, c.Manage.Enabled = true, true
	c.Network.Enabled = true
	// The simulated systemd's units and the simulated board's processes
	// (never the laptop's): both may be changed; root's are protected.
	c.Service = Service{Enabled: true, Control: true, Allow: []string{"nginx.service", "motion.service", "backup.service", "dbus.service"}}
	c.Process.Enabled, c.Process.Signals = true, true
	c.Camera.Enabled, c.Camera.MediaRoot = true, filepath.Join(dir, "media")
	// Every switch of the table, so one added later is on here too.
	for _, s := range Switches() {
		s.Set(&c, true)
	}
	return c
}

// validateApproval checks [guard]'s channels and [guard.button].
func (g Guard) validateApproval() error {
	var pr problems
	for _, ch := range []struct{ key, v string }{{"guard.high", g.High}, {"guard.critical", g.Critical}} {
		if ch.v != ChannelClient && ch.v != ChannelDevice {
			pr.addf("guard: %s: want %q or %q, got %q", ch.key, ChannelClient, ChannelDevice, ch.v)
		}
	}
	if d := g.ApprovalTimeout.D(); d < 5*time.Second || d > 30*time.Minute {
		pr.addf("guard.approval_timeout: want 5s..30m, got %s", d)
	}
	for _, u := range g.Approvers {
		if u == "" || strings.ContainsAny(u, " \t\n/:") {
			pr.addf("guard.approvers: %q is not a user name", u)
		}
	}
	b := g.Button
	if b.Pin < -1 || b.Pin > 63 {
		pr.addf("guard.button.pin: want a BCM pin 0..63, or -1 for none, got %d", b.Pin)
	}
	if b.LED < -1 || b.LED > 63 {
		pr.addf("guard.button.led: want a BCM pin 0..63, or -1 for none, got %d", b.LED)
	}
	if b.LED >= 0 && !b.Wired() {
		pr.addf("guard.button.led: an LED (pin %d) needs a button: set guard.button.pin", b.LED)
	}
	if b.Wired() && b.LED == b.Pin {
		pr.addf("guard.button: pin and led are both %d", b.Pin)
	}
	switch b.Pull {
	case "up", "down", "none":
	default:
		pr.addf("guard.button.pull: want \"up\", \"down\" or \"none\", got %q", b.Pull)
	}
	if d := b.Debounce.D(); d < time.Millisecond || d > time.Second {
		pr.addf("guard.button.debounce: want 1ms..1s, got %s", d)
	}
	if d := b.LongPress.D(); d < 200*time.Millisecond || d > 10*time.Second || d <= b.Debounce.D() {
		pr.addf("guard.button.long_press: want 200ms..10s and longer than debounce, got %s", d)
	}
	return pr.err()
}

// ReservedPins are the BCM pins the approval button holds (its input and
// LED): no tool may configure, read or write them.
func (g Guard) ReservedPins() []int {
	var pins []int
	if g.Button.Wired() {
		pins = append(pins, g.Button.Pin)
		if g.Button.LED >= 0 {
			pins = append(pins, g.Button.LED)
		}
	}
	return pins
}

// DeviceApproves reports whether a call of risk ("high", "critical") needs
// a device approval under this configuration.
func (g Guard) DeviceApproves(risk string) bool {
	switch risk {
	case "high":
		return g.High == ChannelDevice
	case "critical":
		return g.Critical == ChannelDevice
	}
	return false
}

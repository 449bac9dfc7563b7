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
	"os"
	"path/filepath"
	"sort"
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
	System  System  `toml:"system"`
	Metrics Metrics `toml:"metrics"`
	Logs    Domain  `toml:"logs"`
	Manage  Domain  `toml:"manage"`
}

// Agent configures the unprivileged MCP agent.
type Agent struct {
	Socket            string `toml:"socket"`              // MCP socket that `raspi-mcp stdio` bridges to
	SocketGroup       string `toml:"socket_group"`        // group allowed to connect ("" = the agent's own)
	State             string `toml:"state"`               // bbolt file: audit, tokens, jobs, samples
	LogLevel          string `toml:"log_level"`           // debug, info, warn, error
	ExposeDottedNames bool   `toml:"expose_dotted_names"` // wire names "system.reboot" instead of "system_reboot"
}

// Helper configures the root helper and how the agent reaches it.
type Helper struct {
	Socket    string   `toml:"socket"`
	AgentUser string   `toml:"agent_user"` // user name or numeric uid of the only non-root peer the helper accepts
	Timeout   Duration `toml:"timeout"`    // per privileged call
}

// Roles maps Unix users and groups to roles. uid 0 is always admin; anyone
// unmapped is refused.
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

// Domain is the switch every tool namespace has.
type Domain struct {
	Enabled bool `toml:"enabled"`
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

// System is the system namespace: reads, plus the power actions that are off
// until the owner turns them on.
type System struct {
	Enabled  bool `toml:"enabled"`
	Reboot   bool `toml:"reboot"`   // system.reboot (risk high: confirm + reason)
	Shutdown bool `toml:"shutdown"` // system.shutdown (risk critical: change token)
}

// Role names, lowest first.
var roleNames = []string{"read", "operate", "admin"}

// Default is the configuration of a fresh install: reads on, every write off,
// members of group raspi-mcp may read.
func Default() Config {
	return Config{
		Agent: Agent{
			Socket:   "/run/raspi-mcp/mcp.sock",
			State:    "/var/lib/raspi-mcp/state.db",
			LogLevel: "info",
		},
		Helper: Helper{
			Socket:    "/run/raspi-mcp/helper.sock",
			AgentUser: "raspi-mcp",
			Timeout:   Duration(10 * time.Second),
		},
		Roles: Roles{
			Users:  map[string]string{},
			Groups: map[string]string{"raspi-mcp": "read"},
		},
		Change: Change{TokenTTL: Duration(5 * time.Minute)},
		System: System{Enabled: true},
		Metrics: Metrics{Enabled: true, DefaultJob: true, DefaultInterval: Duration(10 * time.Second),
			DefaultRetention: Duration(48 * time.Hour), FlushInterval: Duration(60 * time.Second), MaxJobs: 8},
		Logs:   Domain{Enabled: true},
		Manage: Domain{Enabled: true},
	}
}

// Load reads path over the defaults and checks the result.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config: %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes TOML over the defaults, rejecting unknown keys, and validates.
func Parse(data []byte) (Config, error) {
	c := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return Config{}, errors.New(strings.TrimSpace(perr.ErrorWithPosition()))
		}
		return Config{}, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return Config{}, fmt.Errorf("unknown key %q (see config.example.toml for every key)", keys[0])
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks values that TOML types cannot express.
func (c Config) Validate() error {
	for key, p := range map[string]string{
		"agent.socket":  c.Agent.Socket,
		"agent.state":   c.Agent.State,
		"helper.socket": c.Helper.Socket,
	} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s: want an absolute path, got %q", key, p)
		}
	}
	switch c.Agent.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("agent.log_level: want debug, info, warn or error, got %q", c.Agent.LogLevel)
	}
	if c.Helper.AgentUser == "" {
		return errors.New("helper.agent_user: must name the agent's user")
	}
	if c.Helper.Timeout.D() <= 0 || c.Helper.Timeout.D() > 10*time.Minute {
		return fmt.Errorf("helper.timeout: want 1ms..10m, got %s", c.Helper.Timeout.D())
	}
	if c.Change.TokenTTL.D() < time.Second || c.Change.TokenTTL.D() > time.Hour {
		return fmt.Errorf("change.token_ttl: want 1s..1h, got %s", c.Change.TokenTTL.D())
	}
	if d := c.Metrics.DefaultInterval.D(); d < 5*time.Second || d > time.Hour {
		return fmt.Errorf("metrics.default_interval: want 5s..1h, got %s", d)
	}
	if d := c.Metrics.DefaultRetention.D(); d < time.Hour || d > 168*time.Hour {
		return fmt.Errorf("metrics.default_retention: want 1h..168h, got %s", d)
	}
	if d := c.Metrics.FlushInterval.D(); d < time.Second || d > time.Hour {
		return fmt.Errorf("metrics.flush_interval: want 1s..1h, got %s", d)
	}
	if c.Metrics.MaxJobs < 1 || c.Metrics.MaxJobs > 64 {
		return fmt.Errorf("metrics.max_jobs: want 1..64, got %d", c.Metrics.MaxJobs)
	}
	for kind, m := range map[string]map[string]string{"users": c.Roles.Users, "groups": c.Roles.Groups} {
		for name, role := range m {
			if !ValidRole(role) {
				return fmt.Errorf("roles.%s.%s: want one of %s, got %q", kind, name, strings.Join(roleNames, ", "), role)
			}
		}
	}
	return nil
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
	c.Roles.Users = map[string]string{user: "admin"}
	c.System = System{Enabled: true, Reboot: true, Shutdown: true}
	c.Metrics.Enabled, c.Metrics.Jobs = true, true
	c.Logs.Enabled, c.Manage.Enabled = true, true
	return c
}

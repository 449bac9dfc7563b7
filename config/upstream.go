package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Upstream is one [[upstream]] entry: another MCP server of the LAN (a
// HomeSeer HS4, a webhook gateway, ...) that the agent mounts as an extra
// namespace. Its tools appear as <name>_<tool> (<name>.<tool> with
// expose_dotted_names) and go through the same roles, guards and audit as
// the local tools.
//
// Keys left out keep their zero value, which means the default: use
// IsEnabled, CallTimeout, Exposes and RuleFor (or WithDefaults) rather than
// reading Enabled, Timeout, Allow and Critical directly.
//
// Like every list, [[upstream]] in a drop-in replaces the whole list of the
// files before it (Load clears it first, so no key of an earlier entry, such
// as its token, is carried over).
type Upstream struct {
	// Name is the wire prefix: ^[a-z][a-z0-9]{0,15}$, unique, not a local namespace.
	Name string `toml:"name"`
	// URL is a streamable-HTTP endpoint (http or https; the client falls
	// back to SSE). Exactly one of URL and Command is set.
	URL string `toml:"url,omitempty"`
	// Command and Args start a local stdio MCP server. Command is an
	// absolute path or a bare name looked up in PATH.
	Command string   `toml:"command,omitempty"`
	Args    []string `toml:"args,omitempty"`
	// Token is a reference to a bearer token, "env:NAME" or "file:/path"
	// (url only; "" = no Authorization header). An inline token is refused:
	// resolve it with BearerToken at connect time, show it with TokenRef.
	Token string `toml:"token,omitempty"`
	// TLSFingerprint pins the upstream's certificate (https URLs only):
	// "sha256:" and the hex SHA-256 of the leaf certificate's DER, as
	// `raspi-mcp status` prints it for a device's own HTTP endpoint. When set,
	// that certificate alone is accepted, whatever the system roots or the
	// names in it say, so a device's self-signed certificate is trusted
	// without a CA. "" = the system roots decide. Fingerprint gives the
	// canonical form.
	TLSFingerprint string `toml:"tls_fingerprint,omitempty"`
	// Timeout limits one call to the upstream, 1s..5m; 0 (unset) = 10s.
	Timeout Duration `toml:"timeout,omitempty"`
	// Enabled: nil (unset) = true. A disabled upstream is checked but not connected.
	Enabled *bool `toml:"enabled,omitempty"`
	// Allow and Deny are path.Match globs over the upstream's own tool names
	// (without the prefix); a tool is exposed if it matches Allow and not
	// Deny. Allow nil (unset) = ["*"]; an empty list is an error.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny,omitempty"`
	// Critical globs make tools role admin, risk critical (change token).
	// nil (unset) = ["*admin*", "*delete*"]; [] = no tool is critical by name.
	Critical []string `toml:"critical"`
	// Rules override role and risk per tool glob; the first match wins. See RuleFor.
	Rules []UpstreamRule `toml:"rules,omitempty"`
	// AllowHosts lists host names, IP addresses and CIDR prefixes allowed
	// beyond the default loopback, private and link-local ranges (url only).
	// See CheckAddrs.
	AllowHosts []string `toml:"allow_hosts,omitempty"`
}

// UpstreamRule sets the role and/or risk of the upstream tools matching a glob:
// rules = [ { match = "devices_*", role = "operate", risk = "low" } ].
type UpstreamRule struct {
	Match string `toml:"match"`          // path.Match glob over the upstream's tool name
	Role  string `toml:"role,omitempty"` // read, operate, admin; "" = the default for the risk
	Risk  string `toml:"risk,omitempty"` // read, low, high, critical; "" = the default risk
}

// Upstream defaults and limits.
const (
	DefaultUpstreamTimeout = 10 * time.Second
	minUpstreamTimeout     = time.Second
	maxUpstreamTimeout     = 5 * time.Minute
)

// The globs of an upstream without allow or critical keys.
var (
	defaultUpstreamAllow    = []string{"*"}
	defaultUpstreamCritical = []string{"*admin*", "*delete*"}
)

// riskNames are the risk levels, lowest first.
var riskNames = []string{"read", "low", "high", "critical"}

// The name checks below are written out rather than regular expressions:
// these three were all that linked package regexp into the helper.

// validUpstreamName reports whether s matches ^[a-z][a-z0-9]{0,15}$.
func validUpstreamName(s string) bool {
	if len(s) == 0 || len(s) > 16 || !isLowerASCII(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isLowerASCII(s[i]) && !isDigitASCII(s[i]) {
			return false
		}
	}
	return true
}

// validEnvName reports whether s matches ^[A-Za-z_][A-Za-z0-9_]*$.
func validEnvName(s string) bool {
	if len(s) == 0 || isDigitASCII(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerASCII(c|0x20) && !isDigitASCII(c) && c != '_' {
			return false
		}
	}
	return true
}

// validHostLabel reports whether s matches
// ^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$: 1 to 63 of those, no hyphen at
// either end.
func validHostLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLowerASCII(c) && !isDigitASCII(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLowerASCII(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigitASCII(c byte) bool { return '0' <= c && c <= '9' }

// IsEnabled reports whether the agent should connect: enabled unset or true.
func (u Upstream) IsEnabled() bool { return u.Enabled == nil || *u.Enabled }

// CallTimeout is the time limit of one call: timeout, or 10s when unset.
func (u Upstream) CallTimeout() time.Duration {
	if u.Timeout == 0 {
		return DefaultUpstreamTimeout
	}
	return u.Timeout.D()
}

// WithDefaults returns u with the unset keys filled in (enabled, timeout,
// allow, critical), for status and for code that reads the fields.
func (u Upstream) WithDefaults() Upstream {
	on := u.IsEnabled()
	u.Enabled = &on
	u.Timeout = Duration(u.CallTimeout())
	u.Allow = slices.Clone(u.allowGlobs())
	u.Critical = slices.Clone(u.criticalGlobs())
	return u
}

func (u Upstream) allowGlobs() []string {
	if u.Allow == nil {
		return defaultUpstreamAllow
	}
	return u.Allow
}

func (u Upstream) criticalGlobs() []string {
	if u.Critical == nil {
		return defaultUpstreamCritical
	}
	return u.Critical
}

// validateUpstreams checks every [[upstream]] entry and that names are unique
// and not local namespaces.
func validateUpstreams(ups []Upstream) error {
	seen := map[string]bool{}
	for i, u := range ups {
		if err := u.validate(); err != nil {
			return fmt.Errorf("upstream[%d] %q: %w", i, u.Name, err)
		}
		if seen[u.Name] {
			return fmt.Errorf("upstream[%d] %q: name: used by an earlier upstream", i, u.Name)
		}
		seen[u.Name] = true
	}
	return checkUpstreamNames(ups, LocalNamespaces())
}

// CheckUpstreamNames reports an upstream whose name is one of local, the
// prefixes of the agent's own tools ("system", "gpio", ...). Validate checks
// the namespaces of the switches table (LocalNamespaces); the agent calls
// this with its registry's real prefixes.
func (c Config) CheckUpstreamNames(local []string) error {
	return checkUpstreamNames(c.Upstreams, local)
}

func checkUpstreamNames(ups []Upstream, local []string) error {
	for i, u := range ups {
		if slices.Contains(local, u.Name) {
			return fmt.Errorf("upstream[%d] %q: name: %q is a local namespace; pick another prefix", i, u.Name, u.Name)
		}
	}
	return nil
}

func (u Upstream) validate() error {
	if !validUpstreamName(u.Name) {
		return errors.New("name: want 1 to 16 lowercase letters and digits, starting with a letter (it prefixes the tool names)")
	}
	switch {
	case u.URL != "" && u.Command != "":
		return errors.New("url, command: set one of them, not both")
	case u.URL == "" && u.Command == "":
		return errors.New("url, command: want url (an HTTP MCP endpoint) or command (a local stdio MCP server)")
	case u.URL != "":
		if err := u.checkURL(); err != nil {
			return err
		}
		if len(u.Args) > 0 {
			return errors.New("args: only with command")
		}
		if u.TLSFingerprint != "" {
			if p, _ := url.Parse(u.URL); p.Scheme != "https" {
				return errors.New("tls_fingerprint: only with an https:// url (a pin means nothing without TLS)")
			}
			if _, err := parseFingerprint(u.TLSFingerprint); err != nil {
				return err
			}
		}
	default:
		if err := checkCommand(u.Command); err != nil {
			return err
		}
		if u.Token != "" {
			return errors.New("token: only with url (a command gets its secrets from its own environment)")
		}
		if len(u.AllowHosts) > 0 {
			return errors.New("allow_hosts: only with url")
		}
		if u.TLSFingerprint != "" {
			return errors.New("tls_fingerprint: only with an https:// url")
		}
	}
	if u.Token != "" {
		if _, _, err := parseTokenRef(u.Token); err != nil {
			return fmt.Errorf("token: %w", err)
		}
	}
	if d := u.Timeout.D(); d != 0 && (d < minUpstreamTimeout || d > maxUpstreamTimeout) {
		return fmt.Errorf("timeout: want 1s..5m, got %s", d)
	}
	if u.Allow != nil && len(u.Allow) == 0 {
		return errors.New("allow: an empty list exposes no tool; set enabled = false instead")
	}
	for _, l := range []struct {
		key   string
		globs []string
	}{{"allow", u.Allow}, {"deny", u.Deny}, {"critical", u.Critical}} {
		for _, g := range l.globs {
			if err := checkToolGlob(g); err != nil {
				return fmt.Errorf("%s: %w", l.key, err)
			}
		}
	}
	for j, r := range u.Rules {
		if err := checkToolGlob(r.Match); err != nil {
			return fmt.Errorf("rules[%d].match: %w", j, err)
		}
		if r.Role == "" && r.Risk == "" {
			return fmt.Errorf("rules[%d]: want role, risk or both", j)
		}
		if r.Role != "" && !ValidRole(r.Role) {
			return fmt.Errorf("rules[%d].role: want one of %s, got %q", j, strings.Join(roleNames, ", "), r.Role)
		}
		if r.Risk != "" && !slices.Contains(riskNames, r.Risk) {
			return fmt.Errorf("rules[%d].risk: want one of %s, got %q", j, strings.Join(riskNames, ", "), r.Risk)
		}
	}
	for _, h := range u.AllowHosts {
		if err := checkHostEntry(h); err != nil {
			return fmt.Errorf("allow_hosts: %w", err)
		}
	}
	return nil
}

// checkURL vets the endpoint. Errors never quote the whole URL: its query
// might carry a secret.
func (u Upstream) checkURL() error {
	p, err := url.Parse(u.URL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("url: not a valid URL: %v", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return fmt.Errorf("url: want an http:// or https:// URL, got scheme %q", p.Scheme)
	}
	if p.User != nil {
		return errors.New(`url: must not carry credentials (user:password@); use token = "env:NAME" or "file:/path"`)
	}
	host := p.Hostname()
	if host == "" {
		return errors.New("url: want a host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !u.addrAllowed(a) {
			return fmt.Errorf("url: %s is not a loopback, private or link-local address; add it to allow_hosts if the upstream is really there", a.WithZone(""))
		}
		return nil
	}
	if err := checkHostName(normHost(host)); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	return nil
}

// fingerprintPrefix starts a certificate fingerprint, as `raspi-mcp status`
// prints it for the HTTP endpoint's certificate.
const fingerprintPrefix = "sha256:"

// parseFingerprint turns "sha256:" and 64 hex digits (either case, the
// bytes optionally separated by colons as openssl prints them) into the
// canonical form: the prefix and lowercase hex without colons. A
// fingerprint is public, so the error may quote it.
func parseFingerprint(s string) (string, error) {
	bad := fmt.Errorf(`tls_fingerprint: want "sha256:" and 64 hex digits, as raspi-mcp status prints it, got %q`, s)
	hexs, ok := strings.CutPrefix(s, fingerprintPrefix)
	if !ok {
		return "", bad
	}
	if strings.Contains(hexs, ":") {
		pairs := strings.Split(hexs, ":")
		for _, p := range pairs {
			if len(p) != 2 {
				return "", bad
			}
		}
		hexs = strings.Join(pairs, "")
	}
	b, err := hex.DecodeString(hexs)
	if err != nil || len(b) != sha256.Size {
		return "", bad
	}
	return fingerprintPrefix + hex.EncodeToString(b), nil
}

// Fingerprint is the pinned certificate's fingerprint in canonical form
// ("sha256:" and lowercase hex), or "" when none is set or it is invalid
// (Validate refuses the latter).
func (u Upstream) Fingerprint() string {
	fp, err := parseFingerprint(u.TLSFingerprint)
	if err != nil {
		return ""
	}
	return fp
}

// checkCommand accepts an absolute path or a bare name (found in PATH), never
// a relative path that would depend on the working directory.
func checkCommand(cmd string) error {
	switch {
	case strings.ContainsAny(cmd, "\x00\n"):
		return errors.New("command: want a program path or name")
	case strings.HasPrefix(cmd, "-"):
		return fmt.Errorf("command: want a program path or name, got %q", cmd)
	case strings.Contains(cmd, "/") && !filepath.IsAbs(cmd):
		return fmt.Errorf("command: want an absolute path or a bare name found in PATH, got %q", cmd)
	}
	return nil
}

// checkToolGlob vets a path.Match pattern over tool names.
func checkToolGlob(g string) error {
	if g == "" {
		return errors.New("want a tool name or glob, got \"\"")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob %q: %w", g, err)
	}
	return nil
}

// checkHostEntry accepts a host name, an IP address or a CIDR prefix.
func checkHostEntry(h string) error {
	if strings.Contains(h, "/") {
		if _, err := netip.ParsePrefix(h); err != nil {
			return fmt.Errorf("want a host name, an IP address or a CIDR prefix such as 100.64.0.0/10, got %q", h)
		}
		return nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	return checkHostName(normHost(h))
}

func checkHostName(h string) error {
	if h == "" || len(h) > 253 {
		return fmt.Errorf("want a host name, got %q", h)
	}
	for _, l := range strings.Split(h, ".") {
		if !validHostLabel(l) {
			return fmt.Errorf("want a host name, got %q", h)
		}
	}
	return nil
}

// normHost lower-cases a host name and drops a trailing dot.
func normHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// parseTokenRef splits "env:NAME" or "file:/path". Errors never quote the
// value: what was written may be the secret itself.
func parseTokenRef(ref string) (kind, arg string, err error) {
	kind, arg, _ = strings.Cut(ref, ":")
	switch kind {
	case "env":
		if !validEnvName(arg) {
			return "", "", errors.New(`env: wants an environment variable name ([A-Za-z_][A-Za-z0-9_]*), as in token = "env:HS4_TOKEN"`)
		}
	case "file":
		if !filepath.IsAbs(arg) || strings.ContainsRune(arg, 0) {
			return "", "", errors.New(`file: wants an absolute path, as in token = "file:/etc/raspi-mcp/hs4.token"`)
		}
	default:
		return "", "", errors.New(`an inline token is not allowed (it would sit in the config and show in logs); use token = "env:NAME" or token = "file:/path"`)
	}
	return kind, arg, nil
}

// TokenRef is the token reference for status and logs: "env:NAME",
// "file:/path" or "" (no token); never a secret, even before validation.
func (u Upstream) TokenRef() string {
	if u.Token == "" {
		return ""
	}
	if _, _, err := parseTokenRef(u.Token); err != nil {
		return "(invalid)"
	}
	return u.Token
}

// maxTokenBytes bounds a token file.
const maxTokenBytes = 16 << 10

// BearerToken resolves the token reference, at connect time: the value of
// the environment variable, or the file's content without its trailing
// newline. "" with a nil error means no token is configured. Errors name the
// upstream and the reference, never the value.
func (u Upstream) BearerToken() (string, error) {
	if u.Token == "" {
		return "", nil
	}
	kind, arg, err := parseTokenRef(u.Token)
	if err != nil {
		return "", fmt.Errorf("upstream %q: token: %w", u.Name, err)
	}
	var tok string
	switch kind {
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok {
			return "", fmt.Errorf("upstream %q: token %s: environment variable not set", u.Name, u.Token)
		}
		tok = v
	case "file":
		f, err := os.Open(arg)
		if err != nil {
			return "", fmt.Errorf("upstream %q: token %s: %w", u.Name, u.Token, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
		if err != nil {
			return "", fmt.Errorf("upstream %q: token %s: %w", u.Name, u.Token, err)
		}
		if len(b) > maxTokenBytes {
			return "", fmt.Errorf("upstream %q: token %s: file larger than %d bytes", u.Name, u.Token, maxTokenBytes)
		}
		tok = strings.TrimRight(string(b), "\r\n")
	}
	if tok == "" {
		return "", fmt.Errorf("upstream %q: token %s: empty", u.Name, u.Token)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f {
			return "", fmt.Errorf("upstream %q: token %s: contains whitespace or control characters", u.Name, u.Token)
		}
	}
	return tok, nil
}

// Exposes reports whether the upstream's tool (its own name, without the
// prefix) is mounted: it matches an allow glob and no deny glob.
func (u Upstream) Exposes(tool string) bool {
	return matchAny(u.allowGlobs(), tool) && !matchAny(u.Deny, tool)
}

func matchAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// RuleFor gives the role and risk of an upstream tool (its own name, without
// the prefix). The default table, when no rule matches:
//
//	tool matches a critical glob   role admin,   risk critical
//	readOnlyHint true              role read,    risk read
//	otherwise                      role operate, risk high
//
// A critical glob wins over readOnlyHint, which the upstream asserts about
// itself. The first rule whose match glob matches overrides the risk, the
// role or both; a rule with only a risk takes the default role of that risk
// (read: read, low: operate, high: operate, critical: admin); a rule with
// only a role keeps the default risk.
func (u Upstream) RuleFor(tool string, readOnlyHint bool) (role, risk string) {
	switch {
	case matchAny(u.criticalGlobs(), tool):
		role, risk = "admin", "critical"
	case readOnlyHint:
		role, risk = "read", "read"
	default:
		role, risk = "operate", "high"
	}
	for _, r := range u.Rules {
		if ok, _ := path.Match(r.Match, tool); !ok {
			continue
		}
		if r.Risk != "" {
			risk, role = r.Risk, roleForRisk(r.Risk)
		}
		if r.Role != "" {
			role = r.Role
		}
		break
	}
	return role, risk
}

// roleForRisk is the least role a tool of that risk needs by default.
func roleForRisk(risk string) string {
	switch risk {
	case "read":
		return "read"
	case "critical":
		return "admin"
	}
	return "operate"
}

// Host is the URL's host name or address, lower-cased, without port, zone
// brackets or trailing dot; "" for a command upstream or a bad URL.
func (u Upstream) Host() string {
	if u.URL == "" {
		return ""
	}
	p, err := url.Parse(u.URL)
	if err != nil {
		return ""
	}
	return normHost(p.Hostname())
}

// CheckAddrs is called by the client after resolving host (the URL's host
// name, see Host) and before connecting: every address must be loopback,
// private (RFC 1918, fc00::/7) or link-local (169.254.0.0/16, fe80::/10),
// unless host itself or the address (or a prefix holding it) is listed in
// allow_hosts. No address at all is an error. This keeps a DNS answer from
// turning an upstream into a way out to the internet.
func (u Upstream) CheckAddrs(host string, addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return fmt.Errorf("upstream %q: host %s resolved to no address", u.Name, host)
	}
	if u.hostListed(host) {
		return nil
	}
	for _, a := range addrs {
		if !u.addrAllowed(a) {
			return fmt.Errorf("upstream %q: host %s resolved to %s, which is not a loopback, private or link-local address; add the host or the address to allow_hosts if the upstream is really there",
				u.Name, host, a.WithZone(""))
		}
	}
	return nil
}

// hostListed reports whether a host name is in allow_hosts (case and a
// trailing dot ignored; no wildcards).
func (u Upstream) hostListed(host string) bool {
	h := normHost(host)
	for _, e := range u.AllowHosts {
		if normHost(e) == h {
			return true
		}
	}
	return false
}

// addrAllowed: in the default ranges, or in allow_hosts as an address or
// prefix. IPv4-mapped IPv6 addresses count as their IPv4 address.
func (u Upstream) addrAllowed(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return false
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() {
		return true
	}
	for _, e := range u.AllowHosts {
		if p, err := netip.ParsePrefix(e); err == nil {
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			if p.Contains(a) {
				return true
			}
			continue
		}
		if b, err := netip.ParseAddr(e); err == nil && b.WithZone("").Unmap() == a {
			return true
		}
	}
	return false
}

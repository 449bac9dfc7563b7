// Package pairing is how a laptop learns to reach a Pi over HTTPS without
// trusting a stranger's certificate: the Pi prints a pairing line (the
// address, its certificate's SHA-256 fingerprint and a fresh bearer token),
// the laptop stores it in the user's config directory and writes the MCP
// client entries that run `raspi-mcp-laptop connect paired NAME`.
//
// It is pure Go with no Pi-side code, so the laptop binary builds it for
// macOS, Windows and Linux.
package pairing

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Prefix starts every pairing line: it names the program, so a line pasted
// into the wrong place is recognisable, and its version, so a laptop binary
// older than the Pi's says so instead of misreading the rest.
const (
	prefixName = "raspi-mcp-pair:"
	Version    = 1
	Prefix     = prefixName + "v1:"
)

// Line is what a pairing line carries: everything the laptop needs to
// reach the Pi's HTTP endpoint and prove who it is.
type Line struct {
	// TokenName is the token's name on the Pi: the audit trail there names
	// the laptop token:TokenName, and `raspi-mcp pair TokenName` rotates it.
	TokenName string
	// URL is the endpoint, https://HOST:PORT/mcp.
	URL string
	// Fingerprint is the SHA-256 of the Pi's certificate, "sha256:" and
	// lowercase hex as `raspi-mcp status` prints it: the laptop pins it
	// instead of trusting an authority.
	Fingerprint string
	// Token is the bearer secret, shown once on the Pi.
	Token string
	// Role and Profile are the token's; the Pi enforces them, the laptop
	// only shows them.
	Role    string
	Profile string
	// Expires is when the token stops working; zero: never.
	Expires time.Time
}

// wire is the JSON inside a line, with one-letter keys: the line is also a
// QR code, and each byte saved keeps the code small enough to scan from an
// 80-column terminal. The fingerprint travels as unpadded base64url of the
// 32 bytes (43 characters, not 71) for the same reason.
type wire struct {
	N string `json:"n"`           // token name on the Pi
	U string `json:"u"`           // https URL of /mcp
	F string `json:"f"`           // certificate SHA-256, base64url
	T string `json:"t"`           // bearer secret
	R string `json:"r"`           // role
	P string `json:"p,omitempty"` // profile, "" = all
	E int64  `json:"e,omitempty"` // expiry, Unix seconds; 0 = never
}

// Shapes the line's fields must have. A token is the Pi's bearer secret:
// "rmcp_" and 43 base64url characters (internal/bearer, not imported: it
// is Linux-only).
var (
	nameRe    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
	tokenRe   = regexp.MustCompile(`^rmcp_[A-Za-z0-9_-]{43}$`)
	profileRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
)

// Roles a paired token may have: those that may use MCP.
var roles = []string{"read", "operate", "admin"}

// Encode makes the pairing line: Prefix and the base64url of a small JSON
// object. base64url has no character a shell, a terminal or a chat window
// treats specially, so the line can be pasted unquoted.
func Encode(l Line) (string, error) {
	if err := l.check(); err != nil {
		return "", err
	}
	fp, _ := parseFingerprint(l.Fingerprint)
	w := wire{N: l.TokenName, U: l.URL, F: base64.RawURLEncoding.EncodeToString(fp), T: l.Token, R: l.Role, P: l.Profile}
	if !l.Expires.IsZero() {
		w.E = l.Expires.Unix()
	}
	b, err := json.Marshal(w)
	if err != nil {
		return "", fmt.Errorf("pairing: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Decode reads a pairing line. Whitespace anywhere is dropped (a terminal
// that wrapped the line may have put line breaks into the copy), as are
// quotes around it. The errors never quote the line: it holds a secret.
func Decode(s string) (Line, error) {
	s = strings.Trim(strings.Join(strings.Fields(s), ""), `"'`)
	rest, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		if v, ok := strings.CutPrefix(s, prefixName+"v"); ok {
			n, _, _ := strings.Cut(v, ":")
			if ver, err := strconv.Atoi(n); err == nil && ver > Version {
				return Line{}, fmt.Errorf("pairing: the line is of version %d, this program reads version %d: update raspi-mcp-laptop", ver, Version)
			}
		}
		return Line{}, fmt.Errorf("pairing: not a pairing line: it starts with %q (print one on the Pi with: sudo raspi-mcp pair NAME --role operate)", Prefix)
	}
	damaged := errors.New("pairing: the line is damaged or incomplete (was it cut or changed when copied? copy it again whole)")
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Line{}, damaged
	}
	var w wire
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || dec.More() {
		return Line{}, damaged
	}
	fp, err := base64.RawURLEncoding.DecodeString(w.F)
	if err != nil || len(fp) != sha256.Size {
		return Line{}, errors.New("pairing: the line's certificate fingerprint is not a SHA-256: copy the line again whole")
	}
	l := Line{TokenName: w.N, URL: w.U, Fingerprint: "sha256:" + hex.EncodeToString(fp), Token: w.T, Role: w.R, Profile: w.P}
	if w.E != 0 {
		l.Expires = time.Unix(w.E, 0).UTC()
	}
	if err := l.check(); err != nil {
		return Line{}, err
	}
	return l, nil
}

// check refuses a line whose fields could not work. It never quotes the
// token.
func (l Line) check() error {
	if !nameRe.MatchString(l.TokenName) {
		return fmt.Errorf("pairing: token name %q: want 1 to 32 of a-z, 0-9 and '-', not starting or ending with '-'", l.TokenName)
	}
	if err := checkURL(l.URL); err != nil {
		return err
	}
	if _, err := parseFingerprint(l.Fingerprint); err != nil {
		return err
	}
	if !tokenRe.MatchString(l.Token) {
		return errors.New(`pairing: the token is not a raspi-mcp bearer secret ("rmcp_" and 43 characters)`)
	}
	if !validRole(l.Role) {
		return fmt.Errorf("pairing: role %q: want %s (a role that may use MCP)", l.Role, strings.Join(roles, ", "))
	}
	if l.Profile != "" && !profileRe.MatchString(l.Profile) {
		return fmt.Errorf("pairing: profile %q: want 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter", l.Profile)
	}
	return nil
}

func validRole(r string) bool {
	for _, x := range roles {
		if r == x {
			return true
		}
	}
	return false
}

// checkURL accepts https://HOST:PORT/PATH and nothing a client could read
// two ways: no user info, query or fragment.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("pairing: address %q: want https://HOST:PORT/mcp", s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return fmt.Errorf("pairing: address %q: want https://HOST:PORT/mcp, with the port", s)
	}
	return nil
}

// parseFingerprint turns "sha256:" and 64 hex digits (either case, the
// bytes optionally separated by colons as openssl prints them) into the
// digest. A fingerprint is public: the error may quote it.
func parseFingerprint(s string) ([]byte, error) {
	bad := fmt.Errorf(`pairing: fingerprint %q: want "sha256:" and 64 hex digits, as raspi-mcp status prints it`, s)
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return nil, bad
	}
	if strings.Contains(h, ":") {
		parts := strings.Split(h, ":")
		for _, p := range parts {
			if len(p) != 2 {
				return nil, bad
			}
		}
		h = strings.Join(parts, "")
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return nil, bad
	}
	return b, nil
}

// CanonicalFingerprint is a fingerprint as the pairing line and the store
// keep it: "sha256:" and 64 lowercase hex digits.
func CanonicalFingerprint(s string) (string, error) {
	b, err := parseFingerprint(s)
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(b), nil
}

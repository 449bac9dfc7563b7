package pairing

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Pair is one stored pairing: a pairing line as the laptop keeps it, under
// the name the laptop knows the Pi by (`connect paired NAME`).
//
// The token is in the record, readable by the user alone (0600 in a 0700
// directory): the stdio server the MCP client starts needs it, and a
// record without it would need a keychain per OS. It is never printed
// again after pairing.
type Pair struct {
	Name        string    `json:"name"`
	TokenName   string    `json:"token_name"`
	URL         string    `json:"url"`
	Fingerprint string    `json:"fingerprint"`
	Token       string    `json:"token"`
	Role        string    `json:"role"`
	Profile     string    `json:"profile,omitempty"`
	Expires     time.Time `json:"expires,omitzero"` // zero: never
	Paired      time.Time `json:"paired"`
}

// Line is the pairing line the record came from.
func (p Pair) Line() Line {
	return Line{TokenName: p.TokenName, URL: p.URL, Fingerprint: p.Fingerprint, Token: p.Token, Role: p.Role, Profile: p.Profile, Expires: p.Expires}
}

// Expired reports whether the token no longer works at now.
func (p Pair) Expired(now time.Time) bool {
	return !p.Expires.IsZero() && !now.Before(p.Expires)
}

// CheckName accepts a pairing's name: 1 to 32 of a-z, 0-9 and inner
// hyphens, so it is a file name on every OS and an MCP server name every
// client takes.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("pairing: name %q: want 1 to 32 of a-z, 0-9 and '-', not starting or ending with '-'", name)
	}
	return nil
}

// NameFor is the default name of a pairing: the Pi's host name without
// its domain (raspberrypi.local: "raspberrypi") or its IPv4 address with
// '-' for '.', lowercased, with anything a name may not hold made '-';
// "pi" for an IPv6 address or when nothing is left.
func NameFor(rawURL string) string {
	host := rawURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	if strings.HasPrefix(host, "[") { // an IPv6 address: no name in it
		return "pi"
	} else {
		host, _, _ = strings.Cut(host, ":")
	}
	if strings.Trim(host, "0123456789.") != "" { // a name, not an IPv4 address
		host, _, _ = strings.Cut(host, ".")
	}
	var b strings.Builder
	for _, r := range strings.ToLower(host) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	n := b.String()
	if len(n) > 32 {
		n = n[:32]
	}
	n = strings.Trim(n, "-")
	for strings.Contains(n, "--") {
		n = strings.ReplaceAll(n, "--", "-")
	}
	if CheckName(n) != nil {
		return "pi"
	}
	return n
}

// Store is the directory of pairings, one NAME.json each: one file per
// pairing makes re-pairing one atomic rename that touches no other Pi's.
type Store struct {
	Dir string
}

// DefaultStore is the user's: raspi-mcp/pairs in the OS's user config
// directory (~/.config on Linux, ~/Library/Application Support on macOS,
// %AppData% on Windows).
func DefaultStore() (Store, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return Store{}, fmt.Errorf("pairing: no user config directory: %w", err)
	}
	return Store{Dir: filepath.Join(d, "raspi-mcp", "pairs")}, nil
}

// ErrNotPaired is Get's and Remove's error for a name with no pairing.
var ErrNotPaired = errors.New("pairing: not paired")

func (s Store) path(name string) string { return filepath.Join(s.Dir, name+".json") }

// Save stores p, replacing a pairing of the same name whole (re-pairing
// rotates: the old token is of no use once the Pi made a new one). The
// file is written to a temporary name, synced and renamed over the old
// one, so a crash leaves the old pairing or the new one, never half. It
// reports whether a pairing was replaced.
func (s Store) Save(p Pair) (replaced bool, err error) {
	if err := CheckName(p.Name); err != nil {
		return false, err
	}
	if err := p.Line().check(); err != nil {
		return false, err
	}
	if p.Fingerprint, err = CanonicalFingerprint(p.Fingerprint); err != nil {
		return false, err
	}
	if err := s.mkdir(); err != nil {
		return false, err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return false, fmt.Errorf("pairing: %w", err)
	}
	_, err = os.Stat(s.path(p.Name))
	replaced = err == nil
	if err := writeAtomic(s.path(p.Name), append(b, '\n'), 0o600); err != nil {
		return false, err
	}
	return replaced, nil
}

// mkdir makes the directory 0700, and its raspi-mcp parent: the records
// hold tokens. A directory that exists is narrowed to 0700 too.
func (s Store) mkdir() error {
	for _, d := range []string{filepath.Dir(s.Dir), s.Dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("pairing: %w", err)
		}
	}
	if runtime.GOOS != "windows" { // there the user's profile directory is already private
		if err := os.Chmod(s.Dir, 0o700); err != nil {
			return fmt.Errorf("pairing: %w", err)
		}
	}
	return nil
}

// Get returns the pairing named name.
func (s Store) Get(name string) (Pair, error) {
	if err := CheckName(name); err != nil {
		return Pair{}, err
	}
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return Pair{}, fmt.Errorf("%w: no pairing named %q in %s (raspi-mcp-laptop pair list shows them; pair with: raspi-mcp-laptop pair LINE)", ErrNotPaired, name, s.Dir)
	}
	if err != nil {
		return Pair{}, fmt.Errorf("pairing: %w", err)
	}
	var p Pair
	if err := json.Unmarshal(b, &p); err != nil {
		return Pair{}, fmt.Errorf("pairing: %s: %w (pair again to replace it)", s.path(name), err)
	}
	if p.Name != name {
		return Pair{}, fmt.Errorf("pairing: %s names the pairing %q, not %q (pair again to replace it)", s.path(name), p.Name, name)
	}
	if err := p.Line().check(); err != nil {
		return Pair{}, fmt.Errorf("%s: %w (pair again to replace it)", s.path(name), err)
	}
	return p, nil
}

// List returns the pairings by name. A file that does not read as one is
// an error naming it, after the pairings that do.
func (s Store) List() ([]Pair, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pairing: %w", err)
	}
	var out []Pair
	var errs []error
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || CheckName(name) != nil {
			continue // a temporary file, or not ours
		}
		p, err := s.Get(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Remove deletes the pairing named name. The token stays valid on the Pi
// until it is revoked there (sudo raspi-mcp token revoke TOKEN_NAME).
func (s Store) Remove(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	err := os.Remove(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no pairing named %q in %s (raspi-mcp-laptop pair list shows them)", ErrNotPaired, name, s.Dir)
	}
	if err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	return nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory: synced, given mode, then renamed over path (which replaces it
// on Windows too).
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(mode); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("pairing: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pairing: %w", err)
	}
	done = true
	return nil
}

// Package apt is Debian's package manager as raspi-mcp sees it: what an
// upgrade would change (apt-get -s), which version of a package is
// installed and which is a candidate (apt-cache policy), who holds the dpkg
// lock, and how far a run has got (apt's status descriptor).
//
// The parsers are pure functions over apt's text (tests run them on
// fixtures copied from real output). [Linux] runs the read-only commands as
// the unprivileged agent; changes go through [Runner] in the root helper,
// which starts apt as a transient systemd unit outside its own sandbox.
// [Sim] is a simulated package manager for laptops, demos and tests.
package apt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Change is one package in a plan. From is empty for a new install, To for
// a removal.
type Change struct {
	Name     string `json:"name"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Arch     string `json:"arch,omitempty"`
	Origin   string `json:"origin,omitempty"`   // the archives offering To, "Debian:12.15/oldstable, Debian-Security:12/oldstable-security"
	Security bool   `json:"security,omitempty"` // To comes from a security archive
}

// Plan is what a full upgrade would do. Held are the packages apt keeps
// back (held by the owner, or needing a decision apt will not take alone).
type Plan struct {
	Upgrades []Change `json:"upgrades"`
	Installs []Change `json:"installs"`
	Removals []Change `json:"removals"`
	Held     []string `json:"held"`
}

// Empty reports a plan that changes nothing.
func (p Plan) Empty() bool { return len(p.Upgrades)+len(p.Installs)+len(p.Removals) == 0 }

// SecurityCount counts the upgrades and installs from a security archive.
func (p Plan) SecurityCount() int {
	n := 0
	for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
		if c.Security {
			n++
		}
	}
	return n
}

// lines is the plan as sorted, one change a line: what Hash covers and
// Diff compares. Origins are left out: the same version from another
// mirror is the same package.
func (p Plan) lines() []string {
	var out []string
	for _, c := range p.Upgrades {
		out = append(out, fmt.Sprintf("upgrade %s %s -> %s", c.Name, c.From, c.To))
	}
	for _, c := range p.Installs {
		out = append(out, fmt.Sprintf("install %s %s", c.Name, c.To))
	}
	for _, c := range p.Removals {
		out = append(out, fmt.Sprintf("remove %s %s", c.Name, c.From))
	}
	for _, h := range p.Held {
		out = append(out, "hold "+h)
	}
	slices.Sort(out)
	return out
}

// Hash is "sha256:" and the hex SHA-256 of the plan's sorted lines: two
// plans with one hash install, remove and keep exactly the same versions.
func (p Plan) Hash() string {
	sum := sha256.Sum256([]byte(strings.Join(p.lines(), "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Diff lists what changed from old to p: lines only in old ("- ...") and
// lines only in p ("+ ..."), sorted.
func (p Plan) Diff(old Plan) []string {
	was, now := old.lines(), p.lines()
	out := []string{}
	for _, l := range was {
		if !slices.Contains(now, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range now {
		if !slices.Contains(was, l) {
			out = append(out, "+ "+l)
		}
	}
	return out
}

// Targets is the plan as apt-get install arguments: name=version for
// every upgrade and install, name- for every removal. Validate first.
func (p Plan) Targets() []string {
	var out []string
	for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
		out = append(out, c.Name+"="+c.To)
	}
	for _, c := range p.Removals {
		out = append(out, c.Name+"-")
	}
	return out
}

// Validate checks every name and version, so that nothing in a plan can
// read as an option or as something other than one package.
func (p Plan) Validate() error {
	for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
		if err := ValidName(c.Name); err != nil {
			return err
		}
		if err := ValidVersion(c.To); err != nil {
			return fmt.Errorf("%w (package %s)", err, c.Name)
		}
		if c.From != "" {
			if err := ValidVersion(c.From); err != nil {
				return fmt.Errorf("%w (package %s)", err, c.Name)
			}
		}
	}
	for _, c := range p.Removals {
		if err := ValidName(c.Name); err != nil {
			return err
		}
	}
	for _, h := range p.Held {
		if err := ValidName(h); err != nil {
			return err
		}
	}
	return nil
}

// MaxName and MaxVersion bound names and versions; Debian's are far shorter.
const (
	MaxName    = 128
	MaxVersion = 128
)

// ValidName checks a package name as Debian policy defines it (lower-case
// letters, digits, "+", "-" and ".", starting with a letter or digit, at
// least two characters), with an optional ":arch" qualifier.
func ValidName(name string) error {
	base, arch, qualified := strings.Cut(name, ":")
	if len(name) > MaxName || len(base) < 2 || !alnum(base[0]) {
		return fmt.Errorf("apt: package name %q is not a Debian package name", clip(name))
	}
	for i := 0; i < len(base); i++ {
		if c := base[i]; !alnum(c) || ('A' <= c && c <= 'Z') {
			if c != '+' && c != '-' && c != '.' {
				return fmt.Errorf("apt: package name %q has %q; allowed are a-z 0-9 + - .", clip(name), c)
			}
		}
	}
	if qualified {
		if arch == "" {
			return fmt.Errorf("apt: package name %q has an empty architecture", clip(name))
		}
		for i := 0; i < len(arch); i++ {
			if c := arch[i]; !(('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '-') {
				return fmt.Errorf("apt: package name %q has an architecture with %q", clip(name), c)
			}
		}
	}
	return nil
}

// ValidVersion checks a Debian version string: letters, digits and
// . + ~ : -, starting with a digit or letter.
func ValidVersion(v string) error {
	if v == "" || len(v) > MaxVersion || !alnum(v[0]) {
		return fmt.Errorf("apt: version %q is not a Debian version", clip(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !alnum(c) && !strings.ContainsRune(".+~:-", rune(c)) {
			return fmt.Errorf("apt: version %q has %q; allowed are letters, digits and . + ~ : -", clip(v), c)
		}
	}
	return nil
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Policy is apt-cache policy for one package: the installed version ("" if
// none), the candidate ("" if none), and the suites offering the
// candidate ("stable", "bookworm-security").
type Policy struct {
	Installed       string   `json:"installed"`
	Candidate       string   `json:"candidate"`
	CandidateSuites []string `json:"candidate_suites,omitempty"`
}

// UpdateAvailable reports a candidate newer than what is installed (apt
// picks a lower candidate only when pinned, which is no update).
func (p Policy) UpdateAvailable() bool {
	return p.Candidate != "" && p.Candidate != p.Installed && (p.Installed == "" || CompareVersions(p.Candidate, p.Installed) > 0)
}

// Holder is the process holding the dpkg lock.
type Holder struct {
	PID     int    `json:"pid"`
	Command string `json:"command"`
	Lock    string `json:"lock"` // the lock file
}

// Sizes is what a plan downloads and how much more disk it takes once
// installed (negative: it frees space).
type Sizes struct {
	DownloadBytes      int64 `json:"download_bytes"`
	InstalledSizeDelta int64 `json:"installed_size_delta_bytes"`
}

// State is the package manager's state around the plans.
type State struct {
	RebootRequired bool      // /run/reboot-required exists
	RebootPackages []string  // /run/reboot-required.pkgs
	ListsUpdated   time.Time // the last successful apt-get update; zero if never
	Lock           *Holder   // who holds the dpkg lock, nil if free
}

// Source is the read side the agent uses: nothing here changes the system.
type Source interface {
	// Simulate is a full upgrade as apt-get -s dist-upgrade would do it now.
	Simulate(ctx context.Context) (Plan, error)
	// Sizes is the plan's download and installed-size change.
	Sizes(ctx context.Context, p Plan) (Sizes, error)
	// Policy is apt-cache policy for one package.
	Policy(ctx context.Context, pkg string) (Policy, error)
	// State is reboot-required, the lists' age and the dpkg lock.
	State(ctx context.Context) (State, error)
	// Release is the publication date and release notes URL of one
	// version, where the repository gives them (zero and "" otherwise).
	Release(ctx context.Context, pkg, version string) (time.Time, string, error)
	// Installed is the installed version of each named package; a
	// package that is not installed is absent from the map.
	Installed(ctx context.Context, names []string) (map[string]string, error)
}

// NeedsReboot reports the packages of a plan whose upgrade usually needs a
// reboot to take effect: kernels, firmware, the C library, systemd.
func NeedsReboot(p Plan) []string {
	var out []string
	for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
		n, _, _ := strings.Cut(c.Name, ":")
		switch {
		case strings.HasPrefix(n, "linux-image-"), strings.HasPrefix(n, "raspberrypi-kernel"), strings.HasPrefix(n, "raspi-firmware"),
			strings.HasPrefix(n, "raspberrypi-bootloader"), n == "libc6", n == "systemd", n == "dbus", strings.HasPrefix(n, "firmware-"):
			out = append(out, c.Name)
		}
	}
	return out
}

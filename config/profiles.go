package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Profiles narrow a grant (issue 31): a bearer token or a [roles] entry may
// name one, and its holder may then call only the tools of the profile's
// toolsets, and with read_only only the tools that change nothing. A profile
// never widens: the role and every switch still decide as before, the profile
// only refuses more. A fleet front that only reads sensors, or a client with
// a small context that should see twenty tools and not a hundred, gets a
// profile instead of a role of its own.
//
// In the file:
//
//	[profiles.sensors]
//	toolsets = ["system", "metrics", "gpio", "i2c", "sensors"]
//	read_only = true
//
// A toolset is a namespace as the tool ids start: one of the agent's own
// ("gpio" of gpio.write_pin) or the name of an [[upstream]] ("hs4" of
// hs4.devices_list), which takes in everything that upstream mounts: its
// tools, resources and prompts. change.* (change_prepare, change_commit) is
// in every profile, like it has no switch of its own: it acts on a critical
// tool, and that tool's namespace decides.
//
// A [profiles.NAME] table in a drop-in replaces the profile of that name
// whole, as a list does.

// Built-in profiles, which need no [profiles] table and may not be
// redefined. ProfileAll narrows nothing; it is what a grant without a
// profile has.
const (
	ProfileAll      = "all"
	ProfileReadOnly = "read-only"
)

// Profile is one [profiles.NAME] table.
type Profile struct {
	// Toolsets are the namespaces the profile allows; left out, every
	// namespace. An empty list is refused: it would allow nothing, which a
	// missing grant says more plainly.
	Toolsets []string `toml:"toolsets,omitempty"`
	// ReadOnly allows only the tools whose risk is read (readOnlyHint):
	// no write, not even a dry run of one.
	ReadOnly bool `toml:"read_only"`
}

// AllowsNamespace reports whether the profile lets its holder call a tool
// of namespace ns (the part of a tool id before the first dot).
func (p Profile) AllowsNamespace(ns string) bool {
	return p.Toolsets == nil || ns == "change" || slices.Contains(p.Toolsets, ns)
}

// Narrows reports whether the profile refuses anything at all.
func (p Profile) Narrows() bool { return p.Toolsets != nil || p.ReadOnly }

// Describe says in a few words what the profile allows, for errors and
// listings: "toolsets gpio, i2c; reads only".
func (p Profile) Describe() string {
	ts := "every namespace"
	if p.Toolsets != nil {
		ts = "toolsets " + strings.Join(p.Toolsets, ", ")
	}
	if p.ReadOnly {
		return ts + "; reads only"
	}
	return ts
}

// LookupProfile is the profile a grant names: "" and ProfileAll are the
// profile that narrows nothing, ProfileReadOnly every namespace read only,
// anything else [profiles] of c. ok is false for a name c does not define
// (a token made for a profile since taken out of the file): the caller
// then refuses everything, since a profile must never widen by vanishing.
func (c *Config) LookupProfile(name string) (Profile, bool) {
	switch name {
	case "", ProfileAll:
		return Profile{}, true
	case ProfileReadOnly:
		return Profile{ReadOnly: true}, true
	}
	p, ok := c.Profiles[name]
	return p, ok
}

// ProfileNames is every profile name a grant may carry, built-in ones
// first, then those of [profiles] in name order.
func (c *Config) ProfileNames() []string {
	names := make([]string, 0, len(c.Profiles))
	for n := range c.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return append([]string{ProfileAll, ProfileReadOnly}, names...)
}

// CheckProfileName accepts a profile's name: 1 to 32 of a-z, 0-9, '_' and
// '-', starting with a letter. It never holds ':', which separates it from
// the role in a [roles] grant.
func CheckProfileName(name string) error {
	ok := len(name) >= 1 && len(name) <= 32 && name[0] >= 'a' && name[0] <= 'z'
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}
	if !ok {
		return fmt.Errorf("profile name %q: want 1 to 32 of a-z, 0-9, '_' and '-', starting with a letter", name)
	}
	return nil
}

// ParseGrant reads the value of a [roles] users or groups entry: a role
// ("operate"), or a role and the profile that narrows it ("operate:sensors").
// The profile is "" when the grant names none. ok is false when the role is
// not one; the profile's existence is Validate's to check.
//
// The profile sits on the grant rather than in a table of its own so that
// it narrows exactly the grant it is written on: a user who is also in a
// group with a wider grant keeps that grant, and a renamed user cannot keep
// a role while losing its profile in another table.
func ParseGrant(s string) (role, profile string, ok bool) {
	role, profile, _ = strings.Cut(s, ":")
	return role, profile, ValidRole(role)
}

// validateProfiles checks [profiles] and the profiles [roles] names.
func (c Config) validateProfiles() error {
	known := append(LocalNamespaces(), upstreamNames(c.Upstreams)...)
	for _, name := range sortedProfileNames(c.Profiles) {
		p := c.Profiles[name]
		if err := CheckProfileName(name); err != nil {
			return fmt.Errorf("profiles: %w", err)
		}
		if name == ProfileAll || name == ProfileReadOnly {
			return fmt.Errorf("profiles.%s: %q is built in (%s); pick another name", name, name, builtinDoc(name))
		}
		if p.Toolsets != nil && len(p.Toolsets) == 0 {
			return fmt.Errorf("profiles.%s.toolsets: an empty list allows no tool; leave the key out to allow every namespace", name)
		}
		seen := map[string]bool{}
		for _, ts := range p.Toolsets {
			if seen[ts] {
				return fmt.Errorf("profiles.%s.toolsets: %q is listed twice", name, ts)
			}
			seen[ts] = true
			if !slices.Contains(known, ts) {
				msg := fmt.Sprintf("profiles.%s.toolsets: %q is not a namespace of the agent or an [[upstream]] name", name, ts)
				if near := nearest(ts, known); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				}
				return errors.New(msg + " (the namespaces: " + strings.Join(known, ", ") + ")")
			}
		}
	}
	for kind, m := range map[string]map[string]string{"users": c.Roles.Users, "groups": c.Roles.Groups} {
		for who, g := range m {
			role, prof, ok := ParseGrant(g)
			if !ok {
				return fmt.Errorf("roles.%s.%s: want one of %s, or one and a profile (\"read:sensors\"), got %q", kind, who, strings.Join(roleNames, ", "), role)
			}
			if strings.Contains(g, ":") {
				if err := c.checkProfileRef(prof); err != nil {
					return fmt.Errorf("roles.%s.%s: %w", kind, who, err)
				}
			}
		}
	}
	return nil
}

// checkProfileRef reports a profile name that no grant may carry under c.
func (c Config) checkProfileRef(name string) error {
	if _, ok := c.LookupProfile(name); ok && name != "" {
		return nil
	}
	msg := fmt.Sprintf("profile %q is not defined: want %s, or a [profiles.%s] table", name, strings.Join(c.ProfileNames(), ", "), orName(name))
	if near := nearest(name, c.ProfileNames()); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return errors.New(msg)
}

// CheckProfile reports whether a grant may name profile under c, for the
// CLI that makes a token: a token for a profile the file does not define
// would be refused everything.
func (c Config) CheckProfile(name string) error { return c.checkProfileRef(name) }

func orName(s string) string {
	if s == "" {
		return "NAME"
	}
	return s
}

func builtinDoc(name string) string {
	if name == ProfileAll {
		return "it narrows nothing"
	}
	return "every namespace, reads only"
}

func upstreamNames(ups []Upstream) []string {
	names := make([]string, 0, len(ups))
	for _, u := range ups {
		names = append(names, u.Name)
	}
	return names
}

func sortedProfileNames(m map[string]Profile) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// nearest is the candidate closest to s by edit distance when it is close
// enough to be a typo (at most 2 edits, and fewer than half of s), else "".
func nearest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD && 2*d < len(s)+1 {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, by bytes: names here
// are ASCII.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

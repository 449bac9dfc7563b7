// Package identity says who is calling the agent and what they may do: a
// Principal with a Role. Today every principal is a local Unix process,
// named by the kernel's peer credentials on the agent's socket and given a
// role by the [roles] table of the config; Kind leaves room for principals
// that arrive another way (an HTTP bearer token) without changing the policy
// that reads them.
package identity

import (
	"context"
	"os/user"
	"strconv"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// Role orders what a principal may do: read < operate < admin.
type Role int

// Roles, lowest first. RoleNone is an unmapped principal, refused everything.
const (
	RoleNone Role = iota
	RoleRead
	RoleOperate
	RoleAdmin
)

var roleNames = [...]string{"none", "read", "operate", "admin"}

func (r Role) String() string {
	if r < RoleNone || r > RoleAdmin {
		return "role(" + strconv.Itoa(int(r)) + ")"
	}
	return roleNames[r]
}

// ParseRole reads a role name as the config writes it ("read", "operate",
// "admin"); anything else is not a role (config.Validate refuses it first).
func ParseRole(s string) (Role, bool) {
	for r := RoleRead; r <= RoleAdmin; r++ {
		if roleNames[r] == s {
			return r, true
		}
	}
	return RoleNone, false
}

// Kind says how a principal was learned, and so which of its fields mean
// something.
type Kind string

// KindUnix is a process on this machine: Name is its user, UID and PID are
// the kernel's word from the socket's peer credentials.
const KindUnix Kind = "unix"

// KindToken is a caller over HTTP: Name is "token:" and the bearer token's
// name, Remote the address the request came from.
const KindToken Kind = "token"

// Principal is who is calling, decided once per connection.
type Principal struct {
	Kind Kind
	Name string // user name, "root", or "uid:N" for a uid without a passwd entry
	UID  int    // KindUnix: the peer's uid
	PID  int    // KindUnix: the peer's process at connect time
	Role Role
	// Remote is KindToken's client address (host:port) as the request
	// arrived; empty for local callers.
	Remote string
	// Profile narrows Role: the name of a profile of the config ("" and
	// "all" narrow nothing). It comes from the grant, a [roles] entry or
	// the token, never from the client; the policy looks its definition
	// up in the config in force at each decision.
	Profile string
}

// FromToken is the principal of an HTTP request that carried the token
// name with role (a [roles] name; "metrics" or anything else maps to
// RoleNone, which may call nothing) narrowed by profile ("" for none).
func FromToken(name, role, profile, remote string) Principal {
	r, _ := ParseRole(role)
	return Principal{Kind: KindToken, Name: "token:" + name, UID: -1, PID: -1, Role: r, Remote: remote, Profile: profile}
}

// FromUnix resolves a socket peer to a principal: uid 0 is admin; otherwise
// the user's own entry in roles.Users, else the best grant of any of its
// groups (primary and supplementary) in roles.Groups; unmapped is RoleNone.
// A grant is a role and the profile that narrows it ("operate:sensors",
// config.ParseGrant). The best grant is the highest role; at the same role
// one without a profile (it narrows nothing) wins over one with, and
// between two profiles the name that sorts first, so the answer does not
// depend on the order the system lists the groups in.
func FromUnix(roles config.Roles, peer unixsock.Peer) Principal {
	return fromUnix(roles, peer, osAccounts{})
}

// accounts looks up users and groups; tests give a fixed table.
type accounts interface {
	// user returns the name and group ids of a uid; ok is false without an entry.
	user(uid int) (name string, gids []string, ok bool)
	// group returns a gid's name; ok is false without an entry.
	group(gid string) (name string, ok bool)
}

func fromUnix(roles config.Roles, peer unixsock.Peer, acc accounts) Principal {
	p := Principal{Kind: KindUnix, Name: "uid:" + strconv.Itoa(peer.UID), UID: peer.UID, PID: peer.PID}
	if peer.UID == 0 {
		p.Name, p.Role = "root", RoleAdmin
		return p
	}
	gids := []string{strconv.Itoa(peer.GID)}
	if name, more, ok := acc.user(peer.UID); ok {
		p.Name = name
		gids = append(gids, more...)
	}
	if g, ok := roles.Users[p.Name]; ok {
		p.Role, p.Profile = parseGrant(g)
		return p
	}
	for _, id := range gids {
		g, ok := acc.group(id)
		if !ok {
			continue
		}
		r, prof := parseGrant(roles.Groups[g])
		if r != RoleNone && better(r, prof, p.Role, p.Profile) {
			p.Role, p.Profile = r, prof
		}
	}
	return p
}

// parseGrant reads a [roles] value; a bad role is RoleNone, refused
// everything (config.Validate refuses it first). "all" is no profile.
func parseGrant(s string) (Role, string) {
	role, prof, _ := config.ParseGrant(s)
	r, _ := ParseRole(role)
	if prof == config.ProfileAll {
		prof = ""
	}
	return r, prof
}

// better reports whether grant (r, prof) beats grant (cur, curProf): see
// FromUnix.
func better(r Role, prof string, cur Role, curProf string) bool {
	switch {
	case r != cur:
		return r > cur
	case prof == "" || curProf == "":
		return prof == "" && curProf != ""
	}
	return prof < curProf
}

// osAccounts reads the system's user and group databases.
type osAccounts struct{}

func (osAccounts) user(uid int) (string, []string, bool) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return "", nil, false
	}
	gids, _ := u.GroupIds()
	return u.Username, gids, true
}

func (osAccounts) group(gid string) (string, bool) {
	g, err := user.LookupGroupId(gid)
	if err != nil {
		return "", false
	}
	return g.Name, true
}

// principalKey carries a Principal in a context.
type principalKey struct{}

// NewContext returns ctx carrying p: the doors (agent/transport) put the
// principal of a connection or request there, and the agent reads it back
// for every call.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext is the principal NewContext put in ctx, if any.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

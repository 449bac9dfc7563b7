package identity

import (
	"context"
	"os"
	"os/user"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// table is a fixed user and group database.
type table struct {
	users map[int]struct {
		name string
		gids []string
	}
	groups map[string]string
}

func (t table) user(uid int) (string, []string, bool) {
	u, ok := t.users[uid]
	return u.name, u.gids, ok
}

func (t table) group(gid string) (string, bool) {
	n, ok := t.groups[gid]
	return n, ok
}

func TestFromUnix(t *testing.T) {
	acc := table{
		users: map[int]struct {
			name string
			gids []string
		}{
			1000: {"alice", []string{"1000", "27"}},
			1001: {"bob", []string{"1001", "998"}},
			1002: {"carol", []string{"1002", "998", "27"}},
			1003: {"dave", []string{"1003"}},
			1004: {"erin", []string{"1004", "27"}},
		},
		groups: map[string]string{"1000": "alice", "27": "sudo", "998": "raspi-mcp", "1001": "bob", "1002": "carol", "1003": "dave", "1004": "erin"},
	}
	roles := config.Roles{
		Users:  map[string]string{"alice": "admin", "erin": "read", "uid:5000": "operate"},
		Groups: map[string]string{"raspi-mcp": "read", "sudo": "operate"},
	}
	for _, c := range []struct {
		name string
		peer unixsock.Peer
		want Principal
	}{
		{"root is admin, mapped or not", unixsock.Peer{UID: 0, GID: 0, PID: 1},
			Principal{Kind: KindUnix, Name: "root", UID: 0, PID: 1, Role: RoleAdmin}},
		{"a user's own entry", unixsock.Peer{UID: 1000, GID: 1000, PID: 10},
			Principal{Kind: KindUnix, Name: "alice", UID: 1000, PID: 10, Role: RoleAdmin}},
		{"a user's own entry wins over a higher group", unixsock.Peer{UID: 1004, GID: 1004, PID: 14},
			Principal{Kind: KindUnix, Name: "erin", UID: 1004, PID: 14, Role: RoleRead}},
		{"a group's role", unixsock.Peer{UID: 1001, GID: 1001, PID: 11},
			Principal{Kind: KindUnix, Name: "bob", UID: 1001, PID: 11, Role: RoleRead}},
		{"the highest of several groups", unixsock.Peer{UID: 1002, GID: 1002, PID: 12},
			Principal{Kind: KindUnix, Name: "carol", UID: 1002, PID: 12, Role: RoleOperate}},
		{"the primary group from the kernel counts", unixsock.Peer{UID: 1003, GID: 27, PID: 13},
			Principal{Kind: KindUnix, Name: "dave", UID: 1003, PID: 13, Role: RoleOperate}},
		{"unmapped is refused", unixsock.Peer{UID: 1003, GID: 1003, PID: 13},
			Principal{Kind: KindUnix, Name: "dave", UID: 1003, PID: 13, Role: RoleNone}},
		{"no passwd entry: named by uid, mapped by that name", unixsock.Peer{UID: 5000, GID: 5000, PID: 50},
			Principal{Kind: KindUnix, Name: "uid:5000", UID: 5000, PID: 50, Role: RoleOperate}},
		{"no passwd entry and unmapped", unixsock.Peer{UID: 5001, GID: 5001, PID: 51},
			Principal{Kind: KindUnix, Name: "uid:5001", UID: 5001, PID: 51, Role: RoleNone}},
	} {
		if got := fromUnix(roles, c.peer, acc); got != c.want {
			t.Errorf("%s: fromUnix(%+v) = %+v, want %+v", c.name, c.peer, got, c.want)
		}
	}
}

// A [roles] value may narrow its role by a profile; the grant a user gets
// from several groups does not depend on the order of its groups.
func TestFromUnixProfiles(t *testing.T) {
	type u = struct {
		name string
		gids []string
	}
	acc := table{
		users: map[int]u{
			1000: {"alice", []string{"1000", "27"}},
			1001: {"bob", []string{"1001", "30", "31", "32"}},
			1002: {"carol", []string{"1002", "32", "31"}},
			1003: {"dave", []string{"1003", "30", "33"}},
		},
		groups: map[string]string{"27": "sudo", "30": "fleet", "31": "sensors", "32": "lab", "33": "ops"},
	}
	roles := config.Roles{
		Users: map[string]string{"alice": "admin:read-only"},
		Groups: map[string]string{"sudo": "admin", "fleet": "read", "sensors": "operate:sensors",
			"lab": "operate:lab", "ops": "operate:all"},
	}
	for _, c := range []struct {
		name    string
		uid     int
		role    Role
		profile string
	}{
		{"a user's own grant, narrowed, wins over a wider group", 1000, RoleAdmin, "read-only"},
		{"the highest role wins, with its profile; lab sorts before sensors", 1001, RoleOperate, "lab"},
		{"the same in another group order", 1002, RoleOperate, "lab"},
		{"at the same role, a grant without profile wins (all is none)", 1003, RoleOperate, ""},
	} {
		p := fromUnix(roles, unixsock.Peer{UID: c.uid, GID: c.uid, PID: 1}, acc)
		if p.Role != c.role || p.Profile != c.profile {
			t.Errorf("%s: got role %s profile %q, want %s %q", c.name, p.Role, p.Profile, c.role, c.profile)
		}
	}
}

// TestFromUnixSystem resolves the test's own user through the system's
// databases.
func TestFromUnixSystem(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skipf("no passwd entry for the test user: %v", err)
	}
	if os.Getuid() == 0 {
		t.Skip("runs as root, who is always admin")
	}
	peer := unixsock.Peer{UID: os.Getuid(), GID: os.Getgid(), PID: os.Getpid()}
	if p := FromUnix(config.Roles{}, peer); p.Name != me.Username || p.Role != RoleNone {
		t.Fatalf("unmapped self = %+v", p)
	}
	if p := FromUnix(config.Roles{Users: map[string]string{me.Username: "operate"}}, peer); p.Role != RoleOperate {
		t.Fatalf("self mapped to operate = %+v", p)
	}
	g, err := user.LookupGroupId(me.Gid)
	if err != nil {
		t.Skipf("no group entry for gid %s: %v", me.Gid, err)
	}
	if p := FromUnix(config.Roles{Groups: map[string]string{g.Name: "read"}}, peer); p.Role != RoleRead {
		t.Fatalf("self by primary group %s = %+v", g.Name, p)
	}
}

func TestRoles(t *testing.T) {
	for _, s := range []string{"read", "operate", "admin"} {
		r, ok := ParseRole(s)
		if !ok || r.String() != s {
			t.Errorf("ParseRole(%q) = %v, %v", s, r, ok)
		}
	}
	for _, s := range []string{"", "none", "Admin", "root"} {
		if r, ok := ParseRole(s); ok || r != RoleNone {
			t.Errorf("ParseRole(%q) = %v, %v; want not a role", s, r, ok)
		}
	}
	if !(RoleNone < RoleRead && RoleRead < RoleOperate && RoleOperate < RoleAdmin) {
		t.Fatal("roles are not ordered none < read < operate < admin")
	}
	if got := Role(9).String(); got != "role(9)" {
		t.Fatalf("Role(9) = %q", got)
	}
}

func TestFromToken(t *testing.T) {
	for _, c := range []struct {
		role string
		want Role
	}{{"read", RoleRead}, {"operate", RoleOperate}, {"admin", RoleAdmin}, {"metrics", RoleNone}, {"", RoleNone}} {
		p := FromToken("ha", c.role, "sensors", "192.0.2.7:5000")
		want := Principal{Kind: KindToken, Name: "token:ha", UID: -1, PID: -1, Role: c.want, Remote: "192.0.2.7:5000", Profile: "sensors"}
		if p != want {
			t.Errorf("FromToken(ha, %q) = %+v, want %+v", c.role, p, want)
		}
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("a principal in an empty context")
	}
	p := FromToken("ci", "read", "", "192.0.2.1:4000")
	got, ok := FromContext(NewContext(context.Background(), p))
	if !ok || got != p {
		t.Fatalf("FromContext = %+v, %v; want %+v", got, ok, p)
	}
}

package bearer

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC)

func newFile(t testing.TB) *File {
	return &File{Path: filepath.Join(t.TempDir(), "tokens.toml")}
}

func create(t testing.TB, f *File, name, role string, ttl time.Duration) string {
	t.Helper()
	secret, tok, err := f.Create(name, role, ttl, t0)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if tok.Name != name || tok.Role != role || !tok.Created.Equal(t0) {
		t.Fatalf("create %s: token %+v", name, tok)
	}
	return secret
}

// A created token's secret verifies to its name and role; the file holds
// only its hash, and is 0640.
func TestCreateVerify(t *testing.T) {
	f := newFile(t)
	laptop := create(t, f, "laptop", RoleRead, 0)
	ha := create(t, f, "home-assistant", RoleOperate, 90*24*time.Hour)
	if !strings.HasPrefix(laptop, Prefix) || len(laptop) != secretLen || laptop == ha {
		t.Fatalf("secrets %q %q", laptop, ha)
	}
	for secret, want := range map[string]Token{
		laptop: {Name: "laptop", Role: RoleRead, Created: t0},
		ha:     {Name: "home-assistant", Role: RoleOperate, Created: t0, Expires: t0.Add(90 * 24 * time.Hour)},
	} {
		got, err := f.Verify(secret, t0.Add(time.Hour))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("verify: %+v %v, want %+v", got, err, want)
		}
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(laptop)) || bytes.Contains(b, []byte(laptop[len(Prefix):])) {
		t.Errorf("the file holds a secret:\n%s", b)
	}
	fi, err := os.Stat(f.Path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v %v, want 0640", fi.Mode(), err)
	}
	toks, err := f.List()
	if err != nil || len(toks) != 2 || toks[0].Name != "laptop" || toks[1].Name != "home-assistant" {
		t.Errorf("list: %+v %v", toks, err)
	}
}

// Anything but a current token's secret is refused: no file, a wrong or
// malformed secret, an expired token (with its name, for the audit), a
// revoked one, including through a File that cached the file before.
func TestVerifyRefuses(t *testing.T) {
	f := newFile(t)
	if _, err := f.Verify(Prefix+strings.Repeat("A", secretLen-len(Prefix)), t0); !errors.Is(err, ErrUnknown) {
		t.Errorf("no file: %v", err)
	}
	s := create(t, f, "pi2", RoleAdmin, time.Hour)
	agent := &File{Path: f.Path} // the agent's own File, as a separate process has it
	if _, err := agent.Verify(s, t0); err != nil {
		t.Fatal(err)
	}
	flip := []byte(s)
	flip[len(flip)-1] ^= 1
	for _, bad := range []string{"", "rmcp_", s[:len(s)-1], s + "A", strings.ToUpper(s[:5]) + s[5:], string(flip), "Bearer " + s} {
		if tok, err := agent.Verify(bad, t0); !errors.Is(err, ErrUnknown) || tok.Name != "" {
			t.Errorf("verify %q: %+v %v, want ErrUnknown", bad, tok, err)
		}
	}
	if tok, err := agent.Verify(s, t0.Add(time.Hour)); !errors.Is(err, ErrExpired) || tok.Name != "pi2" {
		t.Errorf("at expiry: %+v %v, want ErrExpired for pi2", tok, err)
	}
	if err := f.Revoke("pi2"); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Verify(s, t0); !errors.Is(err, ErrUnknown) {
		t.Errorf("revoked: %v, want ErrUnknown on the next request", err)
	}
}

// Every bad input is an error that names it and leaves the file as it was.
func TestBadInputChangesNothing(t *testing.T) {
	f := newFile(t)
	create(t, f, "laptop", RoleRead, 0)
	before, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, role string
		ttl        time.Duration
		want       string
	}{
		{"Laptop", RoleRead, 0, `"Laptop"`},
		{"-x", RoleRead, 0, `"-x"`},
		{"x-", RoleRead, 0, `"x-"`},
		{"", RoleRead, 0, `""`},
		{"a_b", RoleRead, 0, `"a_b"`},
		{strings.Repeat("a", 33), RoleRead, 0, "1 to 32"},
		{"token:x", RoleRead, 0, `"token:x"`},
		{"laptop", RoleRead, 0, `"laptop" exists already`},
		{"new", "root", 0, `role "root"`},
		{"new", "", 0, `role ""`},
		{"new", RoleRead, -time.Hour, "expiry -1h0m0s"},
		{"new", RoleRead, 20 * 365 * 24 * time.Hour, "expiry"},
	} {
		_, _, err := f.Create(c.name, c.role, c.ttl, t0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %q %q %v: %v, want an error with %s", c.name, c.role, c.ttl, err, c.want)
		}
	}
	for name, want := range map[string]string{"nobody": `no token named "nobody"`, "BAD NAME": `"BAD NAME"`} {
		if err := f.Revoke(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("revoke %q: %v, want %s", name, err, want)
		}
	}
	after, _ := os.ReadFile(f.Path)
	if !bytes.Equal(before, after) {
		t.Errorf("a refused change changed the file:\n%s\n---\n%s", before, after)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(f.Path), ".tokens.toml.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A corrupt file refuses everyone, with an error naming the entry, and
// Create and Revoke refuse to write over it; fixed, it works again.
func TestCorruptFile(t *testing.T) {
	f := newFile(t)
	s := create(t, f, "laptop", RoleRead, 0)
	good, _ := os.ReadFile(f.Path)
	for _, c := range []struct{ edit, want string }{
		{`role = "read"`, `role = "root"`},
		{`name = "laptop"`, `name = "Laptop"`},
		{`name = "laptop"`, "name = \"laptop\"\nowner = \"x\""},
		{`sha256 = "`, `sha256 = "zz`},
		{`created = `, `created = 1`},
		{"[[token]]", "[[token]]\nname = 1"},
	} {
		bad := bytes.Replace(good, []byte(c.edit), []byte(c.want), 1)
		if err := os.WriteFile(f.Path, bad, 0o640); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Verify(s, t0); err == nil || errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), f.Path) {
			t.Errorf("%q: verify %v, want the file's error", c.want, err)
		}
		if _, _, err := f.Create("other", RoleRead, 0, t0); err == nil {
			t.Errorf("%q: create over a corrupt file succeeded", c.want)
		}
		if err := f.Revoke("laptop"); err == nil {
			t.Errorf("%q: revoke in a corrupt file succeeded", c.want)
		}
		if now, _ := os.ReadFile(f.Path); !bytes.Equal(now, bad) {
			t.Errorf("%q: the corrupt file was rewritten", c.want)
		}
	}
	if err := os.WriteFile(f.Path, good, 0o640); err != nil {
		t.Fatal(err)
	}
	if tok, err := f.Verify(s, t0); err != nil || tok.Name != "laptop" {
		t.Errorf("fixed file: %+v %v", tok, err)
	}
	a := record{tok: Token{Name: "a", Role: RoleRead, Created: t0}, hash: [32]byte{1}}
	b := record{tok: Token{Name: "b", Role: RoleRead, Created: t0}, hash: [32]byte{2}}
	twice := []record{a, a}
	twice[1].hash = b.hash
	if _, err := parse(encode(twice)); err == nil || !strings.Contains(err.Error(), `"a": name used twice`) {
		t.Errorf("duplicate name: %v", err)
	}
	b.hash = a.hash
	if _, err := parse(encode([]record{a, b})); err == nil || !strings.Contains(err.Error(), `"b": sha256 used twice`) {
		t.Errorf("duplicate hash: %v", err)
	}
	a.tok.Expires = t0
	if _, err := parse(encode([]record{a})); err == nil || !strings.Contains(err.Error(), "expires: not after created") {
		t.Errorf("expires at created: %v", err)
	}
}

// Two CLIs at once lose nothing: every create lands, under the flock.
func TestConcurrentCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.toml")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := (&File{Path: path}).Create(fmt.Sprintf("t%d", i), RoleRead, 0, t0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	toks, err := (&File{Path: path}).List()
	if err != nil || len(toks) != n {
		t.Errorf("list: %d tokens %v, want %d", len(toks), err, n)
	}
}

// A rewrite keeps the file's mode and group; a new file takes Group, and a
// group that does not exist is an error before anything is written.
func TestModeAndGroup(t *testing.T) {
	f := newFile(t)
	f.Group = "no-such-group-raspi-mcp-test"
	if _, _, err := f.Create("a", RoleRead, 0, t0); err == nil || !strings.Contains(err.Error(), f.Group) {
		t.Errorf("unknown group: %v", err)
	}
	if _, err := os.Stat(f.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unknown group: the file was made (%v)", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Skip(err)
	}
	f.Group = g.Name
	create(t, f, "a", RoleRead, 0)
	if err := os.Chmod(f.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	create(t, f, "b", RoleRead, 0)
	if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("rewrite: mode %v %v, want the 0600 it had", fi.Mode(), err)
	}
}

// Verify reads the file once while it is unchanged: a request then costs a
// stat and a hash, a handful of allocations at most, where reading and
// parsing the file again takes hundreds; any change to it (here a comment
// appended in place, same inode) is seen on the next request.
func TestVerifyCaches(t *testing.T) {
	f := newFile(t)
	s := create(t, f, "a", RoleRead, 0)
	if _, err := f.Verify(s, t0); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = f.Verify(s, t0) }); n > 3 {
		t.Errorf("Verify of an unchanged file: %v allocations, want a cached answer", n)
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = parse(encode(f.snap.Load().recs)) }); n < 20 {
		t.Errorf("parsing takes only %v allocations: the check above proves nothing", n)
	}
	fh, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("name = \"late\"\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if _, err := f.Verify(s, t0); err == nil || errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "name") {
		t.Errorf("file changed in place: %v, want its parse error", err)
	}
}

func TestParseTTL(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"none": 0, "30m": 30 * time.Minute, "12h": 12 * time.Hour, "90d": 90 * 24 * time.Hour, "8w": 8 * 7 * 24 * time.Hour, "3650d": maxTTL,
	} {
		if got, err := ParseTTL(in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "d", "0d", "-1d", "+1d", "1.5d", "90", "90s", "1y", "3651d", "99999999999d", "never", " 1d"} {
		if _, err := ParseTTL(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}

// FuzzParse: the parser never panics, and whatever it accepts survives
// being written and read again unchanged.
func FuzzParse(f *testing.F) {
	f.Add(encode([]record{{tok: Token{Name: "a", Role: RoleRead, Created: t0}}, {tok: Token{Name: "b-1", Role: RoleMetrics, Created: t0, Expires: t0.Add(time.Hour)}, hash: [32]byte{1}}}))
	f.Add([]byte("[[token]]\nname = \"x\"\nrole = \"admin\"\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\ncreated = 2026-01-02T03:04:05.5+02:00\n"))
	f.Add([]byte("[[token]]\nname = \"x\"\ncreated = 1979-05-27\n"))
	f.Add([]byte("token = 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := parse(b)
		if err != nil {
			return
		}
		again, err := parse(encode(recs))
		if err != nil {
			t.Fatalf("accepted %q, but not its own rewrite: %v\n%s", b, err, encode(recs))
		}
		if len(again) != len(recs) {
			t.Fatalf("rewrite has %d tokens, want %d", len(again), len(recs))
		}
		for i := range recs {
			a, b := recs[i], again[i]
			if a.hash != b.hash || a.tok.Name != b.tok.Name || a.tok.Role != b.tok.Role || !a.tok.Created.Equal(b.tok.Created) || !a.tok.Expires.Equal(b.tok.Expires) {
				t.Fatalf("token %d: %+v became %+v", i, a.tok, b.tok)
			}
		}
	})
}

// BenchmarkVerify is the cost on every HTTP request: an unchanged file of
// n tokens and the secret of the last one (every entry is compared anyway).
func BenchmarkVerify(b *testing.B) {
	for _, n := range []int{1, 20, 200} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			f := newFile(b)
			var s string
			for i := range n {
				s = create(b, f, fmt.Sprintf("t%d", i), RoleRead, 0)
			}
			if _, err := f.Verify(s, t0); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := f.Verify(s, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReload is what a request costs right after the file changed: a
// read and parse of 20 tokens.
func BenchmarkReload(b *testing.B) {
	f := newFile(b)
	for i := range 20 {
		create(b, f, fmt.Sprintf("t%d", i), RoleRead, 0)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s := f.read(); s.err != nil || len(s.recs) != 20 {
			b.Fatal(s.err)
		}
	}
}

// A token's profile is kept in the file and comes back with the token; a
// file written before profiles existed (no profile key) still loads, its
// tokens narrowed by nothing; a bad profile is refused and changes nothing.
func TestProfileRoundTrip(t *testing.T) {
	f := newFile(t)
	old := "[[token]]\nname = \"laptop\"\nrole = \"read\"\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\ncreated = 2026-01-02T03:04:05Z\n"
	if err := os.WriteFile(f.Path, []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	toks, err := f.List()
	if err != nil || len(toks) != 1 || toks[0].Profile != "" || toks[0].Role != RoleRead {
		t.Fatalf("old file: %+v %v", toks, err)
	}
	secret, tok, err := f.CreateProfile("fleet", RoleAdmin, "sensors", 0, t0)
	if err != nil || tok.Profile != "sensors" {
		t.Fatalf("create with profile: %+v %v", tok, err)
	}
	got, err := (&File{Path: f.Path}).Verify(secret, t0)
	if err != nil || got.Profile != "sensors" || got.Role != RoleAdmin {
		t.Fatalf("verify: %+v %v", got, err)
	}
	b, _ := os.ReadFile(f.Path)
	if !bytes.Contains(b, []byte("profile = \"sensors\"")) || bytes.Count(b, []byte("profile =")) != 1 {
		t.Errorf("file: the profile is written once, for its token only:\n%s", b)
	}
	before := b
	for _, c := range []struct{ role, profile, want string }{
		{RoleRead, "Sensors", `profile "Sensors"`},
		{RoleRead, "a:b", `profile "a:b"`},
		{RoleRead, "x\"y", "profile"},
		{RoleMetrics, "sensors", "metrics token calls no tool"},
	} {
		if _, _, err := f.CreateProfile("new", c.role, c.profile, 0, t0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %s %q: %v, want an error with %s", c.role, c.profile, err, c.want)
		}
	}
	if after, _ := os.ReadFile(f.Path); !bytes.Equal(before, after) {
		t.Errorf("a refused create changed the file")
	}
	bad := bytes.Replace(b, []byte(`profile = "sensors"`), []byte(`profile = "Sensors"`), 1)
	if err := os.WriteFile(f.Path, bad, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Verify(secret, t0); err == nil || !strings.Contains(err.Error(), `"fleet": profile "Sensors"`) {
		t.Errorf("hand-edited bad profile: %v, want the file's error naming the entry", err)
	}
}

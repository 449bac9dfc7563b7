package pairing

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

const (
	testToken = "rmcp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	testFP    = "sha256:16abed0c9d8e7f6a5b4c3d2e1f00112233445566778899aabbccddeeff001122"
)

func testLine() Line {
	return Line{TokenName: "laptop", URL: "https://raspberrypi.local:8443/mcp", Fingerprint: testFP, Token: testToken,
		Role: "operate", Profile: "ro-ish", Expires: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func TestLineRoundTrip(t *testing.T) {
	for _, l := range []Line{testLine(), {TokenName: "x", URL: "https://[fe80::1]:1/mcp", Fingerprint: testFP, Token: testToken, Role: "read"}} {
		s, err := Encode(l)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s, Prefix) || strings.ContainsAny(strings.TrimPrefix(s, Prefix), "+/=:\"' ") {
			t.Errorf("line %q: want the prefix and base64url only", s)
		}
		got, err := Decode(s)
		if err != nil || got != l {
			t.Errorf("round trip: %+v %v, want %+v", got, err, l)
		}
		// A terminal wrapped it, the shell kept the quotes: still the same.
		wrapped := `"` + s[:40] + "\n  " + s[40:90] + "\r\n" + s[90:] + `"`
		if got, err := Decode(wrapped); err != nil || got != l {
			t.Errorf("wrapped: %+v %v", got, err)
		}
	}
	// An openssl-style fingerprint is taken and stored canonical.
	l := testLine()
	l.Fingerprint = "sha256:16:AB:ED:0C:9D:8E:7F:6A:5B:4C:3D:2E:1F:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22"
	s, err := Encode(l)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := Decode(s); got.Fingerprint != testFP {
		t.Errorf("fingerprint %q, want %q", got.Fingerprint, testFP)
	}
}

// Bad lines are errors that say what is wrong and never quote the token.
func TestDecodeRefuses(t *testing.T) {
	good, _ := Encode(testLine())
	rest := strings.TrimPrefix(good, Prefix)
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return Prefix + base64.RawURLEncoding.EncodeToString(b)
	}
	fp := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	w := func(change func(*wire)) string {
		x := wire{N: "laptop", U: "https://pi:8443/mcp", F: fp, T: testToken, R: "read"}
		change(&x)
		return enc(x)
	}
	for _, c := range []struct{ line, want string }{
		{"", "not a pairing line"},
		{testToken, "not a pairing line"},
		{"raspi-mcp-pair:v2:" + rest, "version 2"},
		{good[:len(good)-9], "damaged or incomplete"},
		{good + "xyz", "damaged or incomplete"},
		{Prefix + rest[:20] + "*" + rest[21:], "damaged or incomplete"},
		{enc(map[string]any{"n": "laptop", "zz": 1}), "damaged or incomplete"},
		{w(func(x *wire) { x.F = fp[:40] }), "not a SHA-256"},
		{w(func(x *wire) { x.U = "http://pi:8443/mcp" }), "want https://HOST:PORT/mcp"},
		{w(func(x *wire) { x.U = "https://pi/mcp" }), "with the port"},
		{w(func(x *wire) { x.U = "https://u:p@pi:1/mcp" }), "want https://"},
		{w(func(x *wire) { x.T = "rmcp_short" }), "not a raspi-mcp bearer secret"},
		{w(func(x *wire) { x.R = "metrics" }), `role "metrics"`},
		{w(func(x *wire) { x.N = "Laptop!" }), "token name"},
		{w(func(x *wire) { x.P = "Bad Profile" }), "profile"},
	} {
		_, err := Decode(c.line)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%.40q...): %v, want %q", c.line, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), testToken) {
			t.Errorf("the error quotes the token: %v", err)
		}
	}
	if _, err := Encode(Line{TokenName: "x", URL: "https://pi:1/mcp", Fingerprint: "md5:00", Token: testToken, Role: "read"}); err == nil {
		t.Error("Encode took a bad fingerprint")
	}
}

func TestNameFor(t *testing.T) {
	for in, want := range map[string]string{
		"https://raspberrypi.local:8443/mcp":            "raspberrypi",
		"https://Kitchen_Pi.lan:1/mcp":                  "kitchen-pi",
		"https://192.168.1.20:8443/mcp":                 "192-168-1-20",
		"https://[::1]:8443/mcp":                        "pi",
		"https://" + strings.Repeat("a", 40) + ":1/mcp": strings.Repeat("a", 32),
	} {
		if got := NameFor(in); got != want || CheckName(got) != nil {
			t.Errorf("NameFor(%q) = %q, want %q", in, got, want)
		}
	}
}

func testPair(name string) Pair {
	l := testLine()
	return Pair{Name: name, TokenName: l.TokenName, URL: l.URL, Fingerprint: l.Fingerprint, Token: l.Token, Role: l.Role,
		Expires: l.Expires, Paired: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

// The store keeps each pairing in a 0600 file of a 0700 directory; saving
// the same name replaces it; list and remove see what is there; bad names
// change nothing.
func TestStore(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "raspi-mcp", "pairs")}
	if ps, err := st.List(); err != nil || len(ps) != 0 {
		t.Fatalf("empty store: %v %v", ps, err)
	}
	p := testPair("kitchen")
	if replaced, err := st.Save(p); err != nil || replaced {
		t.Fatalf("save: %v %v", replaced, err)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{st.Dir: 0o700, filepath.Dir(st.Dir): 0o700, st.path("kitchen"): 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: %v %v, want %o", path, fi.Mode().Perm(), err, want)
			}
		}
	}
	if got, err := st.Get("kitchen"); err != nil || got != p {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Re-pairing: a new token under the same name replaces the old one.
	p2 := p
	p2.Token = "rmcp_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	if replaced, err := st.Save(p2); err != nil || !replaced {
		t.Fatalf("re-pair: %v %v", replaced, err)
	}
	if got, _ := st.Get("kitchen"); got.Token != p2.Token {
		t.Errorf("re-pair kept the old token")
	}
	if _, err := st.Save(testPair("garage")); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(st.Dir)
	if len(ents) != 2 {
		t.Errorf("files left behind: %v", ents)
	}
	ps, err := st.List()
	if err != nil || len(ps) != 2 || ps[0].Name != "garage" || ps[1].Name != "kitchen" {
		t.Fatalf("list: %+v %v", ps, err)
	}

	// Refusals change nothing.
	bad := testPair("../x")
	if _, err := st.Save(bad); err == nil {
		t.Error("saved a name with a path in it")
	}
	bad = testPair("ok")
	bad.Token = "nope"
	if _, err := st.Save(bad); err == nil {
		t.Error("saved a record with a bad token")
	}
	if _, err := st.Get("nothere"); !errors.Is(err, ErrNotPaired) {
		t.Errorf("get unknown: %v", err)
	}
	if err := st.Remove("nothere"); !errors.Is(err, ErrNotPaired) {
		t.Errorf("remove unknown: %v", err)
	}
	if ps, _ := st.List(); len(ps) != 2 {
		t.Errorf("after refusals: %d pairings", len(ps))
	}

	if err := st.Remove("garage"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get("garage"); !errors.Is(err, ErrNotPaired) {
		t.Errorf("after remove: %v", err)
	}
	// A damaged record is named, the good ones still listed.
	if err := os.WriteFile(st.path("broken"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, err = st.List()
	if len(ps) != 1 || err == nil || !strings.Contains(err.Error(), "broken.json") {
		t.Errorf("list with a damaged file: %+v %v", ps, err)
	}
}

// Writing a client's config keeps the other servers and settings in their
// order, backs up the old file, replaces our entry on re-pairing, and
// leaves a file it cannot read as plain JSON alone.
func TestWriteConfig(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	desk, _ := LookupClient("claude-desktop")
	path := filepath.Join(dir, "claude_desktop_config.json")
	old := `{"globalShortcut": "Ctrl+Space", "mcpServers": {"other": {"command": "npx", "args": ["-y", "x"], "env": {"N": 1.50}}}, "z": [1,2]}`
	if err := os.WriteFile(path, []byte(old), 0o640); err != nil {
		t.Fatal(err)
	}
	backup, replaced, err := desk.WriteConfig(path, "kitchen", "/opt/raspi mcp/raspi-mcp-laptop", now)
	if err != nil || replaced {
		t.Fatalf("write: %v %v", replaced, err)
	}
	if b, err := os.ReadFile(backup); err != nil || string(b) != old {
		t.Errorf("backup %s: %q %v", backup, b, err)
	}
	b, _ := os.ReadFile(path)
	var got struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]json.Number
		}
		GlobalShortcut string
		Z              []int
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if o := got.MCPServers["other"]; o.Command != "npx" || o.Env["N"] != "1.50" || got.GlobalShortcut != "Ctrl+Space" || len(got.Z) != 2 {
		t.Errorf("the other settings changed:\n%s", b)
	}
	if k := got.MCPServers["kitchen"]; k.Command != "/opt/raspi mcp/raspi-mcp-laptop" || strings.Join(k.Args, " ") != "connect paired kitchen" {
		t.Errorf("our entry: %+v", k)
	}
	s := string(b)
	if !(strings.Index(s, "globalShortcut") < strings.Index(s, "mcpServers") && strings.Index(s, `"other"`) < strings.Index(s, `"kitchen"`) && strings.Index(s, `"kitchen"`) < strings.Index(s, `"z"`)) {
		t.Errorf("order not kept:\n%s", s)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %o, want the old file's 0640", fi.Mode().Perm())
	}

	// Again with another path: replaced, with a new backup.
	backup2, replaced, err := desk.WriteConfig(path, "kitchen", "/usr/bin/raspi-mcp-laptop", now.Add(time.Second))
	if err != nil || !replaced || backup2 == backup {
		t.Fatalf("rewrite: %v %v %s", replaced, err, backup2)
	}
	b, _ = os.ReadFile(path)
	if strings.Count(string(b), `"kitchen": {`) != 1 || !strings.Contains(string(b), "/usr/bin/raspi-mcp-laptop") {
		t.Errorf("not replaced:\n%s", b)
	}
	// The same again: nothing to write, no backup.
	if backup3, replaced, err := desk.WriteConfig(path, "kitchen", "/usr/bin/raspi-mcp-laptop", now.Add(2*time.Second)); err != nil || !replaced || backup3 != "" {
		t.Errorf("unchanged: %q %v %v", backup3, replaced, err)
	}

	// VS Code: "servers" with a type; a new file is made.
	vs, _ := LookupClient("vscode")
	vpath := filepath.Join(dir, "mcp.json")
	if backup, _, err := vs.WriteConfig(vpath, "kitchen", "raspi-mcp-laptop", now); err != nil || backup != "" {
		t.Fatalf("vscode: %q %v", backup, err)
	}
	b, _ = os.ReadFile(vpath)
	var v struct{ Servers map[string]map[string]any }
	if json.Unmarshal(b, &v) != nil || v.Servers["kitchen"]["type"] != "stdio" {
		t.Errorf("vscode file:\n%s", b)
	}
	if fi, _ := os.Stat(vpath); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %o", fi.Mode().Perm())
	}

	// Refused, changing nothing: comments, a servers key that is no
	// object, a missing directory, a client not written here.
	for name, content := range map[string]string{
		"jsonc.json":   "{\n// mine\n\"servers\": {}}",
		"array.json":   `{"servers": []}`,
		"trail.json":   `{"servers": {}} {}`,
		"toplist.json": `[1]`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		_, _, err := vs.WriteConfig(p, "kitchen", "x", now)
		if err == nil || !strings.Contains(err.Error(), "nothing was changed") || !strings.Contains(err.Error(), `"connect"`) {
			t.Errorf("%s: %v", name, err)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Errorf("%s changed: %s", name, b)
		}
	}
	if _, _, err := vs.WriteConfig(filepath.Join(dir, "no", "mcp.json"), "kitchen", "x", now); err == nil || !strings.Contains(err.Error(), "installed") {
		t.Errorf("missing dir: %v", err)
	}
	code, _ := LookupClient("claude-code")
	if _, _, err := code.WriteConfig(filepath.Join(dir, "c.json"), "kitchen", "x", now); err == nil {
		t.Error("wrote Claude Code's config")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestSnippets(t *testing.T) {
	exe := `C:\Program Files\raspi-mcp\raspi-mcp-laptop.exe`
	for _, id := range ClientIDs() {
		c, _ := LookupClient(id)
		s := c.Snippet("kitchen", exe)
		if !strings.Contains(s, "connect") || !strings.Contains(s, "kitchen") {
			t.Errorf("%s: %s", id, s)
		}
		if c.Writable() {
			var v map[string]map[string]struct {
				Command string
				Args    []string
			}
			if err := json.Unmarshal([]byte(s), &v); err != nil || v[c.key]["kitchen"].Command != exe {
				t.Errorf("%s: not the JSON entry: %v\n%s", id, err, s)
			}
		} else if !strings.Contains(s, `"`+exe+`"`) && id != "codex" {
			t.Errorf("%s: the path is not quoted: %s", id, s)
		}
	}
	c, _ := LookupClient("codex")
	if s := c.Snippet("kitchen", exe); !strings.Contains(s, `command = "C:\\Program Files\\raspi-mcp\\raspi-mcp-laptop.exe"`) {
		t.Errorf("codex TOML: %s", s)
	}
	if _, err := LookupClient("emacs"); err == nil {
		t.Error("took an unknown client")
	}
}

func TestExplainRefusal(t *testing.T) {
	for _, c := range []struct {
		status     int
		body, want string
	}{
		{401, "raspi-mcp: unknown or revoked token: make a token on the device ...", "revoked or rotated on the Pi: pair again"},
		{401, "raspi-mcp: token expired: make a token", "expired on the Pi: pair again"},
		{401, "raspi-mcp: no bearer token: ...", "refused the paired token (401"},
		{403, "raspi-mcp: role metrics may not use /mcp", "--role read, operate or admin"},
		{403, `Host "pi.lan:8443" is not a name of this device (http.names)`, "[http] names"},
		{503, "raspi-mcp: the token file cannot be read", "raspi-mcp status"},
		{502, "bad gateway", "502 Bad Gateway"},
		{200, "", ""},
	} {
		if got := ExplainRefusal(c.status, c.body); !strings.Contains(got, c.want) || (c.want == "" && got != "") {
			t.Errorf("ExplainRefusal(%d, %q) = %q, want %q", c.status, c.body, got, c.want)
		}
	}
}

// The laptop command end to end in a temporary config directory: pair
// stores and prints the entries, never the token again; re-pairing
// replaces; snippet --write writes; list and remove.
func TestCommand(t *testing.T) {
	st := Store{Dir: filepath.Join(t.TempDir(), "pairs")}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	run := func(args ...string) (string, string, error) {
		var o, e bytes.Buffer
		err := command(args, &o, &e, st, now)
		return o.String(), e.String(), err
	}
	line, _ := Encode(testLine())
	out, _, err := run(line, "--command", "/usr/bin/raspi-mcp-laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `paired "raspberrypi"`) || strings.Contains(out, testToken) || !strings.Contains(out, "/usr/bin/raspi-mcp-laptop connect paired raspberrypi") {
		t.Errorf("pair printed:\n%s", out)
	}
	for _, id := range ClientIDs() {
		c, _ := LookupClient(id)
		if !strings.Contains(out, c.Title+":") {
			t.Errorf("no %s entry", c.Title)
		}
	}
	out, _, err = run("--name", "kitchen", line, "--client", "claude-code", "--command", "rml")
	if err != nil || strings.TrimSpace(out[strings.Index(out, "Claude Code:"):]) != "Claude Code:\nclaude mcp add --scope user kitchen -- rml connect paired kitchen" {
		t.Errorf("--client claude-code: %v\n%s", err, out)
	}
	out, _, err = run(line, "--name", "kitchen", "--client", "claude-code", "--command", "rml")
	if err != nil || !strings.Contains(out, "paired again") {
		t.Errorf("re-pair: %v\n%s", err, out)
	}

	cfg := filepath.Join(t.TempDir(), "claude_desktop_config.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"other":{"command":"x"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = run("snippet", "kitchen", "--client", "claude-desktop", "--write", "--file", cfg, "--command", "rml")
	if err != nil || !strings.Contains(out, "added the entry") {
		t.Fatalf("snippet --write: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(cfg)
	if !strings.Contains(string(b), `"other"`) || !strings.Contains(string(b), `"kitchen"`) {
		t.Errorf("config:\n%s", b)
	}

	out, _, err = run("list")
	if err != nil || !strings.Contains(out, "kitchen") || !strings.Contains(out, "raspberrypi") || strings.Contains(out, testToken) {
		t.Errorf("list: %v\n%s", err, out)
	}
	out, _, err = run("list", "--json")
	var rows []listJSON
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || strings.Contains(out, testToken) || rows[0].Fingerprint != testFP {
		t.Errorf("list --json: %v\n%s", err, out)
	}
	if out, _, err = run("remove", "kitchen"); err != nil || !strings.Contains(out, "token revoke laptop") {
		t.Errorf("remove: %v %s", err, out)
	}

	// Usage errors and refusals store nothing.
	expired := testLine()
	expired.Expires = now.Add(-time.Minute)
	oldLine, _ := Encode(expired)
	for _, args := range [][]string{
		{},
		{line, line},
		{line, "--client", "emacs"},
		{line, "--client", "codex", "--write"},
		{line, "--write"},
		{line, "--client", "cursor", "--file", "x"},
		{line, "--name", "Bad Name"},
		{line, "--bogus"},
		{oldLine, "--name", "old"},
		{"garbage", "--name", "garbage"},
		{"snippet", "nothere"},
		{"remove"},
		{"list", "x"},
	} {
		_, _, err := run(args...)
		if err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if _, _, err := run("--help"); !errors.Is(err, ErrHelp) {
		t.Errorf("--help: %v", err)
	}
	if ps, _ := st.List(); len(ps) != 1 || ps[0].Name != "raspberrypi" {
		t.Errorf("after refusals: %+v", ps)
	}
}

// The QR code of a pairing line fits 80 columns, and what is drawn is the
// code's modules: each character cell is two of them.
func TestQR(t *testing.T) {
	long := testLine()
	long.URL = "https://kitchen-pi-zero-2w.home.arpa:65535/mcp"
	long.TokenName = strings.Repeat("l", 32)
	long.Profile = strings.Repeat("p", 32)
	s, _ := Encode(long)
	var b bytes.Buffer
	width, err := WriteQR(&b, s, false)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if width > 80 || len(lines) != (width+1)/2 {
		t.Fatalf("%d columns, %d lines for a %d-character line", width, len(lines), len(s))
	}
	for i, l := range lines {
		if n := len([]rune(l)); n != width {
			t.Errorf("line %d is %d columns, want %d", i, n, width)
		}
	}
	// The quiet zone is blank, the finder pattern's corner is dark.
	if strings.TrimSpace(lines[0]) != "" || strings.TrimSpace(lines[1]) != "" || []rune(lines[2])[quiet] != '█' {
		t.Errorf("no quiet zone or finder:\n%s", b.String())
	}
	var a bytes.Buffer
	if _, err := WriteQR(&a, s, true); err != nil || !strings.HasPrefix(a.String(), "\x1b[30;47m") {
		t.Errorf("ansi: %v %q", err, a.String()[:20])
	}
	t.Logf("a %d-character line: %d columns\n%s", len(s), width, b.String())
}

// What WriteQR draws scans: its characters read back as modules, drawn as
// an image, decode with ZXing's decoder to the line itself.
func TestQRScans(t *testing.T) {
	s, _ := Encode(testLine())
	var b bytes.Buffer
	width, err := WriteQR(&b, s, false)
	if err != nil {
		t.Fatal(err)
	}
	const scale = 4
	img := image.NewGray(image.Rect(0, 0, width*scale, width*scale))
	for y, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		for x, r := range []rune(line) {
			top, bottom := r == '█' || r == '▀', r == '█' || r == '▄'
			for dy := 0; dy < 2*scale; dy++ {
				for dx := 0; dx < scale; dx++ {
					dark := top
					if dy >= scale {
						dark = bottom
					}
					c := color.Gray{Y: 255}
					if dark {
						c.Y = 0
					}
					img.SetGray(x*scale+dx, (2*y)*scale+dy, c)
				}
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, b.String())
	}
	if res.GetText() != s {
		t.Errorf("the code reads %q, want %q", res.GetText(), s)
	}
}

// Command, as the laptop binary calls it, stores in the OS's user config
// directory and writes a client's user-wide config file there.
func TestCommandUserDirs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("XDG_CONFIG_HOME moves os.UserConfigDir on Linux only")
	}
	home, cfg := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", cfg)
	if err := os.Mkdir(filepath.Join(home, ".cursor"), 0o755); err != nil {
		t.Fatal(err)
	}
	line, _ := Encode(testLine())
	var o, e bytes.Buffer
	if err := Command([]string{line, "--client", "cursor", "--write", "--command", "/usr/bin/raspi-mcp-laptop"}, &o, &e); err != nil {
		t.Fatalf("%v\n%s%s", err, o.String(), e.String())
	}
	if _, err := os.Stat(filepath.Join(cfg, "raspi-mcp", "pairs", "raspberrypi.json")); err != nil {
		t.Errorf("not stored in the user config directory: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json"))
	if err != nil || !strings.Contains(string(b), `"raspberrypi"`) {
		t.Errorf("cursor's mcp.json: %v\n%s", err, b)
	}
	for id, want := range map[string]string{
		"claude-desktop": filepath.Join(cfg, "Claude", "claude_desktop_config.json"),
		"vscode":         filepath.Join(cfg, "Code", "User", "mcp.json"),
	} {
		c, _ := LookupClient(id)
		if got, err := c.ConfigPath(); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", id, got, err, want)
		}
	}
	// Claude Desktop is not installed here: refused, nothing written.
	o.Reset()
	if err := Command([]string{"snippet", "raspberrypi", "--client", "claude-desktop", "--write"}, &o, &e); err == nil || !strings.Contains(err.Error(), "installed") {
		t.Errorf("no Claude directory: %v", err)
	}
}

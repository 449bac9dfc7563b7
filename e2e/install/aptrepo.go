package install

// Signed apt repositories for the VM tests: a throwaway signing key, packages
// published to a suite with packaging/apt-repo (the same script `make
// apt-repo` runs), a small test package built with dpkg-deb, and the lines
// that make a guest use the repository. The repository is meant to sit in
// the directory shared into the guest (read-only at /share): the host
// publishes into it while the guest runs, and the guest's apt reads it with a
// copy: source, which fetches .deb files into apt's cache as a download would.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Suites are the channels packaging/apt-repo knows.
var Suites = []string{"stable", "beta"}

// TestPackage is the package BuildTestPackage makes: architecture all, one
// file, TestPackageFile, holding its version.
const (
	TestPackage     = "raspi-mcp-testpkg"
	TestPackageFile = "/usr/share/raspi-mcp-testpkg/version"
)

// Repo is a signed apt repository with its own throwaway key.
type Repo struct {
	Dir     string // what apt reads: dists/, pool/, raspi-mcp-archive-keyring.gpg
	Keyring string // the public key, binary, for /etc/apt/keyrings
	Key     string // the signing key's fingerprint
	// NotesURL, when set, gives every package Publish adds a Release-Notes
	// field: the URL with {version} replaced by the package's version.
	NotesURL string
	gnupg    string // GNUPGHOME holding the secret key
	script   string // packaging/apt-repo
}

// NewRepo makes a key in a fresh GNUPGHOME and an empty repository in dir
// (both suites exported and signed). dir's parent also gets dir+"-state",
// reprepro's database, which the guest never needs. The key's gpg-agent is
// stopped when the test ends.
func NewRepo(t testing.TB, dir string) *Repo {
	t.Helper()
	script := filepath.Join(moduleRoot(t), "packaging", "apt-repo")
	// gpg-agent's socket lives in GNUPGHOME; a short path keeps it under
	// the 108 bytes a Unix socket name may have.
	gnupg, err := os.MkdirTemp("", "aptkey")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", gnupg, "--kill", "gpg-agent").Run()
		os.RemoveAll(gnupg)
	})
	out, err := exec.Command(script, "testkey", gnupg).Output()
	if err != nil {
		t.Fatalf("apt-repo testkey: %v %s", err, stderrOf(err))
	}
	r := &Repo{Dir: dir, Keyring: filepath.Join(dir, "raspi-mcp-archive-keyring.gpg"),
		Key: strings.TrimSpace(string(out)), gnupg: gnupg, script: script}
	r.Publish(t, "stable")
	return r
}

// Publish adds the packages to suite (replacing older versions of them
// there) and re-signs both suites. With no packages it only re-exports.
func (r *Repo) Publish(t testing.TB, suite string, debs ...string) {
	t.Helper()
	cmd := exec.Command(r.script, append([]string{"add", r.Dir, suite}, debs...)...)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+r.gnupg, "RASPI_MCP_APT_KEY="+r.Key, "RASPI_MCP_APT_KEY_FILE=",
		"RASPI_MCP_APT_NOTES_URL="+r.NotesURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-repo add %s %v: %v\n%s", suite, debs, err, out)
	}
}

// Versions reads suite's Packages index for arch: package name -> version.
func (r *Repo) Versions(t testing.TB, suite, arch string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, fields := range r.Entries(t, suite, arch) {
		out[name] = fields["Version"]
	}
	return out
}

// Entries reads suite's Packages index for arch: package name -> its
// fields (single-line values; a continued Description keeps its first line).
func (r *Repo) Entries(t testing.TB, suite, arch string) map[string]map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, "dists", suite, "main", "binary-"+arch, "Packages"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if fields["Package"] != "" {
				out[fields["Package"]] = fields
			}
			fields = map[string]string{}
			continue
		}
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
			fields[k] = v
		}
	}
	if fields["Package"] != "" {
		out[fields["Package"]] = fields
	}
	return out
}

// BuildPackage builds name_version_arch.deb in dir with dpkg-deb: one file,
// /usr/share/NAME/version, holding the version, and nothing else (no
// maintainer scripts, no dependencies). It returns the package's path.
func BuildPackage(t testing.TB, dir, name, version, arch string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil { // the package's "./"
		t.Fatal(err)
	}
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: raspi-mcp tests <test@raspi-mcp.invalid>\n"+
		"Section: misc\nPriority: optional\nDescription: raspi-mcp test package %s\n a package the update tests install, upgrade and remove.\n",
		name, version, arch, version)
	files := map[string]string{"DEBIAN/control": control, "usr/share/" + name + "/version": version + "\n"}
	for p, s := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, fmt.Sprintf("%s_%s_%s.deb", name, version, arch))
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build %s: %v\n%s", deb, err, out)
	}
	return deb
}

// BuildTestPackage builds raspi-mcp-testpkg of version (architecture all)
// in dir and returns its path.
func BuildTestPackage(t testing.TB, dir, version string) string {
	t.Helper()
	return BuildPackage(t, dir, TestPackage, version, "all")
}

// Sources is the deb822 source for a repository at uri (a copy: or file:
// path in the guest, or an https URL), signed by the key at
// /etc/apt/keyrings/raspi-mcp-archive-keyring.gpg.
func Sources(uri, suite string) string {
	return fmt.Sprintf("Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /etc/apt/keyrings/raspi-mcp-archive-keyring.gpg\n", uri, suite)
}

// GuestSetup is a root shell script for the guest that trusts the key of the
// repository at guestDir (e.g. /share/apt), adds it as the only package
// source (the VM has no network, so Debian's own sources would only fail)
// and runs apt-get update. Repo.Publish on the host followed by
// GuestAptUpdate in the guest makes a new version visible.
func GuestSetup(guestDir, suite string) string {
	return fmt.Sprintf(`set -eu
install -d -m 0755 /etc/apt/keyrings
install -m 0644 %[1]s/raspi-mcp-archive-keyring.gpg /etc/apt/keyrings/raspi-mcp-archive-keyring.gpg
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*
cat >/etc/apt/sources.list.d/raspi-mcp.sources <<'EOF'
%[2]sEOF
%[3]s`, guestDir, Sources("copy:"+guestDir, suite), GuestAptUpdate)
}

// GuestAptUpdate refreshes the guest's package lists and fails on any
// error or warning (a bad signature is only a warning to apt-get).
const GuestAptUpdate = "apt-get update -q -o APT::Update::Error-Mode=any\n"

// GuestClock is a root shell line that sets the guest's clock to now (the
// host's time). Under emulation the guest's clock can trail the host's, and
// apt refuses a Release file dated in its future ("not valid yet"): set it
// after Repo.Publish and before the guest's apt-get update.
func GuestClock(now time.Time) string {
	return fmt.Sprintf("date -u -s @%d >/dev/null\n", now.Unix())
}

// moduleRoot is the directory with go.mod above the test's directory.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

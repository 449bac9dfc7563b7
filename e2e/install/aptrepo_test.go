package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needAptTools skips without Debian's archive tools, except in CI, which
// installs them (.ci/run).
func needAptTools(t *testing.T) {
	for _, prog := range []string{"reprepro", "gpg", "gpgv", "dpkg-deb"} {
		if _, err := exec.LookPath(prog); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed: .ci/run installs it", prog)
			}
			t.Skipf("%s not installed (apt-get install reprepro gpg gpgv dpkg-dev)", prog)
		}
	}
}

func gpgv(keyring string, args ...string) (string, error) {
	out, err := exec.Command("gpgv", append([]string{"--keyring", keyring}, args...)...).CombinedOutput()
	return string(out), err
}

// The repository make apt-repo builds: both suites signed (InRelease and
// Release.gpg) by the key exported beside them, the newest version of each
// package per suite and architecture, arch-all packages in every
// architecture, and a newer build published to one suite only.
func TestAptRepoSignedAndIndexed(t *testing.T) {
	needAptTools(t)
	work := t.TempDir()
	r := NewRepo(t, filepath.Join(work, "apt"))
	r.NotesURL = "https://example.org/raspi-mcp/releases/v{version}"
	var debs []string
	for _, a := range []string{"armhf", "arm64", "amd64"} {
		debs = append(debs, BuildPackage(t, work, "raspi-mcp", "0.2.0", a))
	}
	r.Publish(t, "stable", append(debs, BuildTestPackage(t, work, "1.0"))...)
	r.NotesURL = ""
	published := time.Now().UTC().Truncate(time.Second)
	r.Publish(t, "beta", BuildPackage(t, work, "raspi-mcp", "0.3.0~rc1", "arm64"))

	for _, suite := range Suites {
		dists := filepath.Join(r.Dir, "dists", suite)
		if out, err := gpgv(r.Keyring, filepath.Join(dists, "InRelease")); err != nil {
			t.Errorf("gpgv %s/InRelease: %v\n%s", suite, err, out)
		}
		if out, err := gpgv(r.Keyring, filepath.Join(dists, "Release.gpg"), filepath.Join(dists, "Release")); err != nil {
			t.Errorf("gpgv %s/Release.gpg: %v\n%s", suite, err, out)
		}
		rel, err := os.ReadFile(filepath.Join(dists, "Release"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Suite: " + suite, "Components: main", "Architectures: armhf arm64 amd64", "Date: "} {
			if !strings.Contains(string(rel), want) {
				t.Errorf("%s/Release lacks %q:\n%s", suite, want, rel)
			}
		}
	}
	for _, a := range []string{"armhf", "arm64", "amd64"} {
		got := r.Versions(t, "stable", a)
		if got["raspi-mcp"] != "0.2.0" || got[TestPackage] != "1.0" || len(got) != 2 {
			t.Errorf("stable %s: %v", a, got)
		}
	}
	if got := r.Versions(t, "beta", "arm64"); got["raspi-mcp"] != "0.3.0~rc1" || len(got) != 1 {
		t.Errorf("beta arm64: %v", got)
	}
	// What the update tools read: when a version was published, and its
	// notes where the publisher gave a URL.
	if e := r.Entries(t, "stable", "armhf")["raspi-mcp"]; e["Release-Notes"] != "https://example.org/raspi-mcp/releases/v0.2.0" {
		t.Errorf("stable armhf raspi-mcp: %v", e)
	}
	e := r.Entries(t, "beta", "arm64")["raspi-mcp"]
	date, err := time.Parse(time.RFC3339, e["Release-Date"])
	if err != nil || date.Before(published) || e["Release-Notes"] != "" {
		t.Errorf("beta arm64 raspi-mcp, published at %v or later: %v (%v)", published, e, err)
	}
	if got := r.Versions(t, "beta", "amd64"); len(got) != 0 {
		t.Errorf("beta amd64 should be empty: %v", got)
	}

	// A newer build replaces the older one in its suite; the other suite
	// keeps what it had.
	r.Publish(t, "stable", BuildTestPackage(t, work, "1.1"))
	if got := r.Versions(t, "stable", "armhf")[TestPackage]; got != "1.1" {
		t.Errorf("after publishing 1.1 stable has %s %q", TestPackage, got)
	}
	if out, err := gpgv(r.Keyring, filepath.Join(r.Dir, "dists/stable/InRelease")); err != nil {
		t.Errorf("re-signed InRelease: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "pool/main/r/raspi-mcp-testpkg/raspi-mcp-testpkg_1.0_all.deb")); !os.IsNotExist(err) {
		t.Errorf("1.0 is referenced by no suite but still in the pool: %v", err)
	}

	// Another key does not verify it.
	other := NewRepo(t, filepath.Join(work, "other"))
	if out, err := gpgv(other.Keyring, filepath.Join(r.Dir, "dists/stable/InRelease")); err == nil {
		t.Errorf("a foreign key verified InRelease:\n%s", out)
	}
}

// Every bad request is refused with the reason and leaves the repository as
// it was.
func TestAptRepoRefuses(t *testing.T) {
	needAptTools(t)
	work := t.TempDir()
	r := NewRepo(t, filepath.Join(work, "apt"))
	r.Publish(t, "stable", BuildTestPackage(t, work, "1.0"))
	inRelease := func() string {
		b, err := os.ReadFile(filepath.Join(r.Dir, "dists/stable/InRelease"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	before := inRelease()

	// The same version with other bytes.
	tree := t.TempDir()
	rebuilt := filepath.Join(work, "rebuilt.deb")
	if out, err := exec.Command("dpkg-deb", "-R", filepath.Join(work, TestPackage+"_1.0_all.deb"), tree).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tree, TestPackageFile), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", tree, rebuilt).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v %s", err, out)
	}
	notDeb := filepath.Join(work, "not.deb")
	if err := os.WriteFile(notDeb, []byte("not a package"), 0o644); err != nil {
		t.Fatal(err)
	}
	keyEnv := []string{"GNUPGHOME=" + r.gnupg, "RASPI_MCP_APT_KEY=" + r.Key, "RASPI_MCP_APT_KEY_FILE="}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown suite", keyEnv, []string{"add", r.Dir, "unstable", rebuilt}, "unknown suite unstable"},
		{"not a package", keyEnv, []string{"add", r.Dir, "stable", notDeb}, "is not a Debian package"},
		{"missing package", keyEnv, []string{"add", r.Dir, "stable", filepath.Join(work, "nope.deb")}, "no such package"},
		{"no key", []string{"GNUPGHOME=" + r.gnupg, "RASPI_MCP_APT_KEY=", "RASPI_MCP_APT_KEY_FILE="}, []string{"add", r.Dir, "stable", rebuilt}, "set RASPI_MCP_APT_KEY"},
		{"unknown key", []string{"GNUPGHOME=" + r.gnupg, "RASPI_MCP_APT_KEY=0123456789ABCDEF", "RASPI_MCP_APT_KEY_FILE="}, []string{"add", r.Dir, "stable", rebuilt}, "no such secret key"},
		{"same version, other bytes", keyEnv, []string{"add", r.Dir, "stable", rebuilt}, "Already existing files can only be included again, if they are the same"},
		{"older version", keyEnv, []string{"add", r.Dir, "stable", BuildTestPackage(t, t.TempDir(), "0.9")}, "stable already has raspi-mcp-testpkg 1.0"},
	} {
		cmd := exec.Command(r.script, c.args...)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: err %v, want an error saying %q:\n%s", c.name, err, c.want, out)
		}
	}
	if inRelease() != before {
		t.Error("a refused request changed the repository")
	}
}

// An armored secret key file is the other way to hand over the key.
func TestAptRepoKeyFile(t *testing.T) {
	needAptTools(t)
	work := t.TempDir()
	r := NewRepo(t, filepath.Join(work, "a"))
	key := filepath.Join(work, "secret.asc")
	cmd := exec.Command("gpg", "--batch", "--armor", "--output", key, "--export-secret-keys", r.Key)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+r.gnupg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("export secret key: %v %s", err, out)
	}
	dir := filepath.Join(work, "b")
	cmd = exec.Command(r.script, "add", dir, "beta", BuildTestPackage(t, work, "2.0"))
	cmd.Env = append(os.Environ(), "RASPI_MCP_APT_KEY_FILE="+key, "RASPI_MCP_APT_KEY=", "GNUPGHOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("apt-repo add with a key file: %v\n%s", err, out)
	}
	if out, err := gpgv(r.Keyring, filepath.Join(dir, "dists/beta/InRelease")); err != nil {
		t.Errorf("gpgv: %v\n%s", err, out)
	}
}

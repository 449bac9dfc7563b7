package apt

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSimulateDistUpgrade(t *testing.T) {
	p, err := ParseSimulate(fixture(t, "dist-upgrade.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Upgrades) != 5 || len(p.Installs) != 0 || len(p.Removals) != 0 || len(p.Held) != 0 {
		t.Fatalf("plan %+v", p)
	}
	want := Change{Name: "bash", From: "5.2.15-2+b8", To: "5.2.15-2+b13", Arch: "amd64", Origin: "Debian:12.15/oldstable"}
	if p.Upgrades[1] != want {
		t.Errorf("bash = %+v, want %+v", p.Upgrades[1], want)
	}
	var sec []string
	for _, c := range p.Upgrades {
		if c.Security {
			sec = append(sec, c.Name)
		}
	}
	// libgcrypt20 comes from both archives; the security one counts.
	if !reflect.DeepEqual(sec, []string{"libssl3", "postgresql-common", "libgcrypt20"}) || p.SecurityCount() != 3 {
		t.Errorf("security = %v", sec)
	}
	if got := p.Upgrades[4].Origin; got != "Debian:12.15/oldstable, Debian-Security:12/oldstable-security" {
		t.Errorf("origin = %q", got)
	}
}

func TestParseSimulateInstallsRemovalsHeld(t *testing.T) {
	p, err := ParseSimulate(fixture(t, "kept-back.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Held, []string{"raspi-firmware", "rpi-eeprom"}) {
		t.Errorf("held = %v", p.Held)
	}
	if len(p.Removals) != 1 || p.Removals[0] != (Change{Name: "raspi-mcp-oldtool", From: "0.9"}) {
		t.Errorf("removals = %+v", p.Removals)
	}
	if len(p.Installs) != 1 || p.Installs[0].To != "1:6.6.51-1+rpt3" || p.Installs[0].From != "" {
		t.Errorf("installs = %+v", p.Installs)
	}
	if got := NeedsReboot(p); !reflect.DeepEqual(got, []string{"linux-image-rpi-v8", "linux-image-6.6.51+rpt-rpi-v8"}) {
		t.Errorf("NeedsReboot = %v", got)
	}
	want := []string{"linux-image-rpi-v8=1:6.6.51-1+rpt3", "openssl=3.0.15-1~deb12u1", "linux-image-6.6.51+rpt-rpi-v8=1:6.6.51-1+rpt3", "raspi-mcp-oldtool-"}
	if got := p.Targets(); !reflect.DeepEqual(got, want) {
		t.Errorf("Targets = %q", got)
	}
	n, err := ParseSimulate(fixture(t, "install-new.txt"))
	if err != nil || len(n.Installs) != 2 || n.Installs[1].Name != "cowsay" {
		t.Errorf("install-new: %+v, %v", n, err)
	}
	r, err := ParseSimulate(fixture(t, "remove.txt"))
	if err != nil || len(r.Removals) != 1 || r.Removals[0].From != "3.0-13" {
		t.Errorf("remove: %+v, %v", r, err)
	}
}

func TestParseSimulateRefusesWhatItCannotRead(t *testing.T) {
	for _, in := range []string{
		"Inst bash\n",
		"Inst bash [1.0 (2.0 Debian:12/stable [all])\n",
		"Inst -o=evil [1.0] (2.0 Debian:12/stable [all])\n",
		"Inst bash [1.0] (2.0;rm Debian:12/stable [all])\n",
		"Remv\n",
		"The following packages have been kept back:\n  Bad_Name\n",
	} {
		if p, err := ParseSimulate(in); err == nil {
			t.Errorf("ParseSimulate(%q) = %+v, want an error", in, p)
		}
	}
}

func TestPlanHashAndDiff(t *testing.T) {
	p, _ := ParseSimulate(fixture(t, "kept-back.txt"))
	q := p
	q.Upgrades = slices.Clone(p.Upgrades)
	slices.Reverse(q.Upgrades)
	q.Upgrades[0].Origin = "another mirror"
	if p.Hash() != q.Hash() || !strings.HasPrefix(p.Hash(), "sha256:") {
		t.Errorf("order or origin changed the hash: %s %s", p.Hash(), q.Hash())
	}
	q.Upgrades[0].To = "3.0.16-1"
	if p.Hash() == q.Hash() {
		t.Error("a different version kept the hash")
	}
	want := []string{"- upgrade openssl 3.0.14-1~deb12u2 -> 3.0.15-1~deb12u1", "+ upgrade openssl 3.0.14-1~deb12u2 -> 3.0.16-1"}
	if got := q.Diff(p); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff = %q", got)
	}
	if d := p.Diff(p); len(d) != 0 {
		t.Errorf("self diff = %q", d)
	}
}

func TestValidNameAndVersion(t *testing.T) {
	for _, n := range []string{"bash", "libc6:arm64", "g++", "linux-image-6.6.51+rpt-rpi-v8", "raspi-mcp"} {
		if err := ValidName(n); err != nil {
			t.Errorf("ValidName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", "a", "-o", "Bash", "a b", "x;y", "libc6:", "x:ARM", "../x", strings.Repeat("a", 200)} {
		if err := ValidName(n); err == nil {
			t.Errorf("ValidName(%q) = nil", n)
		}
	}
	for _, v := range []string{"1.0", "1:6.6.51-1+rpt3", "3.0.15-1~deb12u1", "2.0a"} {
		if err := ValidVersion(v); err != nil {
			t.Errorf("ValidVersion(%q) = %v", v, err)
		}
	}
	for _, v := range []string{"", "-1", "1 0", "1;0", "1/0", "~1"} {
		if err := ValidVersion(v); err == nil {
			t.Errorf("ValidVersion(%q) = nil", v)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy(fixture(t, "policy-bash.txt"))
	if err != nil || p.Installed != "5.2.15-2+b8" || p.Candidate != "5.2.15-2+b13" || !reflect.DeepEqual(p.CandidateSuites, []string{"bookworm"}) || !p.UpdateAvailable() {
		t.Errorf("bash: %+v, %v", p, err)
	}
	p, err = ParsePolicy(fixture(t, "policy-raspi-mcp.txt"))
	if err != nil || p.Installed != "0.3.0" || p.Candidate != "0.4.0" || !reflect.DeepEqual(p.CandidateSuites, []string{"stable"}) {
		t.Errorf("raspi-mcp: %+v, %v", p, err)
	}
	p, err = ParsePolicy(fixture(t, "policy-missing.txt"))
	if err != nil || p.Installed != "" || p.Candidate != "" || p.UpdateAvailable() {
		t.Errorf("missing: %+v, %v", p, err)
	}
	if p, err := ParsePolicy("x:\n  Installed: (none)\n  Candidate: 1.0\n"); err != nil || p.Installed != "" || !p.UpdateAvailable() {
		t.Errorf("not installed: %+v, %v", p, err)
	}
	if _, err := ParsePolicy("x:\n  Installed: 1;rm\n"); err == nil {
		t.Error("a bad version was accepted")
	}
}

func TestParseStatus(t *testing.T) {
	lines := strings.Split(fixture(t, "status-fd.txt"), "\n")
	if p := ParseStatus(strings.Join(lines[:3], "\n")); p.Phase != "download" || p.Dpkg || p.Percent != 90.9 {
		t.Errorf("download: %+v", p)
	}
	if p := ParseStatus(strings.Join(lines[:4], "\n")); p.Phase != "install" || !p.Dpkg {
		t.Errorf("dpkg started: %+v", p)
	}
	p := ParseStatus(fixture(t, "status-fd.txt"))
	if p.Phase != "install" || !p.Dpkg || p.Percent != 83.3333 || p.Package != "raspi-mcp-testpkg" || len(p.Errors) != 1 {
		t.Errorf("end: %+v", p)
	}
	if p := ParseStatus(""); p.Phase != "" || p.Dpkg {
		t.Errorf("empty: %+v", p)
	}
}

func TestParseLocks(t *testing.T) {
	in := fixture(t, "locks.txt")
	if pid := ParseLocks(in, 0xb3, 2, 262147); pid != 4711 {
		t.Errorf("pid = %d, want 4711", pid)
	}
	if pid := ParseLocks(in, 0xb3, 2, 262148); pid != 99 {
		t.Errorf("pid = %d, want 99 (the holder, not the waiter)", pid)
	}
	if pid := ParseLocks(in, 0xb3, 2, 1); pid != 0 {
		t.Errorf("free lock: pid %d", pid)
	}
}

func TestParseConffiles(t *testing.T) {
	since := time.Date(2026, 11, 25, 1, 0, 0, 0, time.Local)
	kept, replaced := ParseConffiles(fixture(t, "dpkg.log"), since)
	if !reflect.DeepEqual(kept, []string{"/etc/raspi-mcp-testpkg.conf"}) || !reflect.DeepEqual(replaced, []string{"/etc/other.conf"}) {
		t.Errorf("kept %q, replaced %q", kept, replaced)
	}
}

func TestParseShow(t *testing.T) {
	m := ParseShow("Package: bash\nVersion: 5.2\nInstalled-Size: 7164\nSize: 1490652\n\nPackage: zip\nVersion: 3.0\nSize: 10\n" +
		"\nPackage: raspi-mcp\nVersion: 0.4.0\nRelease-Date: 2026-11-25T01:02:17Z\nRelease-Notes: https://example.org/notes/0.4.0\n" +
		"\nPackage: evil\nVersion: 1\nRelease-Notes: javascript:alert(1)\n")
	if e := m["raspi-mcp=0.4.0"]; e.ReleaseDate.IsZero() || e.ReleaseNotes != "https://example.org/notes/0.4.0" {
		t.Errorf("raspi-mcp = %+v", e)
	}
	if e := m["evil=1"]; e.ReleaseNotes != "" {
		t.Errorf("a notes URL that is not http(s) was kept: %q", e.ReleaseNotes)
	}
	if e := m["bash=5.2"]; e.Size != 1490652 || e.InstalledKiB != 7164 {
		t.Errorf("bash = %+v", e)
	}
	if e := m["zip=3.0"]; e.Size != 10 {
		t.Errorf("zip = %+v", e)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0}, {"1.0", "1.1", -1}, {"1.10", "1.9", 1}, {"1.0~rc1", "1.0", -1}, {"1:0.1", "2.0", 1},
		{"5.2.15-2+b8", "5.2.15-2+b13", -1}, {"1.0a", "1.0", 1}, {"1.0-1", "1.0-1~deb12u1", 1}, {"0.4.0", "0.3.0", 1}, {"1.01", "1.1", 0},
	} {
		if got := CompareVersions(c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestCompareVersionsOrdersAsDpkg(t *testing.T) {
	// Each pair is a < b, as `dpkg --compare-versions a lt b` says.
	for _, tc := range [][2]string{
		{"0.1.0", "0.2.0"},
		{"0.9", "0.10"},
		{"1.0~beta1", "1.0"},
		{"1.0~beta1", "1.0~beta2"},
		{"1.0~~", "1.0~"},
		{"1.0", "1.0+next"},
		{"1.0", "1.0.1"},
		{"1.0-1", "1.0-2"},
		{"1.0-9", "1.0-10"},
		{"1.0a", "1.0b"},
		{"1.0a", "1.0+"},
		{"9.9", "1:0.1"},
		{"0.1.0-5-gabc", "0.1.0-6-gabc"},
		{"1.00000000000000000000001", "1.00000000000000000000002"},
	} {
		if c := CompareVersions(tc[0], tc[1]); c != -1 {
			t.Errorf("CompareVersions(%q, %q) = %d, want -1", tc[0], tc[1], c)
		}
		if c := CompareVersions(tc[1], tc[0]); c != 1 {
			t.Errorf("CompareVersions(%q, %q) = %d, want 1", tc[1], tc[0], c)
		}
	}
	for _, v := range []string{"1.0", "0:1.0", "1.00", "1.0-1"} {
		if c := CompareVersions(v, v); c != 0 {
			t.Errorf("CompareVersions(%q, itself) = %d", v, c)
		}
	}
	if CompareVersions("0:1.0", "1.0") != 0 || CompareVersions("01.0", "1.0") != 0 {
		t.Error("a zero epoch or a leading zero changed the order")
	}
}

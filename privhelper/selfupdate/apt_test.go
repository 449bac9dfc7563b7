package selfupdate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// policyText is apt-cache policy raspi-mcp on a device with the project's
// stable and beta suites and the distribution's own archive.
const policyText = `raspi-mcp:
  Installed: 1:0.3.0
  Candidate: 0.4.0
  Version table:
     0.5.0~beta1 100
        100 file:/srv/raspi-mcp-apt beta/main arm64 Packages
     0.4.0 500
        500 file:/srv/raspi-mcp-apt stable/main arm64 Packages
 *** 1:0.3.0 500
        500 file:/srv/raspi-mcp-apt stable/main arm64 Packages
        100 /var/lib/dpkg/status
     0.2.0 500
        500 http://deb.example.org/debian trixie/main arm64 Packages
`

const showText = `Package: raspi-mcp
Version: 0.4.0
Architecture: arm64
Size: 9101876
Description: MCP server

Package: raspi-mcp
Version: 1:0.3.0
Size: 9034112
`

func TestParsePolicyKeepsTheChannelsSuites(t *testing.T) {
	got := ParsePolicy([]byte(policyText))
	want := []Candidate{{Version: "0.5.0~beta1", Channel: "beta"}, {Version: "0.4.0", Channel: "stable"}, {Version: "1:0.3.0", Channel: "stable"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := ParsePolicy(nil); len(got) != 0 {
		t.Fatalf("empty output: %+v", got)
	}
	sizes := ParseShowSizes([]byte(showText))
	if sizes["0.4.0"] != 9101876 || sizes["1:0.3.0"] != 9034112 || len(sizes) != 2 {
		t.Fatalf("sizes %v", sizes)
	}
}

type recorder struct{ calls []string }

func (r *recorder) run(_ context.Context, dir string, env []string, prog string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, strings.TrimSpace(strings.Join(env, " ")+" "+prog+" "+strings.Join(args, " ")+" @"+dir))
	if prog == "apt-get" && args[0] == "download" {
		return nil, os.WriteFile(filepath.Join(dir, "raspi-mcp_1%3a0.3.0_arm64.deb"), []byte("deb"), 0o644)
	}
	return nil, nil
}

func TestAptKeepPrefersWhatIsOnDisk(t *testing.T) {
	ctx := context.Background()
	keep, archives := t.TempDir(), t.TempDir()
	rec := &recorder{}
	a := Apt{Run: rec.run, KeepDir: keep, Archives: archives}
	// Not cached anywhere: downloaded into the keep directory.
	p, err := a.Keep(ctx, "1:0.3.0")
	if err != nil || p != filepath.Join(keep, "raspi-mcp_1%3a0.3.0_arm64.deb") || len(rec.calls) != 1 ||
		rec.calls[0] != "apt-get download -q raspi-mcp=1:0.3.0 @"+keep {
		t.Fatalf("download: %q %v %q", p, err, rec.calls)
	}
	// In apt's cache: copied, nothing run.
	if err := os.WriteFile(filepath.Join(archives, "raspi-mcp_0.4.0_arm64.deb"), []byte("0.4.0"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = a.Keep(ctx, "0.4.0")
	if b, _ := os.ReadFile(p); err != nil || string(b) != "0.4.0" || filepath.Dir(p) != keep || len(rec.calls) != 1 {
		t.Fatalf("from the cache: %q %v %q", p, err, rec.calls)
	}
	if _, err := a.Keep(ctx, "-o x"); err == nil {
		t.Fatal("kept an option")
	}
}

func TestAptInstallNeverAsks(t *testing.T) {
	rec := &recorder{}
	a := Apt{Run: rec.run}
	if err := a.Install(context.Background(), "0.4.0"); err != nil {
		t.Fatal(err)
	}
	if err := a.Reinstall(context.Background(), "/var/cache/raspi-mcp/raspi-mcp_0.3.0_arm64.deb"); err != nil {
		t.Fatal(err)
	}
	opts := "install -y -q --allow-downgrades --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold"
	want := []string{
		"DEBIAN_FRONTEND=noninteractive APT_LISTCHANGES_FRONTEND=none apt-get " + opts + " raspi-mcp=0.4.0 @/",
		"DEBIAN_FRONTEND=noninteractive APT_LISTCHANGES_FRONTEND=none apt-get " + opts + " /var/cache/raspi-mcp/raspi-mcp_0.3.0_arm64.deb @/",
	}
	if !slices.Equal(rec.calls, want) {
		t.Fatalf("calls\n%q\nwant\n%q", rec.calls, want)
	}
	for _, bad := range []string{"raspi-mcp_0.3.0.deb", "/tmp/evil_0.3.0.deb", "/var/cache/raspi-mcp/raspi-mcp_0.3.0.tar"} {
		if err := a.Reinstall(context.Background(), bad); err == nil {
			t.Errorf("reinstalled %q", bad)
		}
	}
}

package install

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/vmtest"
)

// TestOSUpdatesThroughMCP runs the OS update tools on real apt, dpkg and
// systemd: raspi-mcp and raspi-mcp-testpkg 1.0 installed from the test's
// signed repository; 1.1 published, previewed and applied through MCP
// (the helper runs apt as transient units); a preview made stale by a
// newer publication refused at apply; a cancel before dpkg starts leaving
// the installed version; the dpkg lock held by a test process refused
// naming it. It needs the package make test-e2e builds:
//
//	RASPI_MCP_E2E_DEB=dist/raspi-mcp_X_amd64.deb go test -count=1 -v -timeout 40m -run TestOSUpdatesThroughMCP ./e2e/install
func TestOSUpdatesThroughMCP(t *testing.T) {
	deb := os.Getenv(envDeb)
	if deb == "" {
		if os.Getenv("CI") == "true" && os.Getenv("RASPI_MCP_E2E") == "1" {
			t.Fatalf("%s must name the package (make test-e2e)", envDeb)
		}
		t.Skipf("needs %s: run make test-e2e", envDeb)
	}
	l := newSSHLab(t, deb)
	share := t.TempDir()
	if err := os.Chmod(share, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := NewRepo(t, filepath.Join(share, "apt"))
	work := t.TempDir()
	repo.Publish(t, "stable", deb, BuildTestPackage(t, work, "1.0"))
	l.bootVM(share)

	// raspi-mcp from the repository, pi its admin, [manage] updates on.
	l.rootScript("install", GuestClock(time.Now())+GuestSetup(guestRepo, "stable")+
		"apt-get install -y -q raspi-mcp "+TestPackage+"\nusermod -aG raspi-mcp pi\n"+
		"cat >/etc/raspi-mcp/config.d/e2e-updates.toml <<'EOF'\n[roles]\nusers = { pi = \"admin\" }\n\n[manage]\nupdates = true\nEOF\n"+
		"systemctl restart raspi-mcp-helper raspi-mcp\n")
	l.logout()
	cs := l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio")
	defer cs.Close()
	publish := func(v string) {
		repo.Publish(t, "stable", BuildTestPackage(t, work, v))
		l.rootScript("clock", GuestClock(time.Now()))
	}
	testpkg := func() string {
		return strings.TrimSpace(l.mustPi("testpkg version", "dpkg-query -W -f '${Version}' "+TestPackage))
	}

	// raspi-mcp is what the repository has, with its publication date.
	check := mustCall(t, cs, "manage_check_for_updates", map[string]any{})
	if check["current_version"] != debVersion(t, deb) || check["update_available"] != false || check["release_date"] == nil || check["channel"] != "stable" {
		t.Fatalf("check_for_updates: %v", check)
	}

	// ---- 1.1 is published, previewed (the lists refreshed by the helper)
	// and applied through change_prepare and change_commit.
	publish("1.1")
	t0 := time.Now()
	pre := mustCall(t, cs, "manage_preview_os_updates", map[string]any{})
	t.Logf("MEASURE preview with apt-get update through the helper: %.2fs", time.Since(t0).Seconds())
	if !planHas(pre, TestPackage, "1.0", "1.1") || pre["refreshed"] != true {
		t.Fatalf("preview: %v", pre)
	}
	t0 = time.Now()
	res := l.commit(cs, "manage_apply_os_updates", map[string]any{"plan_hash": pre["plan_hash"], "reason": "e2e"})
	t.Logf("MEASURE apply of %s 1.1 (download and install units): %.2fs", TestPackage, time.Since(t0).Seconds())
	if st, _ := res["status"].(map[string]any); st["status"] != "succeeded" {
		t.Fatalf("apply: %v", res)
	}
	if got := testpkg(); got != "1.1" {
		t.Fatalf("dpkg says %s %s after the apply, want 1.1", TestPackage, got)
	}
	if out := l.mustPi("dpkg -s", "dpkg -s "+TestPackage); !strings.Contains(out, "Status: install ok installed") || !strings.Contains(out, "Version: 1.1") {
		t.Fatalf("dpkg -s:\n%s", out)
	}

	// ---- A preview made stale: 1.2 previewed, then 1.3 published and the
	// lists refreshed before the commit.
	publish("1.2")
	pre = mustCall(t, cs, "manage_preview_os_updates", map[string]any{})
	if !planHas(pre, TestPackage, "1.1", "1.2") {
		t.Fatalf("preview of 1.2: %v", pre)
	}
	tok := mustCall(t, cs, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": pre["plan_hash"]}})
	publish("1.3")
	l.rootScript("apt-get update", GuestAptUpdate)
	// The stale plan is refused by the call's own dry run, before anyone
	// is asked; should it come to wait, the owner approves.
	_ = l.approveOnPi()
	failed, m := call(t, cs, "change_commit", map[string]any{"token": tok["token"]})
	if !failed || errCode(m) != "failed_precondition" || !strings.Contains(jsonText(m), "1.3") {
		t.Fatalf("a stale plan was not refused with its difference: %v", m)
	}
	if got := testpkg(); got != "1.1" {
		t.Fatalf("a refused apply changed %s to %s", TestPackage, got)
	}

	// ---- A cancel before dpkg starts: the download is held at the door by
	// an apt method that waits for a flag file before it hands over to
	// apt's own copy method, so the run stays in its download phase for as
	// long as the test needs, without depending on timing.
	l.rootScript("a held download", heldMethod+GuestAptUpdate+"rm /run/e2e-go\n")
	pre = mustCall(t, cs, "manage_preview_os_updates", map[string]any{"refresh": false})
	if !planHas(pre, TestPackage, "1.1", "1.3") {
		t.Fatalf("preview of 1.3: %v", pre)
	}
	tok = mustCall(t, cs, "change_prepare", map[string]any{"tool": "manage_apply_os_updates", "arguments": map[string]any{"plan_hash": pre["plan_hash"]}})
	applied := make(chan map[string]any, 1)
	_ = l.approveOnPi()
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "change_commit", Arguments: map[string]any{"token": tok["token"]}})
		m := map[string]any{"transport_error": fmt.Sprint(err)}
		if err == nil {
			m = map[string]any{"result": res.StructuredContent, "meta": res.Meta}
		}
		applied <- m
	}()
	job := l.runningJob(cs, "download")
	if c := mustCall(t, cs, "manage_cancel_job", map[string]any{"job_id": job}); c["cancelled"] != true {
		t.Fatalf("cancel: %v", c)
	}
	if m := <-applied; !strings.Contains(jsonText(m), "failed_precondition") || !strings.Contains(jsonText(m), "cancelled") {
		t.Fatalf("the cancelled apply: %v", m)
	}
	if got := testpkg(); got != "1.1" {
		t.Fatalf("after a cancel before dpkg, %s is %s, want 1.1", TestPackage, got)
	}
	l.rootScript("the download let go", "touch /run/e2e-go\nsed -i 's|^URIs: held:|URIs: copy:|' /etc/apt/sources.list.d/raspi-mcp.sources\n"+GuestAptUpdate)

	// ---- The dpkg lock held by a test process: refused, naming it.
	l.mustPi("hold the dpkg lock", "sudo systemd-run --unit raspi-mcp-e2e-lock flock /var/lib/dpkg/lock-frontend sleep 600")
	defer l.sshOut("pi", "sudo systemctl stop raspi-mcp-e2e-lock")
	deadline := time.Now().Add(guestGuard)
	for {
		failed, m = call(t, cs, "manage_preview_os_updates", map[string]any{})
		if failed || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // the lock unit is starting
	}
	if !failed || errCode(m) != "resource_exhausted" || !strings.Contains(jsonText(m), "flock") {
		t.Fatalf("preview with the dpkg lock held: %v", m)
	}
	l.mustPi("release the dpkg lock", "sudo systemctl stop raspi-mcp-e2e-lock")
	if units := l.mustPi("no apt units left", "systemctl list-units --all --no-legend 'raspi-mcp-os-update-*' || true"); strings.TrimSpace(units) != "" {
		t.Errorf("transient apt units left behind:\n%s", units)
	}
}

// mustCall calls a tool and fails t on an error result.
func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	failed, m := call(t, cs, name, args)
	if failed {
		t.Fatalf("%s %v: %v", name, args, m)
	}
	return m
}

// commit is change_prepare and change_commit of a critical call, which
// the owner approves at the Pi's console (sudo raspi-mcp approve); it
// returns the call's own result.
func (l *lab) commit(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
	t := l.t
	t.Helper()
	tok := mustCall(t, cs, "change_prepare", map[string]any{"tool": tool, "arguments": args})
	answered := l.approveOnPi()
	out := mustCall(t, cs, "change_commit", map[string]any{"token": tok["token"]})
	t.Logf("at the Pi: %s", answered())
	res, _ := out["result"].(map[string]any)
	return res
}

// approveOnPi has the owner at the Pi approve the next call that waits
// for the device, as root at its console; answered returns what the
// console printed once it is done.
func (l *lab) approveOnPi() (answered func() string) {
	done := make(chan string, 1)
	go func() {
		out, err := l.sshOut("pi", "echo y | sudo raspi-mcp approve --wait 3m")
		done <- fmt.Sprintf("%s%v", out, err)
	}()
	return func() string { return <-done }
}

func planHas(preview map[string]any, name, from, to string) bool {
	ups, _ := preview["upgrades"].([]any)
	for _, u := range ups {
		c, _ := u.(map[string]any)
		if c["name"] == name && c["from"] == from && c["to"] == to {
			return true
		}
	}
	return false
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// bootVM starts the test VM with share at /share, the Pi's user pi and sshd
// on l.port, and waits for ssh; the VM stops when the test ends.
func (l *lab) bootVM(share string) {
	t := l.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cache, err := vmtest.NewCache(vmtest.DefaultCacheDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	im, err := cache.Image(ctx, vmtest.DefaultRecipe(), false)
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(l.home, ".ssh/id_ed25519.pub"), filepath.Join(share, "laptop.pub"))
	if err := os.WriteFile(filepath.Join(share, "prepare"), []byte(prepareGuest), 0o755); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	ready := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Logf("guest: %s", sc.Text())
			if strings.HasPrefix(sc.Text(), "ready ") {
				ready <- struct{}{}
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := cache.Run(ctx, im, vmtest.RunOptions{
			Command: []string{"/share/prepare"}, Share: share, Timeout: 25 * time.Minute,
			Forwards: []vmtest.Forward{{HostPort: l.port, GuestPort: 22}},
			Stdout:   pw, Stderr: pw,
		})
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() {
		_, _ = l.sshOut("pi", "sudo touch /run/e2e-done")
		t.Logf("VM: %v", <-done)
		cancel()
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("the VM ended before it was ready: %v", err)
	case <-time.After(10 * time.Minute):
		t.Fatal("the VM was not ready after 10 minutes")
	}
	l.waitSSH()
}

// heldMethod is a root script for the guest: an apt method "held" that,
// started by an apt-get --download-only, waits for /run/e2e-go, and then
// runs apt's copy method; and the test's source switched to it. apt starts
// its methods for other commands too (apt-get -s asks them for their
// capabilities), which must not wait.
const heldMethod = `cat >/usr/lib/apt/methods/held <<'SH'
#!/bin/sh
if tr '\0' ' ' </proc/$PPID/cmdline | grep -q -e --download-only; then
	while [ ! -e /run/e2e-go ]; do sleep 0.2; done
fi
exec /usr/lib/apt/methods/copy "$@"
SH
chmod 0755 /usr/lib/apt/methods/held
touch /run/e2e-go
sed -i 's|^URIs: copy:|URIs: held:|' /etc/apt/sources.list.d/raspi-mcp.sources
`

// runningJob waits until manage_list_jobs shows an OS update running in
// phase and returns its id.
func (l *lab) runningJob(cs *mcp.ClientSession, phase string) string {
	l.t.Helper()
	deadline := time.Now().Add(guestGuard)
	for time.Now().Before(deadline) {
		jobs := mustCall(l.t, cs, "manage_list_jobs", map[string]any{})
		list, _ := jobs["jobs"].([]any)
		for _, x := range list {
			j, _ := x.(map[string]any)
			if j["kind"] == "os_update" && j["status"] == "running" && strings.Contains(fmt.Sprint(j["summary"]), "apply: "+phase) {
				return fmt.Sprint(j["job_id"])
			}
		}
		time.Sleep(time.Second)
	}
	l.t.Fatalf("no OS update running in phase %s", phase)
	return ""
}

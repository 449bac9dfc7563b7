package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envDebBroken names a build newer than RASPI_MCP_E2E_DEB_NEXT whose agent
// fails its own start-up check (linked with -X main.selfCheckFault=...):
// an honestly broken release for the rollback.
const envDebBroken = "RASPI_MCP_E2E_DEB_BROKEN"

// selfUpdateConfig lets pi update raspi-mcp over MCP: admin, with the
// update switch on and a health deadline that fits a busy emulated guest.
const selfUpdateConfig = `[roles]
users = { pi = "admin" }

[manage]
updates = true
update_health_timeout = "3m"
`

// TestSelfUpdateAndRollbackOverSSH: raspi-mcp installed from the signed
// repository updates itself through manage_update_server over ssh -T; the
// same client reconnects to the new version, the audit trail survives and
// last_update says succeeded. Then a broken newer build is published: the
// update ends with the previous version running again and last_update
// rolled back with the broken agent's reason.
func TestSelfUpdateAndRollbackOverSSH(t *testing.T) {
	deb, next, broken := os.Getenv(envDeb), os.Getenv(envDebNext), os.Getenv(envDebBroken)
	if deb == "" || next == "" || broken == "" {
		if os.Getenv("CI") == "true" && os.Getenv("RASPI_MCP_E2E") == "1" {
			t.Fatalf("%s, %s and %s must name the packages (make test-e2e)", envDeb, envDebNext, envDebBroken)
		}
		t.Skipf("needs %s, %s and %s: run make test-e2e", envDeb, envDebNext, envDebBroken)
	}
	v1, v2, v3 := debVersion(t, deb), debVersion(t, next), debVersion(t, broken)
	for _, p := range [][2]string{{v2, v1}, {v3, v2}} {
		if out, err := exec.Command("dpkg", "--compare-versions", p[0], "gt", p[1]).CombinedOutput(); err != nil {
			t.Fatalf("%s is not newer than %s: %s", p[0], p[1], out)
		}
	}
	l := newSSHLab(t)
	share := t.TempDir()
	if err := os.Chmod(share, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := NewRepo(t, filepath.Join(share, "apt"))
	repo.Publish(t, "stable", deb)
	l.bootVM(share)

	l.rootScript("install from the repository", GuestClock(time.Now())+GuestSetup(guestRepo, "stable")+
		"apt-get install -y -q raspi-mcp\n"+
		"install -d /etc/raspi-mcp/config.d\ncat >/etc/raspi-mcp/config.d/selfupdate.toml <<'EOF'\n"+selfUpdateConfig+"EOF\n"+
		"usermod -aG raspi-mcp pi\nsystemctl restart raspi-mcp-helper raspi-mcp\n")
	l.logout() // group raspi-mcp from the next login on
	cs := l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio")
	if got := cs.InitializeResult().ServerInfo.Version; got != v1 {
		t.Fatalf("installed agent %q, want %q", got, v1)
	}
	audit0 := l.auditRecords(cs)
	cs.Close()

	// ---- A newer build in stable: the update succeeds.
	repo.Publish(t, "stable", next)
	l.rootScript("refresh", GuestClock(time.Now())+GuestAptUpdate)
	took, last, size := l.selfUpdate(v2, "")
	if last["status"] != "succeeded" || last["outcome"] != "succeeded" || last["from"] != v1 || last["to"] != v2 {
		t.Fatalf("last_update after the update: %v", last)
	}
	t.Logf("MEASURE self-update %s to %s: manage_update_server commit to the new agent answering over SSH: %.2fs; download %d bytes", v1, v2, took.Seconds(), size)
	cs = l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio")
	if n := l.auditRecords(cs); n <= audit0 {
		t.Fatalf("audit records %v after the update, %v before: the trail did not survive", n, audit0)
	}
	cs.Close()
	if out := l.mustPi("audit verify", "sudo raspi-mcp audit verify"); !strings.Contains(out, "intact") {
		t.Fatalf("audit verify after the update: %s", out)
	}

	// ---- A broken newer build: the update is rolled back by itself.
	repo.Publish(t, "stable", broken)
	l.rootScript("refresh", GuestClock(time.Now())+GuestAptUpdate)
	took, last, _ = l.selfUpdate(v2, v3)
	if last["status"] != "failed" || last["outcome"] != "rolled_back" || last["to"] != v3 || !strings.Contains(last["reason"].(string), "start-up check fault") {
		t.Fatalf("last_update after the broken build: %v", last)
	}
	t.Logf("MEASURE self-update rollback: manage_update_server commit to %s answering again with last_update rolled_back: %.2fs (reason: %s)", v2, took.Seconds(), last["reason"])
	if got := strings.TrimSpace(l.mustPi("installed version", "dpkg-query -W -f '${Version}' raspi-mcp")); got != v2 {
		t.Fatalf("after the rollback dpkg says %q, want %q", got, v2)
	}
	if out := l.mustPi("audit verify after the rollback", "sudo raspi-mcp audit verify"); !strings.Contains(out, "intact") {
		t.Fatalf("audit verify after the rollback: %s", out)
	}
}

// selfUpdate prepares and commits manage_update_server over ssh -T, then
// reconnects until the agent answers as want and last_update has ended
// (for a broken target, until the rollback has ended). It returns the
// time from the commit to then, last_update and the download size.
func (l *lab) selfUpdate(want, target string) (time.Duration, map[string]any, int64) {
	l.t.Helper()
	cs := l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio")
	args := map[string]any{"reason": "e2e self-update"}
	if target != "" {
		args["target_version"] = target
	}
	isErr, p := call(l.t, cs, "change_prepare", map[string]any{"tool": "manage_update_server", "arguments": args})
	if isErr {
		l.t.Fatalf("change_prepare manage_update_server: %v", p)
	}
	t0 := time.Now()
	answered := l.approveOnPi()
	isErr, c := call(l.t, cs, "change_commit", map[string]any{"token": p["token"]})
	if isErr {
		l.t.Fatalf("change_commit: %v", c)
	}
	l.t.Logf("at the Pi: %s", answered())
	res, _ := c["result"].(map[string]any)
	size, _ := res["download_bytes"].(float64)
	l.t.Logf("committed: %v", res)
	cs.Close()
	deadline := time.Now().Add(2 * guestGuard)
	for {
		cs, err := l.connect("pi", "/usr/bin/raspi-mcp", "stdio")
		if err == nil {
			_, st := call(l.t, cs, "manage_get_server_status", nil)
			last, _ := st["last_update"].(map[string]any)
			got := cs.InitializeResult().ServerInfo.Version
			cs.Close()
			if got == want && last != nil && last["status"] != "running" {
				return time.Since(t0), last, int64(size)
			}
		}
		if time.Now().After(deadline) {
			out, _ := l.sshOut("pi", "sudo cat /var/lib/raspi-mcp-helper/selfupdate.json; sudo journalctl -q --no-pager -n 80 -u 'raspi-mcp-selfupdate-*' -u raspi-mcp -u raspi-mcp-helper")
			l.t.Fatalf("the update to %s did not end with %s answering: %v\n%s", target, want, err, out)
		}
		time.Sleep(time.Second)
	}
}

func (l *lab) auditRecords(cs *mcp.ClientSession) float64 {
	l.t.Helper()
	_, st := call(l.t, cs, "manage_get_server_status", nil)
	audit, _ := st["audit"].(map[string]any)
	n, _ := audit["records"].(float64)
	return n
}

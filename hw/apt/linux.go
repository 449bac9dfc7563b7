package apt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Linux is the real package manager's read side. apt-get -s, apt-cache
// and dpkg-query work as any user, so the unprivileged agent uses it
// directly; nothing here takes a lock or changes a file.
type Linux struct {
	// Root is where /run, /var and /proc are read ("/" by default; tests
	// point it at a fixture tree).
	Root string
	// AptGet, AptCache and DpkgQuery are the programs; "" means the
	// Debian paths under /usr/bin.
	AptGet, AptCache, DpkgQuery string
}

var _ Source = Linux{}

func (l Linux) path(p string) string {
	if l.Root == "" {
		return p
	}
	return filepath.Join(l.Root, p)
}

func orDefault(p, def string) string {
	if p == "" {
		return def
	}
	return p
}

// maxOutput bounds what a command may print: a full upgrade of a desktop
// image prints a few hundred kilobytes.
const maxOutput = 16 << 20

// run runs a read-only apt command in the C locale (the parsers read its
// English), without a terminal, and returns stdout.
func run(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = []string{"LANG=C", "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{&out, maxOutput}, &limited{&errb, 64 << 10}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return "", fmt.Errorf("apt: %s %s: %w: %s", filepath.Base(prog), strings.Join(args, " "), err, msg)
	}
	return out.String(), nil
}

type limited struct {
	b   *bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room < len(p) {
		l.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.b.Write(p)
}

// Simulate runs apt-get -s dist-upgrade: the upgrade apt would do with
// new dependencies and removals, which on Raspberry Pi OS is the
// recommended one (full-upgrade).
func (l Linux) Simulate(ctx context.Context) (Plan, error) {
	out, err := run(ctx, orDefault(l.AptGet, "/usr/bin/apt-get"), "-s", "-q", "-o", "Debug::NoLocking=1", "dist-upgrade")
	if err != nil {
		return Plan{}, err
	}
	return ParseSimulate(out)
}

// Sizes reads the plan's versions from apt-cache show (Size, and
// Installed-Size in KiB) and the installed ones from dpkg-query.
func (l Linux) Sizes(ctx context.Context, p Plan) (Sizes, error) {
	var s Sizes
	if err := p.Validate(); err != nil {
		return s, err
	}
	var want, names []string
	for _, c := range append(append([]Change{}, p.Upgrades...), p.Installs...) {
		want = append(want, c.Name+"="+c.To)
	}
	for _, c := range append(append([]Change{}, p.Upgrades...), p.Removals...) {
		names = append(names, c.Name)
	}
	if len(want) > 0 {
		out, err := run(ctx, orDefault(l.AptCache, "/usr/bin/apt-cache"), append([]string{"show", "--no-all-versions", "--"}, want...)...)
		if err != nil {
			return s, err
		}
		for _, e := range ParseShow(out) {
			s.DownloadBytes += e.Size
			s.InstalledSizeDelta += e.InstalledKiB * 1024
		}
	}
	if len(names) > 0 {
		out, err := run(ctx, orDefault(l.DpkgQuery, "/usr/bin/dpkg-query"), append([]string{"-W", "-f=${Installed-Size}\\n", "--"}, names...)...)
		if err != nil {
			return s, err
		}
		for _, f := range strings.Fields(out) {
			var kib int64
			fmt.Sscanf(f, "%d", &kib)
			s.InstalledSizeDelta -= kib * 1024
		}
	}
	return s, nil
}

// Installed asks dpkg-query; it exits 1 when a name is not installed but
// still prints the others, so its output is read either way.
func (l Linux) Installed(ctx context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	for _, n := range names {
		if err := ValidName(n); err != nil {
			return nil, err
		}
	}
	cmd := exec.CommandContext(ctx, orDefault(l.DpkgQuery, "/usr/bin/dpkg-query"), append([]string{"-W", "-f=${Package} ${db:Status-Abbrev} ${Version}\\n", "--"}, names...)...)
	cmd.Env = []string{"LANG=C", "LC_ALL=C"}
	b, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("apt: dpkg-query: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// "bash ii  5.2.15-2+b8": installed ("i" in the second column).
		if len(f) == 3 && len(f[1]) >= 2 && f[1][1] == 'i' {
			out[f[0]] = f[2]
		}
	}
	return out, nil
}

// Release reads apt-cache show pkg=version.
func (l Linux) Release(ctx context.Context, pkg, version string) (time.Time, string, error) {
	if err := ValidName(pkg); err != nil {
		return time.Time{}, "", err
	}
	if err := ValidVersion(version); err != nil {
		return time.Time{}, "", err
	}
	out, err := run(ctx, orDefault(l.AptCache, "/usr/bin/apt-cache"), "show", "--no-all-versions", "--", pkg+"="+version)
	if err != nil {
		return time.Time{}, "", err
	}
	e := ParseShow(out)[pkg+"="+version]
	return e.ReleaseDate, e.ReleaseNotes, nil
}

// Policy runs apt-cache policy for one package.
func (l Linux) Policy(ctx context.Context, pkg string) (Policy, error) {
	if err := ValidName(pkg); err != nil {
		return Policy{}, err
	}
	out, err := run(ctx, orDefault(l.AptCache, "/usr/bin/apt-cache"), "policy", "--", pkg)
	if err != nil {
		return Policy{}, err
	}
	return ParsePolicy(out)
}

// State reads /run/reboot-required, the newest Release file under
// /var/lib/apt/lists (apt-get update rewrites each it fetched, and
// touches the ones that did not change), and the dpkg lock.
func (l Linux) State(ctx context.Context) (State, error) {
	var s State
	if _, err := os.Stat(l.path("/run/reboot-required")); err == nil {
		s.RebootRequired = true
		if b, err := os.ReadFile(l.path("/run/reboot-required.pkgs")); err == nil {
			s.RebootPackages = strings.Fields(string(b))
		}
	}
	s.ListsUpdated = listsUpdated(l.path("/var/lib/apt"))
	var files []string
	for _, f := range LockFiles() {
		files = append(files, l.path(f))
	}
	h, err := LockHolder(l.path("/proc"), files)
	if err != nil {
		return s, err
	}
	s.Lock = h
	return s, nil
}

// listsUpdated is the time of the last apt-get update: the periodic
// success stamp where a system has one, else the newest Release file.
func listsUpdated(varLibApt string) time.Time {
	if fi, err := os.Stat(filepath.Join(varLibApt, "periodic", "update-success-stamp")); err == nil {
		return fi.ModTime().UTC()
	}
	var newest time.Time
	entries, _ := os.ReadDir(filepath.Join(varLibApt, "lists"))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "Release") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
	}
	return newest.UTC()
}

// LockFiles returns dpkg's locks, front-end first: apt holds lock-frontend for
// a whole run, dpkg holds lock while it works.
func LockFiles() []string { return []string{LockFrontend, LockBackend} }

// dpkg's two locks (apt takes the front-end one first). Only their inodes
// are read, to find the holder in /proc/locks; dpkg's database never is.
const (
	LockFrontend = "/var/lib/dpkg/lock-frontend"
	LockBackend  = "/var/lib/dpkg/lock"
)

// LockHolder finds who holds one of the lock files from proc's locks
// (/proc/locks), which anyone may read (the holder's /proc/PID/fd would
// need privileges the helper does not keep), and names it from its
// cmdline. nil: nobody.
func LockHolder(proc string, files []string) (*Holder, error) {
	locks, err := os.ReadFile(filepath.Join(proc, "locks"))
	if err != nil {
		return nil, fmt.Errorf("apt: read %s/locks: %w", proc, err)
	}
	for _, lf := range files {
		fi, err := os.Stat(lf)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("apt: %s: %w", lf, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		dev := uint64(st.Dev)
		major := uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff)
		minor := uint32(dev&0xff) | uint32((dev>>12)&^0xff)
		if pid := ParseLocks(string(locks), major, minor, st.Ino); pid > 0 {
			return &Holder{PID: pid, Command: command(proc, pid), Lock: lf}, nil
		}
	}
	return nil, nil
}

// command is a process's command line, or its name when the command line
// is empty (a kernel thread) or unreadable.
func command(proc string, pid int) string {
	if b, err := os.ReadFile(filepath.Join(proc, fmt.Sprint(pid), "cmdline")); err == nil && len(b) > 0 {
		return clip(strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")))
	}
	if b, err := os.ReadFile(filepath.Join(proc, fmt.Sprint(pid), "comm")); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "unknown"
}

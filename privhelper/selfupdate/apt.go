package selfupdate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Package is the package raspi-mcp ships as.
const Package = "raspi-mcp"

// KeepDir is where the previous version's package file is kept when apt's
// cache no longer has it.
const KeepDir = "/var/cache/raspi-mcp"

// Runner runs one program and returns its combined output. Apt's default
// runs it for real; tests record the calls.
type Runner func(ctx context.Context, dir string, env []string, prog string, args ...string) ([]byte, error)

// Apt is the package manager on a device: apt-cache and dpkg-query to read
// (they work inside the helper's read-only sandbox), apt-get to change
// (only in the updater's transient unit, outside it).
type Apt struct {
	Run      Runner // nil: exec
	KeepDir  string // "": KeepDir
	Archives string // apt's package cache; "": /var/cache/apt/archives
}

func (a Apt) run(ctx context.Context, dir string, env []string, prog string, args ...string) ([]byte, error) {
	if a.Run != nil {
		return a.Run(ctx, dir, env, prog, args...)
	}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, tail(out))
	}
	return out, nil
}

// tail is the end of a program's output, where apt and dpkg say what went wrong.
func tail(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) > 600 {
		out = append([]byte("…"), out[len(out)-600:]...)
	}
	return string(out)
}

// Installed implements Packages and Catalog.
func (a Apt) Installed(ctx context.Context) (string, error) {
	out, err := a.run(ctx, "/", nil, "dpkg-query", "-W", "-f=${db:Status-Abbrev}${Version}", Package)
	if err != nil {
		// dpkg-query exits 1 for a package it does not know.
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return "", nil
		}
		return "", fmt.Errorf("selfupdate: %w", err)
	}
	s := string(out)
	// "ii " is installed; anything else (rc, half-installed) is not a
	// version one can go back to.
	if !strings.HasPrefix(s, "ii ") {
		return "", nil
	}
	return strings.TrimSpace(s[3:]), nil
}

// Available implements Catalog: every version apt knows in a suite named
// like a channel, with its download size.
func (a Apt) Available(ctx context.Context) ([]Candidate, error) {
	pol, err := a.run(ctx, "/", nil, "apt-cache", "policy", Package)
	if err != nil {
		return nil, fmt.Errorf("selfupdate: %w", err)
	}
	cands := ParsePolicy(pol)
	show, err := a.run(ctx, "/", nil, "apt-cache", "show", Package)
	if err == nil {
		sizes := ParseShowSizes(show)
		for i := range cands {
			cands[i].Size = sizes[cands[i].Version]
		}
	}
	return cands, nil
}

// ParsePolicy reads apt-cache policy's version table: each version and the
// suites offering it ("500 file:/srv/repo stable/main arm64 Packages").
// Suites that are no channel (a distribution's own, dpkg's status) are
// left out.
func ParsePolicy(out []byte) []Candidate {
	var cands []Candidate
	inTable, version := false, ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "Version table:" {
			inTable = true
			continue
		}
		f := strings.Fields(line)
		if !inTable || len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "***" && len(f) >= 2:
			version = f[1]
		case len(f) == 2:
			version = f[0]
		case len(f) >= 5 && f[len(f)-1] == "Packages" && version != "":
			suite, _, _ := strings.Cut(f[2], "/")
			for _, ch := range []string{"stable", "beta"} {
				if suite == ch && ValidVersion(version) == nil {
					cands = append(cands, Candidate{Version: version, Channel: ch})
				}
			}
		}
	}
	return cands
}

// ParseShowSizes reads the Size of each version apt-cache show lists.
func ParseShowSizes(out []byte) map[string]int64 {
	sizes := map[string]int64{}
	version := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		switch {
		case !ok:
			if strings.TrimSpace(sc.Text()) == "" {
				version = ""
			}
		case k == "Version":
			version = v
		case k == "Size" && version != "":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				sizes[version] = n
			}
		}
	}
	return sizes
}

// debName is the file name apt gives version's package, up to the
// architecture: an epoch's ':' becomes %3a.
func debName(version string) string {
	return Package + "_" + strings.ReplaceAll(version, ":", "%3a") + "_"
}

func (a Apt) keepDir() string {
	if a.KeepDir != "" {
		return a.KeepDir
	}
	return KeepDir
}

func (a Apt) archives() string {
	if a.Archives != "" {
		return a.Archives
	}
	return "/var/cache/apt/archives"
}

// Keep implements Packages: the package file from KeepDir, else copied
// from apt's cache, else downloaded again from the repository.
func (a Apt) Keep(ctx context.Context, version string) (string, error) {
	if err := ValidVersion(version); err != nil {
		return "", err
	}
	dir := a.keepDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("selfupdate: %w", err)
	}
	if p := find(dir, version); p != "" {
		return p, nil
	}
	if p := find(a.archives(), version); p != "" {
		dst := filepath.Join(dir, filepath.Base(p))
		if err := copyFile(p, dst); err != nil {
			return "", err
		}
		return dst, nil
	}
	if _, err := a.run(ctx, dir, nil, "apt-get", "download", "-q", Package+"="+version); err != nil {
		return "", fmt.Errorf("selfupdate: %w", err)
	}
	if p := find(dir, version); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("selfupdate: apt-get download left no %s*.deb in %s", debName(version), dir)
}

func find(dir, version string) string {
	m, _ := filepath.Glob(filepath.Join(dir, debName(version)+"*.deb"))
	if len(m) == 0 {
		return ""
	}
	return m[0]
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("selfupdate: %w", err)
	}
	defer in.Close()
	tmp := dst + ".part"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("selfupdate: %w", err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("selfupdate: keeping %s: %w", src, err)
	}
	return nil
}

// aptEnv: no question may be asked, and a changed config file is kept as
// the owner left it (the Debian-safe answer).
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none"}

func aptInstall(target string) []string {
	return []string{"install", "-y", "-q", "--allow-downgrades", "--no-install-recommends",
		"-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold", target}
}

// Install implements Packages.
func (a Apt) Install(ctx context.Context, version string) error {
	if err := ValidVersion(version); err != nil {
		return err
	}
	if _, err := a.run(ctx, "/", aptEnv, "apt-get", aptInstall(Package+"="+version)...); err != nil {
		return fmt.Errorf("selfupdate: %w", err)
	}
	return nil
}

// Reinstall implements Packages: apt installs a local file given by its
// absolute path, with its dependencies, even when it is older.
func (a Apt) Reinstall(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) || !strings.HasSuffix(path, ".deb") || !strings.HasPrefix(filepath.Base(path), Package+"_") {
		return fmt.Errorf("selfupdate: %q is not a kept raspi-mcp package file", path)
	}
	if _, err := a.run(ctx, "/", aptEnv, "apt-get", aptInstall(path)...); err != nil {
		return fmt.Errorf("selfupdate: %w", err)
	}
	return nil
}

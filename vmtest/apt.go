package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// privateApt is an apt configuration of our own under the cache directory:
// its own sources.list, package lists and (empty) dpkg status. It lets us ask
// trixie-backports for the current kernel with apt-get download without
// adding anything to the host's sources, which on a bookworm host would
// otherwise offer trixie packages to every apt-get install.
type privateApt struct {
	dir    string
	log    io.Writer
	arches []string // APT::Architectures; amd64 when empty
}

func newPrivateApt(dir, mirror, suite string, log io.Writer) (*privateApt, error) {
	return newPrivateAptFor(dir, mirror, []string{suite}, nil, log)
}

// newPrivateAptFor is newPrivateApt for several suites of one mirror and
// foreign architectures (the emulated Pis' armel and arm64 packages).
func newPrivateAptFor(dir, mirror string, suites, arches []string, log io.Writer) (*privateApt, error) {
	for _, d := range []string{"etc", "lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	var src strings.Builder
	for _, suite := range suites {
		fmt.Fprintf(&src, "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n", mirror, suite)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/sources.list"), []byte(src.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), nil, 0o644); err != nil {
		return nil, err
	}
	return &privateApt{dir: dir, log: log, arches: arches}, nil
}

func (a *privateApt) opts() []string {
	arches := "amd64"
	if len(a.arches) > 0 {
		arches = strings.Join(a.arches, ",")
	}
	return []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(a.dir, "etc/sources.list"),
		"-o", "Dir::Etc::SourceParts=/nonexistent",
		"-o", "Dir::Etc::PreferencesParts=/nonexistent",
		"-o", "Dir::State::Lists=" + filepath.Join(a.dir, "lists"),
		"-o", "Dir::State::Status=" + filepath.Join(a.dir, "status"),
		"-o", "Dir::Cache=" + filepath.Join(a.dir, "cache"),
		"-o", "APT::Architecture=amd64",
		"-o", "APT::Architectures=" + arches,
		"-o", "APT::Sandbox::User=root",
		"-o", "Debug::NoLocking=1",
		"-q",
	}
}

func (a *privateApt) update(ctx context.Context) error {
	return run(ctx, a.log, "", "apt-get", append(a.opts(), "update")...)
}

// show returns the Version and Depends fields of the candidate of pkg.
func (a *privateApt) show(ctx context.Context, pkg string) (version string, depends []string, err error) {
	out, err := output(ctx, a.log, "", "apt-cache", append(a.opts(), "show", "--no-all-versions", pkg)...)
	if err != nil {
		return "", nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Version: "); ok {
			version = v
		}
		if d, ok := strings.CutPrefix(line, "Depends: "); ok {
			for _, alt := range strings.Split(d, ",") {
				// "a (= 1) | b" -> "a": kernel dependencies we care about
				// are never alternatives.
				name := strings.Fields(strings.TrimSpace(strings.Split(alt, "|")[0]))
				if len(name) > 0 {
					depends = append(depends, name[0])
				}
			}
		}
	}
	if version == "" {
		return "", nil, fmt.Errorf("apt-cache show %s: no Version field", pkg)
	}
	return version, depends, nil
}

// kernelPackages is what resolveKernel found.
type kernelPackages struct {
	Release  string   // e.g. 7.3.4+deb13-amd64, the /lib/modules directory name
	Version  string   // Debian package version, e.g. 7.3.4-1~bpo13+1
	Packages []string // packages whose contents make up vmlinuz + modules
}

// kernelImageDep is a versioned kernel package among a metapackage's
// dependencies; its group is the release (the /lib/modules name).
var kernelImageDep = regexp.MustCompile(`^linux-image-(\d\S*)$`)

// resolveKernel follows the linux-image-FLAVOUR metapackage to the current
// versioned kernel. Since 7.x Debian splits the kernel into linux-binary-R
// (vmlinuz) and linux-modules-R with linux-image-R an empty metapackage;
// older kernels ship everything in linux-image-R. Both layouts are handled by
// taking linux-image-R plus any linux-binary-/linux-modules- dependency.
func (a *privateApt) resolveKernel(ctx context.Context, flavour string) (kernelPackages, error) {
	meta := "linux-image-" + flavour
	_, deps, err := a.show(ctx, meta)
	if err != nil {
		return kernelPackages{}, err
	}
	var image, release string
	for _, d := range deps {
		if m := kernelImageDep.FindStringSubmatch(d); m != nil {
			image, release = d, m[1]
		}
	}
	if image == "" {
		return kernelPackages{}, fmt.Errorf("%s depends on no versioned linux-image package (depends: %v)", meta, deps)
	}
	version, deps, err := a.show(ctx, image)
	if err != nil {
		return kernelPackages{}, err
	}
	kp := kernelPackages{Release: release, Version: version, Packages: []string{image}}
	for _, d := range deps {
		if strings.HasPrefix(d, "linux-binary-") || strings.HasPrefix(d, "linux-modules-") {
			kp.Packages = append(kp.Packages, d)
		}
	}
	return kp, nil
}

// download fetches packages into dir and returns the .deb paths.
func (a *privateApt) download(ctx context.Context, dir string, pkgs []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := run(ctx, a.log, dir, "apt-get", append(append(a.opts(), "download"), pkgs...)...); err != nil {
		return nil, err
	}
	debs, err := filepath.Glob(filepath.Join(dir, "*.deb"))
	if err != nil {
		return nil, err
	}
	if len(debs) < len(pkgs) {
		return nil, fmt.Errorf("apt-get download %v left only %d .deb files in %s", pkgs, len(debs), dir)
	}
	return debs, nil
}

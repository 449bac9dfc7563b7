package vmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// PiPackage is one Debian package the emulated Raspberry Pis are made of,
// pinned by version and by the SHA-256 of its .deb, so every machine boots
// the same QEMU, kernel and device tree and a changed download is an error,
// not a different test.
type PiPackage struct {
	Name, Arch, Version, SHA256 string
	// Suite is where the pin comes from, and where Fetch looks for its
	// successor once Debian has replaced it.
	Suite string
	// Meta, for a kernel, is the metapackage that names the current
	// kernel package (the ABI is in the name: linux-image-6.1.0-50-rpi).
	Meta string
}

func (p PiPackage) key() string { return p.Name + ":" + p.Arch }

// pinKey names one pin: a moved pin no longer finds the successor recorded
// for the old one.
func (p PiPackage) pinKey() string { return p.key() + "=" + p.Version }

// File is the name apt-get download gives the package's .deb.
func (p PiPackage) File() string {
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
}

// dir is where the cache unpacks it.
func (p PiPackage) dir() string {
	return fmt.Sprintf("%s_%s_%s", p.Name, strings.ReplaceAll(p.Version, ":", "_"), p.Arch)
}

// piSuites are where the pinned packages come from: QEMU 10.0 (raspi4b and a
// working BCM2835 I2C model) is only in bookworm-backports; bookworm's 7.2
// times out every I2C transfer.
var piSuites = []string{"bookworm", "bookworm-backports"}

// The pins. Debian keeps only the newest version of a package in a suite, so
// a pin stops resolving when Debian publishes a newer one (a point release
// replaces the kernel every few months). Fetch then takes the suite's
// current version, which apt checks against Debian's signed index, records
// its SHA-256 in the cache (successors.json) and says so on every run until
// the pin is moved: `vmtest pi pins` prints the versions to paste here. A
// stale pin so costs a warning, not a red CI on a clean machine.
const (
	piQEMUVersion   = "1:10.0.2+ds-2+deb13u1~bpo12+1"
	piKernelVersion = "6.1.176-1"
	piKernelABI     = "6.1.0-50"
)

// PiPackages returns the pinned packages, host tools first.
func PiPackages() []PiPackage {
	return []PiPackage{
		{"qemu-system-arm", "amd64", piQEMUVersion, "edebbab09db3882c48ef9c00049c7c6a2d76d195cb88d830baadd1fb705bbc66", "bookworm-backports", ""},
		{"qemu-system-gui", "amd64", piQEMUVersion, "6a2fb5aed9d93943c3038847912316da7f521f93b9f831a5bd4434dfe1e2eadc", "bookworm-backports", ""},
		{"qemu-system-modules-opengl", "amd64", piQEMUVersion, "1649429821d787acf8377eb52685390adabadad239f80acf7c7f40bf09536289", "bookworm-backports", ""},
		{"device-tree-compiler", "amd64", "1.6.1-4+b1", "f56fbb1e1da6545619dd2a17b7a85b2c4c674bd276d1b844e01a8b9901dd349d", "bookworm", ""},
		{"libfdt1", "amd64", "1.6.1-4+b1", "e7312b61267979a58ae1fa9e34746d077707560c955f6455d02a9ff0f8fa7995", "bookworm", ""},
		{"linux-image-" + piKernelABI + "-rpi", "armel", piKernelVersion, "b6646f99eb5809a17d5781054e009d5d4f2f532d5d03d9d30d7c6f87077b746b", "bookworm", "linux-image-rpi"},
		{"linux-image-" + piKernelABI + "-arm64", "arm64", piKernelVersion, "914f75b57a8e165d85fb910c3e2dcc7000a05a9fea3f42f90b26e8dd590d5f06", "bookworm", "linux-image-arm64"},
		{"busybox-static", "armel", "1:1.35.0-4+deb12u1+b1", "061813bf602fdec8f81f07afd196a0e1b8ab0223fbbe9d7b4e003ee44130a60f", "bookworm", ""},
		{"busybox-static", "arm64", "1:1.35.0-4+deb12u1+b1", "732c9135564fc71337e0e05fb4da4d11e6c28c1834bce3e405e575afef2a52f5", "bookworm", ""},
	}
}

func piPackage(name, arch string) PiPackage {
	for _, p := range PiPackages() {
		if p.Name == name && p.Arch == arch {
			return p
		}
	}
	panic("vmtest: no pinned package " + name + ":" + arch)
}

// PiCache holds the pinned packages, unpacked, and the boards' edited device
// trees. It lives outside the source tree (DefaultPiCacheDir).
type PiCache struct {
	Dir string
	Log io.Writer
	// using maps a pin's key to the package Fetch made ready for it: the
	// pin, or its successor when Debian no longer has the pin.
	using map[string]PiPackage
}

// DefaultPiCacheDir is $VMTEST_PI_CACHE, else .cache/pi at the module root
// (ignored by git, like .cache/vm).
func DefaultPiCacheDir() string {
	if d := os.Getenv("VMTEST_PI_CACHE"); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(DefaultCacheDir()), "pi")
}

// NewPiCache makes dir absolute (qemu gets the paths) and creates it.
func NewPiCache(dir string, log io.Writer) (*PiCache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("vmtest: pi cache directory: %w", err)
	}
	if log == nil {
		log = io.Discard
	}
	return &PiCache{Dir: abs, Log: log}, nil
}

func (c *PiCache) deb(p PiPackage) string { return filepath.Join(c.Dir, "debs", p.File()) }

// root is where the package ready for pin p is unpacked.
func (c *PiCache) root(p PiPackage) string {
	return filepath.Join(c.Dir, "pkg", c.use(p).dir())
}

// use returns the package Fetch made ready for pin p (p itself before Fetch).
func (c *PiCache) use(p PiPackage) PiPackage {
	if u, ok := c.using[p.key()]; ok {
		return u
	}
	return p
}

// fileSHA256 returns the hex SHA-256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Fetch makes every pinned package ready: downloaded once (with a private
// apt configuration: the host's sources never change), its SHA-256 checked
// and unpacked into its own directory. A pin Debian no longer has is
// replaced by its suite's current version (see the pins above) and said so.
// With everything cached it touches no network.
func (c *PiCache) Fetch(ctx context.Context) error {
	succ, err := c.loadSuccessors()
	if err != nil {
		return err
	}
	c.using = map[string]PiPackage{}
	var apt *privateApt
	for _, pin := range PiPackages() {
		p := pin
		if s, ok := succ[pin.pinKey()]; ok {
			p = s
		}
		if _, err := os.Stat(c.deb(p)); err != nil {
			if apt == nil {
				if apt, err = c.apt(ctx); err != nil {
					return err
				}
			}
			err := c.download(ctx, apt, p)
			if err != nil && p == pin {
				var s PiPackage
				if s, err = c.successor(ctx, apt, pin); err == nil {
					if err = c.download(ctx, apt, s); err == nil {
						// apt checked the .deb against the signed index;
						// the sum kept here makes later runs check it too.
						s.SHA256, err = fileSHA256(c.deb(s))
						p, succ[pin.pinKey()] = s, s
					}
				}
				if err == nil {
					err = c.saveSuccessors(succ)
				}
			}
			if err != nil {
				return fmt.Errorf("vmtest: fetching %s=%s: %w", p.key(), p.Version, err)
			}
		}
		if p != pin {
			fmt.Fprintf(c.Log, "vmtest pi: WARNING: Debian no longer has pinned %s=%s; using %s=%s from %s (move the pin: `vmtest pi pins`)\n",
				pin.key(), pin.Version, p.key(), p.Version, p.Suite)
		}
		sum, err := fileSHA256(c.deb(p))
		if err != nil {
			return err
		}
		if sum != p.SHA256 {
			os.Remove(c.deb(p))
			return fmt.Errorf("vmtest: %s has SHA-256 %s, expected %s; removed it", p.File(), sum, p.SHA256)
		}
		c.using[pin.key()] = p
		if err := c.unpack(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// apt is the private apt configuration over the pins' suites, updated.
func (c *PiCache) apt(ctx context.Context) (*privateApt, error) {
	mirror := hostMirror()
	if mirror == "" {
		return nil, errors.New("vmtest: no Debian mirror in the host's apt sources; set RASPI_MCP_DEBIAN_MIRROR")
	}
	apt, err := newPrivateAptFor(filepath.Join(c.Dir, "apt"), mirror, piSuites, []string{"amd64", "armel", "arm64"}, c.Log)
	if err != nil {
		return nil, err
	}
	return apt, apt.update(ctx)
}

// download fetches exactly p's version into the cache.
func (c *PiCache) download(ctx context.Context, apt *privateApt, p PiPackage) error {
	if err := os.MkdirAll(filepath.Join(c.Dir, "debs"), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.Dir, "debs"), "download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := apt.download(ctx, tmp, []string{p.key() + "=" + p.Version}); err != nil {
		return err
	}
	return os.Rename(filepath.Join(tmp, p.File()), c.deb(p))
}

// successor is what the mirror has now in place of pin: for a kernel, the
// package its metapackage depends on; else the same package. Its version is
// the one the pin's suite lists (a suite lists one).
func (c *PiCache) successor(ctx context.Context, apt *privateApt, pin PiPackage) (PiPackage, error) {
	s := pin
	if pin.Meta != "" {
		_, deps, err := apt.show(ctx, pin.Meta+":"+pin.Arch)
		if err != nil {
			return s, err
		}
		s.Name = ""
		for _, d := range deps {
			if kernelImageDep.MatchString(d) {
				s.Name = d
			}
		}
		if s.Name == "" {
			return s, fmt.Errorf("%s depends on no versioned kernel package (%v)", pin.Meta, deps)
		}
	}
	out, err := output(ctx, c.Log, "", "apt-cache", append(apt.opts(), "madison", s.key())...)
	if err != nil {
		return s, err
	}
	if s.Version = madisonVersion(string(out), pin.Suite); s.Version == "" {
		return s, fmt.Errorf("no %s in %s", s.key(), pin.Suite)
	}
	s.SHA256 = ""
	return s, nil
}

// madisonVersion picks from `apt-cache madison` the version listed in suite
// ("name | version | mirror suite/component arch Packages").
func madisonVersion(out, suite string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "|")
		if len(f) >= 3 && strings.Contains(f[2], " "+suite+"/") {
			return strings.TrimSpace(f[1])
		}
	}
	return ""
}

// successors.json keeps the successors Fetch chose, so later runs use and
// check the same packages without asking the mirror.
func (c *PiCache) successorsFile() string { return filepath.Join(c.Dir, "successors.json") }

func (c *PiCache) loadSuccessors() (map[string]PiPackage, error) {
	succ := map[string]PiPackage{}
	b, err := os.ReadFile(c.successorsFile())
	if errors.Is(err, os.ErrNotExist) {
		return succ, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &succ)
	}
	if err != nil {
		return nil, fmt.Errorf("vmtest: %s: %w (remove it to choose again)", c.successorsFile(), err)
	}
	return succ, nil
}

func (c *PiCache) saveSuccessors(succ map[string]PiPackage) error {
	b, err := json.MarshalIndent(succ, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.successorsFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.successorsFile())
}

// unpack extracts a verified .deb once; the marker file is written last, so
// an interrupted extraction is redone.
func (c *PiCache) unpack(ctx context.Context, p PiPackage) error {
	root := c.root(p)
	marker := filepath.Join(root, ".unpacked")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	os.RemoveAll(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := run(ctx, c.Log, "", "dpkg-deb", "-x", c.deb(p), root); err != nil {
		return err
	}
	if strings.HasPrefix(p.Name, "linux-image-") {
		// Debian's packages carry no modules.dep (the postinst runs
		// depmod): the initramfs needs it to load modules in order.
		release := strings.TrimPrefix(p.Name, "linux-image-")
		if err := run(ctx, c.Log, "", "depmod", "-b", root, release); err != nil {
			return err
		}
	}
	return os.WriteFile(marker, nil, 0o644)
}

// Pins prints, for each pinned package, the version the mirror has now and
// whether it matches the pin: what to do when Fetch says a pin is gone.
func (c *PiCache) Pins(ctx context.Context, w io.Writer) error {
	apt, err := c.apt(ctx)
	if err != nil {
		return err
	}
	var lines []string
	for _, p := range PiPackages() {
		out, err := output(ctx, c.Log, "", "apt-cache", append(apt.opts(), "madison", p.Name+":"+p.Arch)...)
		if err != nil {
			return err
		}
		have := "gone"
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Split(l, "|")
			if len(f) >= 2 && strings.TrimSpace(f[1]) == p.Version {
				have = "available"
			}
		}
		lines = append(lines, fmt.Sprintf("%s:%s pinned %s (%s); mirror has:\n%s", p.Name, p.Arch, p.Version, have, strings.TrimRight(string(out), "\n")))
	}
	sort.Strings(lines)
	_, err = fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

package vmtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
}

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
// a pin stops resolving when Debian publishes a newer one: Fetch then says
// so, and `vmtest pi pins` prints the current candidates to paste here.
const (
	piQEMUVersion   = "1:10.0.2+ds-2+deb13u1~bpo12+1"
	piKernelVersion = "6.1.176-1"
	piKernelABI     = "6.1.0-50"
)

// PiPackages returns the pinned packages, host tools first.
func PiPackages() []PiPackage {
	return []PiPackage{
		{"qemu-system-arm", "amd64", piQEMUVersion, "edebbab09db3882c48ef9c00049c7c6a2d76d195cb88d830baadd1fb705bbc66"},
		{"qemu-system-gui", "amd64", piQEMUVersion, "6a2fb5aed9d93943c3038847912316da7f521f93b9f831a5bd4434dfe1e2eadc"},
		{"qemu-system-modules-opengl", "amd64", piQEMUVersion, "1649429821d787acf8377eb52685390adabadad239f80acf7c7f40bf09536289"},
		{"device-tree-compiler", "amd64", "1.6.1-4+b1", "f56fbb1e1da6545619dd2a17b7a85b2c4c674bd276d1b844e01a8b9901dd349d"},
		{"libfdt1", "amd64", "1.6.1-4+b1", "e7312b61267979a58ae1fa9e34746d077707560c955f6455d02a9ff0f8fa7995"},
		{"linux-image-" + piKernelABI + "-rpi", "armel", piKernelVersion, "b6646f99eb5809a17d5781054e009d5d4f2f532d5d03d9d30d7c6f87077b746b"},
		{"linux-image-" + piKernelABI + "-arm64", "arm64", piKernelVersion, "914f75b57a8e165d85fb910c3e2dcc7000a05a9fea3f42f90b26e8dd590d5f06"},
		{"busybox-static", "armel", "1:1.35.0-4+deb12u1+b1", "061813bf602fdec8f81f07afd196a0e1b8ab0223fbbe9d7b4e003ee44130a60f"},
		{"busybox-static", "arm64", "1:1.35.0-4+deb12u1+b1", "732c9135564fc71337e0e05fb4da4d11e6c28c1834bce3e405e575afef2a52f5"},
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
func (c *PiCache) root(p PiPackage) string {
	return filepath.Join(c.Dir, "pkg", p.dir())
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

// Fetch downloads the pinned packages that are not cached yet (with a private
// apt configuration: the host's sources never change), checks every .deb's
// SHA-256 and unpacks each into its own directory. With everything cached it
// touches no network.
func (c *PiCache) Fetch(ctx context.Context) error {
	var missing []PiPackage
	for _, p := range PiPackages() {
		if _, err := os.Stat(c.deb(p)); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		mirror := hostMirror()
		if mirror == "" {
			return errors.New("vmtest: no Debian mirror in the host's apt sources; set RASPI_MCP_DEBIAN_MIRROR")
		}
		apt, err := newPrivateAptFor(filepath.Join(c.Dir, "apt"), mirror, piSuites, []string{"amd64", "armel", "arm64"}, c.Log)
		if err != nil {
			return err
		}
		if err := apt.update(ctx); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(c.Dir, "debs"), 0o755); err != nil {
			return err
		}
		for _, p := range missing {
			tmp, err := os.MkdirTemp(filepath.Join(c.Dir, "debs"), "download-")
			if err != nil {
				return err
			}
			spec := fmt.Sprintf("%s:%s=%s", p.Name, p.Arch, p.Version)
			err = run(ctx, c.Log, tmp, "apt-get", append(apt.opts(), "download", spec)...)
			if err == nil {
				err = os.Rename(filepath.Join(tmp, p.File()), c.deb(p))
			}
			os.RemoveAll(tmp)
			if err != nil {
				return fmt.Errorf("vmtest: fetching pinned %s (Debian may have replaced it: `vmtest pi pins` shows the current versions): %w", spec, err)
			}
		}
	}
	for _, p := range PiPackages() {
		sum, err := fileSHA256(c.deb(p))
		if err != nil {
			return err
		}
		if sum != p.SHA256 {
			os.Remove(c.deb(p))
			return fmt.Errorf("vmtest: %s has SHA-256 %s, pinned %s; removed it", p.File(), sum, p.SHA256)
		}
		if err := c.unpack(ctx, p); err != nil {
			return err
		}
	}
	return nil
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
	mirror := hostMirror()
	if mirror == "" {
		return errors.New("vmtest: no Debian mirror in the host's apt sources; set RASPI_MCP_DEBIAN_MIRROR")
	}
	apt, err := newPrivateAptFor(filepath.Join(c.Dir, "apt"), mirror, piSuites, []string{"amd64", "armel", "arm64"}, c.Log)
	if err != nil {
		return err
	}
	if err := apt.update(ctx); err != nil {
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

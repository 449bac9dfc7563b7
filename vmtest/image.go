package vmtest

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// guestFiles are the scripts and units baked into the image (and the
// initramfs /init). They are part of the image hash, so editing one rebuilds.
//
//go:embed guest
var guestFiles embed.FS

// recipeRevision is bumped when the build code changes what it produces in a
// way the Recipe fields and guest files do not show.
const recipeRevision = "1"

// Recipe is what a base image is built from. Its hash names the cached
// image, so two checkouts with the same recipe share nothing but agree.
type Recipe struct {
	Suite    string   // Debian suite of the root file system
	Mirror   string   // Debian mirror for debootstrap and the kernel
	Packages []string // debootstrap --include on top of minbase

	KernelSuite   string // where the kernel comes from
	KernelFlavour string // linux-image-FLAVOUR metapackage

	// PruneModules are directories under /lib/modules/R/kernel dropped from
	// the image: hardware a qemu guest never has. Halves the module tree.
	PruneModules []string

	FreeMB int // free space left on the root file system
}

// DefaultRecipe is the raspi-mcp test image: trixie's libgpiod v2 tools work
// with the 7.x kernel's GPIO v2-only uAPI (bookworm's 1.6 tools fail with
// EINVAL), and trixie-backports carries the 7.x kernel with gpio-sim.
func DefaultRecipe() Recipe {
	return Recipe{
		Suite:  "trixie",
		Mirror: hostMirror(),
		Packages: []string{
			"systemd-sysv", "dbus", "udev", "kmod", "gpiod", "i2c-tools",
			"iproute2", "openssh-server", "procps", "ca-certificates",
			// Raspberry Pi OS has sudo (the first user may use it without a password).
			"sudo",
		},
		KernelSuite:   "trixie-backports",
		KernelFlavour: "amd64",
		PruneModules: []string{
			"sound", "drivers/gpu", "drivers/media", "drivers/infiniband",
			"drivers/net/wireless", "drivers/net/ethernet", "drivers/staging",
			"drivers/bluetooth", "drivers/isdn", "drivers/hid", "drivers/usb", "drivers/scsi", "drivers/ata",
			"drivers/md", "drivers/nvme", "drivers/net/can", "drivers/mmc",
			"net/bluetooth", "net/wireless", "net/mac80211",
		},
		FreeMB: 512,
	}
}

func (r Recipe) rootfsKey() string {
	pkgs := append([]string(nil), r.Packages...)
	sort.Strings(pkgs)
	h := sha256.New()
	fmt.Fprintf(h, "rootfs %s\n%s\n%s\n%s\n", recipeRevision, r.Suite, r.Mirror, strings.Join(pkgs, ","))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (r Recipe) imageKey() (string, error) {
	h := sha256.New()
	prune := append([]string(nil), r.PruneModules...)
	sort.Strings(prune)
	fmt.Fprintf(h, "image %s\n%s\n%s %s\n%s\n%d\n", recipeRevision, r.rootfsKey(),
		r.KernelSuite, r.KernelFlavour, strings.Join(prune, ","), r.FreeMB)
	err := fs.WalkDir(guestFiles, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := guestFiles.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Cache is a directory of built images, probe results and run scratch space.
type Cache struct {
	Dir string
	Log io.Writer // progress messages (commands run, timings); never the guest's output
}

// NewCache makes dir (absolute, because qemu and chroot'd tools get the
// paths) and returns a Cache logging to log, or nowhere if log is nil.
func NewCache(dir string, log io.Writer) (*Cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	if log == nil {
		log = io.Discard
	}
	return &Cache{Dir: abs, Log: log}, nil
}

// DefaultCacheDir is $VMTEST_CACHE, or .cache/vm at the root of the
// enclosing Go module (gitignored there), so `go test ./vmtest` and
// `go run ./vmtest/cmd/vmtest` share one cache whatever directory they run in.
func DefaultCacheDir() string {
	if d := os.Getenv("VMTEST_CACHE"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return filepath.Join(".cache", "vm")
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".cache", "vm")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(wd, ".cache", "vm")
		}
	}
}

// lock takes the cache lock: exclusive while building (which replaces and
// prunes images), shared while a VM runs from an image.
func (c *Cache) lock(exclusive bool) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) == nil {
		return func() { f.Close() }, nil
	}
	if exclusive {
		fmt.Fprintf(c.Log, "vmtest: waiting for VMs using %s to finish before building\n", c.Dir)
	} else {
		fmt.Fprintf(c.Log, "vmtest: waiting for the image build in %s to finish\n", c.Dir)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// Image is a built base image.
type Image struct {
	Dir      string
	Manifest Manifest
}

// Manifest records what went into an image and what it cost.
type Manifest struct {
	Key           string    `json:"key"`
	Suite         string    `json:"suite"`
	KernelRelease string    `json:"kernel_release"`
	KernelVersion string    `json:"kernel_version"`
	Packages      []string  `json:"packages"`
	BuiltAt       time.Time `json:"built_at"`
	BuildSeconds  float64   `json:"build_seconds"`
	RootfsCached  bool      `json:"rootfs_cached"` // debootstrap skipped: restored from rootfs-*.tar.zst
	DiskBytes     int64     `json:"disk_bytes"`    // apparent size of disk.raw
}

func (im *Image) Kernel() string { return filepath.Join(im.Dir, "vmlinuz") }
func (im *Image) Initrd() string { return filepath.Join(im.Dir, "initrd.img") }
func (im *Image) Disk() string   { return filepath.Join(im.Dir, "disk.raw") }

func loadImage(dir string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	im := &Image{Dir: dir}
	if err := json.Unmarshal(b, &im.Manifest); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %w", dir, err)
	}
	for _, p := range []string{im.Kernel(), im.Initrd(), im.Disk()} {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	return im, nil
}

// Image returns the cached image for r, building it first if it is missing
// or rebuild is set.
func (c *Cache) Image(ctx context.Context, r Recipe, rebuild bool) (*Image, error) {
	if r.Mirror == "" {
		return nil, errors.New("vmtest: no Debian mirror: this machine's apt has no deb source in /etc/apt; set RASPI_MCP_DEBIAN_MIRROR to a Debian archive URL")
	}
	key, err := r.imageKey()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.Dir, "image-"+key)
	if !rebuild {
		if im, err := loadImage(dir); err == nil {
			return im, nil
		}
	}
	unlock, err := c.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !rebuild {
		if im, err := loadImage(dir); err == nil { // built while we waited
			return im, nil
		}
	}
	return c.build(ctx, r, key, dir)
}

func (c *Cache) build(ctx context.Context, r Recipe, key, dir string) (*Image, error) {
	start := time.Now()
	fmt.Fprintf(c.Log, "vmtest: building image %s in %s\n", key, c.Dir)
	work := filepath.Join(c.Dir, "build")
	if err := os.RemoveAll(work); err != nil {
		return nil, fmt.Errorf("removing leftover build directory: %w", err)
	}
	root := filepath.Join(work, "root")
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The kernel download and debootstrap are independent: overlap them.
	type kernelResult struct {
		kp   kernelPackages
		debs []string
		err  error
	}
	kch := make(chan kernelResult, 1)
	go func() {
		var kr kernelResult
		apt, err := newPrivateApt(filepath.Join(c.Dir, "apt"), r.Mirror, r.KernelSuite, c.Log)
		if err == nil {
			err = apt.update(ctx)
		}
		if err == nil {
			kr.kp, err = apt.resolveKernel(ctx, r.KernelFlavour)
		}
		if err == nil {
			kr.debs, err = apt.download(ctx, filepath.Join(work, "kernel"), kr.kp.Packages)
		}
		if err != nil {
			kr.err = fmt.Errorf("kernel from %s: %w", r.KernelSuite, err)
			cancel()
		}
		kch <- kr
	}()
	cached, rootErr := c.rootfs(ctx, r, root)
	if rootErr != nil {
		cancel()
	}
	kr := <-kch
	if rootErr != nil {
		return nil, rootErr
	}
	if kr.err != nil {
		return nil, kr.err
	}
	fmt.Fprintf(c.Log, "vmtest: kernel %s (%s), root file system ready after %s\n",
		kr.kp.Release, kr.kp.Version, time.Since(start).Round(time.Second))

	if err := installKernel(ctx, c.Log, root, kr.kp.Release, kr.debs, r.PruneModules, out); err != nil {
		return nil, err
	}
	if err := customize(root); err != nil {
		return nil, fmt.Errorf("customizing the root file system: %w", err)
	}
	if err := checkStatic("/bin/busybox"); err != nil {
		return nil, err
	}
	initScript, err := guestFiles.ReadFile("guest/init")
	if err != nil {
		return nil, err
	}
	modDir := filepath.Join(root, "usr/lib/modules", kr.kp.Release)
	if err := buildInitramfs(ctx, filepath.Join(out, "initrd.img"), modDir, "/bin/busybox", initScript); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	diskBytes, err := makeDisk(ctx, c.Log, root, filepath.Join(out, "disk.raw"), r.FreeMB)
	if err != nil {
		return nil, err
	}

	m := Manifest{
		Key: key, Suite: r.Suite, KernelRelease: kr.kp.Release, KernelVersion: kr.kp.Version,
		Packages: r.Packages, BuiltAt: time.Now().UTC(), BuildSeconds: time.Since(start).Seconds(),
		RootfsCached: cached, DiskBytes: diskBytes,
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Rename(out, dir); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	c.prune(key, r.rootfsKey())
	fmt.Fprintf(c.Log, "vmtest: image %s built in %s\n", key, time.Since(start).Round(100*time.Millisecond))
	return loadImage(dir)
}

// rootfs fills root with the debootstrapped system, from the cached tarball
// when there is one. It reports whether the tarball was used.
func (c *Cache) rootfs(ctx context.Context, r Recipe, root string) (bool, error) {
	tarball := filepath.Join(c.Dir, "rootfs-"+r.rootfsKey()+".tar.zst")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return false, err
	}
	if _, err := os.Stat(tarball); err == nil {
		err := run(ctx, c.Log, "", "tar", "--zstd", "--numeric-owner", "-xpf", tarball, "-C", root)
		if err == nil {
			return true, nil
		}
		fmt.Fprintf(c.Log, "vmtest: cached root file system unusable, bootstrapping again: %v\n", err)
		os.Remove(tarball)
		if err := os.RemoveAll(root); err != nil {
			return false, err
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			return false, err
		}
	}
	if err := run(ctx, c.Log, "", "debootstrap", "--variant=minbase", "--components=main",
		"--include="+strings.Join(r.Packages, ","), r.Suite, root, r.Mirror); err != nil {
		return false, fmt.Errorf("debootstrap %s: %w", r.Suite, err)
	}
	if err := stripRootfs(root); err != nil {
		return false, err
	}
	tmp := tarball + ".tmp"
	if err := run(ctx, c.Log, "", "tar", "-I", "zstd -T0 -3", "--numeric-owner", "-cf", tmp, "-C", root, "."); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("saving the root file system: %w", err)
	}
	return false, os.Rename(tmp, tarball)
}

// stripRootfs drops what a test VM never reads: the apt package and list
// caches, documentation and translations. About 170 MB of 360.
func stripRootfs(root string) error {
	globs := []string{
		"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*",
		"usr/share/doc/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*",
	}
	for _, g := range globs {
		matches, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if filepath.Base(m) == "locale.alias" {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// installKernel unpacks the kernel packages into root (dpkg-deb -x: their
// maintainer scripts would want an initramfs generator we do not use), drops
// the pruned module directories, runs the guest's own depmod and moves
// vmlinuz out to outDir, since the guest boots it with -kernel.
func installKernel(ctx context.Context, log io.Writer, root, release string, debs, prune []string, outDir string) error {
	for _, deb := range debs {
		if err := run(ctx, log, "", "dpkg-deb", "-x", deb, root); err != nil {
			return fmt.Errorf("unpacking kernel package: %w", err)
		}
	}
	modDir := filepath.Join(root, "usr/lib/modules", release)
	for _, p := range prune {
		if err := os.RemoveAll(filepath.Join(modDir, "kernel", p)); err != nil {
			return err
		}
	}
	if err := run(ctx, log, "", "chroot", root, "depmod", "-a", release); err != nil {
		return fmt.Errorf("depmod for %s: %w", release, err)
	}
	var vmlinuz string
	for _, p := range []string{filepath.Join(modDir, "vmlinuz"), filepath.Join(root, "boot", "vmlinuz-"+release)} {
		if _, err := os.Stat(p); err == nil {
			vmlinuz = p
			break
		}
	}
	if vmlinuz == "" {
		return fmt.Errorf("kernel packages %v contain no vmlinuz for %s", debs, release)
	}
	if err := copyFile(vmlinuz, filepath.Join(outDir, "vmlinuz")); err != nil {
		return err
	}
	return os.Remove(vmlinuz)
}

// customize installs the guest files and the small configuration a
// throw-away test VM wants.
func customize(root string) error {
	files := map[string]string{ // embedded name -> path in the guest
		"guest/vmtest-runner":          "usr/local/sbin/vmtest-runner",
		"guest/vm-gpio-sim":            "usr/local/sbin/vm-gpio-sim",
		"guest/vm-i2c-stub":            "usr/local/sbin/vm-i2c-stub",
		"guest/vmtest.service":         "etc/systemd/system/vmtest.service",
		"guest/vmtest-devices.service": "etc/systemd/system/vmtest-devices.service",
	}
	for src, dst := range files {
		b, err := guestFiles.ReadFile(src)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(dst, "usr/local/sbin/") {
			mode = 0o755
		}
		if err := writeFile(filepath.Join(root, dst), b, mode); err != nil {
			return err
		}
	}
	text := map[string]string{
		"etc/fstab":    "/dev/vda / ext4 rw,noatime 0 0\n",
		"etc/hostname": "raspi-vm\n",
		"etc/hosts":    "127.0.0.1 localhost\n127.0.1.1 raspi-vm\n::1 localhost ip6-localhost ip6-loopback\n",
		// The journal only needs to live as long as the VM.
		"etc/systemd/journald.conf.d/vmtest.conf": "[Journal]\nStorage=volatile\n",
		// Drivers udev would load for qemu's emulated PC (and, since -cpu max
		// offers SVM, kvm): seconds of TCG time for nothing.
		"etc/modprobe.d/vmtest-blacklist.conf": "# vmtest: hardware a test VM does not use\n" +
			"blacklist kvm\nblacklist kvm_amd\nblacklist kvm_intel\nblacklist ccp\nblacklist floppy\n" +
			"blacklist pcspkr\nblacklist serio_raw\nblacklist vmw_vmci\nblacklist vmw_vsock_vmci_transport\n" +
			"blacklist vsock_loopback\nblacklist qemu_fw_cfg\n",
		// Loaded by systemd-modules-load in-process, before the helpers run.
		"etc/modules-load.d/vmtest.conf": "configfs\ngpio-sim\ni2c-dev\ni2c-stub\n",
		"etc/modprobe.d/vmtest.conf":     "options i2c-stub chip_addr=0x48,0x76\n",
		// sshd only when a port is forwarded (vmtest.ssh on the kernel command line).
		"etc/systemd/system/ssh.service.d/vmtest.conf": "[Unit]\nConditionKernelCommandLine=vmtest.ssh\n",
		// ConditionNeedsUpdate= units (ldconfig, catalog and hwdb updates)
		// would otherwise run on every boot of a freshly built image.
		"etc/.updated": "",
		"var/.updated": "",
	}
	for p, s := range text {
		if err := writeFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			return err
		}
	}
	links := map[string]string{
		"etc/systemd/system/default.target":                                 "/usr/lib/systemd/system/multi-user.target",
		"etc/systemd/system/multi-user.target.wants/vmtest.service":         "/etc/systemd/system/vmtest.service",
		"etc/systemd/system/multi-user.target.wants/vmtest-devices.service": "/etc/systemd/system/vmtest-devices.service",
	}
	// The ssh generator fails without AF_VSOCK and would mark boot degraded.
	links["etc/systemd/system-generators/systemd-ssh-generator"] = "/dev/null"
	// Periodic maintenance and a VGA login prompt only cost boot time here.
	for _, u := range []string{
		"apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "fstrim.timer",
		"e2scrub_all.timer", "e2scrub_reap.service", "getty@tty1.service", "systemd-pstore.service",
	} {
		links["etc/systemd/system/"+u] = "/dev/null"
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		os.Remove(full)
		if err := os.Symlink(target, full); err != nil {
			return err
		}
	}
	return nil
}

// makeDisk writes root into a sparse ext4 image with mkfs.ext4 -d, which
// needs neither loop devices nor mounts. Returns the image's size.
func makeDisk(ctx context.Context, log io.Writer, root, path string, freeMB int) (int64, error) {
	var used int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		used += (info.Size()+4095)/4096*4096 + 256 // data blocks + inode
		return nil
	})
	if err != nil {
		return 0, err
	}
	size := (used*6/5 + int64(freeMB)<<20 + 1<<20 - 1) &^ (1<<20 - 1)
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := run(ctx, log, "", "mkfs.ext4", "-q", "-F", "-L", "vmtest-root", "-m", "0", "-d", root, path); err != nil {
		return 0, fmt.Errorf("making the disk image: %w", err)
	}
	return size, nil
}

// checkStatic makes sure the initramfs busybox will run with no libraries:
// the dynamic busybox package installs the same path.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("initramfs needs a static busybox (apt-get install busybox-static): %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New(path + " is dynamically linked; the initramfs needs busybox-static")
		}
	}
	return nil
}

// prune removes images and root file system tarballs of other recipes so the
// cache does not grow with every recipe change. Called under the exclusive
// lock, so no VM is using them.
func (c *Cache) prune(imageKey, rootfsKey string) {
	keep := map[string]bool{"image-" + imageKey: true, "rootfs-" + rootfsKey + ".tar.zst": true}
	for _, g := range []string{"image-*", "rootfs-*.tar.zst"} {
		matches, _ := filepath.Glob(filepath.Join(c.Dir, g))
		for _, m := range matches {
			if !keep[filepath.Base(m)] {
				fmt.Fprintf(c.Log, "vmtest: removing old %s\n", filepath.Base(m))
				os.RemoveAll(m)
			}
		}
	}
}

func writeFile(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, mode)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hostMirror is the Debian archive this machine's own apt uses (deb822
// "URIs:" or one-line "deb URI" entries), so the VM image comes from the same
// place as every other package here; RASPI_MCP_DEBIAN_MIRROR overrides it.
// Security archives are skipped: they do not carry the base suite.
func hostMirror() string {
	if m := os.Getenv("RASPI_MCP_DEBIAN_MIRROR"); m != "" {
		return m
	}
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	sources, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	for _, f := range append(append([]string{"/etc/apt/sources.list"}, sources...), lists...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			var uri string
			switch {
			case len(f) >= 2 && f[0] == "URIs:":
				uri = f[1]
			case len(f) >= 3 && f[0] == "deb" && !strings.HasPrefix(f[1], "["):
				uri = f[1]
			}
			if uri != "" && !strings.Contains(uri, "security") {
				return strings.TrimSuffix(uri, "/")
			}
		}
	}
	return "" // Image says what to do
}

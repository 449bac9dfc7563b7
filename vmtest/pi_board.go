package vmtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// PiBoard is one emulated Raspberry Pi: the QEMU machine, the Debian kernel
// and device tree that boot on it, and where its GPIO block sits in the
// physical address space (what the monitor's xp reads).
type PiBoard struct {
	Name     string // QEMU machine and the board's name in `vmtest pi`
	qemu     string // qemu-system-arm or qemu-system-aarch64
	kernel   PiPackage
	busybox  PiPackage
	dtb      string // under usr/lib/linux-image-RELEASE/
	GPIOBase uint64
	GoArch   string // GOARCH/GOARM of the binaries it runs: "armv6" or "arm64"
	modules  []initramfsModule
	edit     func(ctx context.Context, f *fdt) error
	qemuArgs []string // the board's own QEMU options
}

// piModules are loaded by the guest's init when they are modules (Debian's
// armel rpi kernel builds most of them in, the arm64 one does not).
func piModules() []initramfsModule {
	return []initramfsModule{
		{"i2c_dev", false},
		{"i2c_bcm2835", true},
		{"bcm2835_thermal", true},
		{"bcm2711_thermal", true},
		{"raspberrypi_hwmon", true},
	}
}

// PiBoards returns the boards `make test-pi` knows, in the order it runs them.
func PiBoards() []PiBoard {
	armel := piPackage("linux-image-"+piKernelABI+"-rpi", "armel")
	arm64 := piPackage("linux-image-"+piKernelABI+"-arm64", "arm64")
	return []PiBoard{
		{
			Name: "raspi0", qemu: "qemu-system-arm", kernel: armel, busybox: piPackage("busybox-static", "armel"),
			dtb: "bcm2835-rpi-zero.dtb", GPIOBase: 0x20200000, GoArch: "armv6", modules: piModules(), edit: dropASB,
			// The Pi Zero's only clock event is the BCM2835 system timer:
			// Linux sets a compare register to the counter plus a few
			// microseconds, and QEMU's model fires at an exact match only.
			// On real time, a host that pauses the guest between the
			// counter's read and the compare's write puts the match in the
			// past: no tick for 71 minutes (the counter wraps), and the
			// guest idles in cpu_v6_do_idle for good (3 boots in 4 on a
			// busy day). Counting time in instructions closes that window.
			qemuArgs: []string{"-icount", "shift=auto"},
		},
		{
			Name: "raspi3b", qemu: "qemu-system-aarch64", kernel: arm64, busybox: piPackage("busybox-static", "arm64"),
			dtb: "broadcom/bcm2837-rpi-3-b.dtb", GPIOBase: 0x3F200000, GoArch: "arm64", modules: piModules(), edit: raspi3bEdits,
		},
		{
			Name: "raspi4b", qemu: "qemu-system-aarch64", kernel: arm64, busybox: piPackage("busybox-static", "arm64"),
			dtb: "broadcom/bcm2711-rpi-4-b.dtb", GPIOBase: 0xFE200000, GoArch: "arm64", modules: piModules(), edit: raspi4bEdits,
		},
	}
}

// PiBoardNamed returns the board called name.
func PiBoardNamed(name string) (PiBoard, error) {
	var names []string
	for _, b := range PiBoards() {
		if b.Name == name {
			return b, nil
		}
		names = append(names, b.Name)
	}
	return PiBoard{}, fmt.Errorf("vmtest: no emulated board %q (have %s)", name, strings.Join(names, ", "))
}

// fdt edits a device tree blob with the pinned fdtput/fdtget.
type fdt struct {
	c    *PiCache
	path string
}

func (f *fdt) tool(ctx context.Context, name string, args ...string) (string, error) {
	bin := filepath.Join(f.c.root(piPackage("device-tree-compiler", "amd64")), "usr/bin", name)
	lib := filepath.Join(f.c.root(piPackage("libfdt1", "amd64")), "usr/lib/x86_64-linux-gnu")
	out, err := output(ctx, f.c.Log, "", "env", append([]string{"LD_LIBRARY_PATH=" + lib, bin, f.path}, args...)...)
	return strings.TrimSpace(string(out)), err
}

func (f *fdt) subnodes(ctx context.Context, node string) ([]string, error) {
	out, err := f.tool(ctx, "fdtget", "-l", node)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// dropASB keeps only the PM register block of the watchdog node: Pi 0-3
// device trees also give it the ASB block, which QEMU does not map, and the
// power-domain driver faults reading it.
func dropASB(ctx context.Context, f *fdt) error {
	const wd = "/soc/watchdog@7e100000"
	if _, err := f.tool(ctx, "fdtput", "-tx", wd, "reg", "7e100000", "114"); err != nil {
		return err
	}
	_, err := f.tool(ctx, "fdtput", "-ts", wd, "reg-names", "pm")
	return err
}

// dropBluetooth removes the Bluetooth child of the PL011: with it, the UART
// is a serdev bus for the radio and /dev/console, ttyAMA0, never receives
// what the host types (output still works, through the kernel's console).
func dropBluetooth(ctx context.Context, f *fdt) error {
	_, err := f.tool(ctx, "fdtput", "-r", "/soc/serial@7e201000/bluetooth")
	return err
}

func raspi3bEdits(ctx context.Context, f *fdt) error {
	if err := dropASB(ctx, f); err != nil {
		return err
	}
	return dropBluetooth(ctx, f)
}

// raspi4bEdits disables the nodes at 7ef… (HDMI, its DDC I2C, the DVP clock
// and the L2 interrupt controller: not in QEMU's BCM2711) and removes the
// Bluetooth child of the PL011 (dropBluetooth).
func raspi4bEdits(ctx context.Context, f *fdt) error {
	for _, parent := range []string{"/soc"} {
		nodes, err := f.subnodes(ctx, parent)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if _, addr, ok := strings.Cut(n, "@"); ok && strings.HasPrefix(addr, "7ef") {
				if _, err := f.tool(ctx, "fdtput", "-ts", parent+"/"+n, "status", "disabled"); err != nil {
					return err
				}
			}
		}
	}
	return dropBluetooth(ctx, f)
}

// boardFiles are the host paths one boot needs.
type boardFiles struct {
	qemu, moduleDir, biosDir string
	kernel, dtb, modDir      string
	busybox                  string
}

// prepare returns the board's files, writing its edited device tree into
// CACHE/boards/NAME_KERNEL/ once.
func (c *PiCache) prepare(ctx context.Context, b PiBoard) (boardFiles, error) {
	q := c.root(piPackage("qemu-system-arm", "amd64"))
	k := c.root(b.kernel)
	release := strings.TrimPrefix(c.use(b.kernel).Name, "linux-image-")
	bf := boardFiles{
		qemu:      filepath.Join(q, "usr/bin", b.qemu),
		moduleDir: filepath.Join(c.root(piPackage("qemu-system-modules-opengl", "amd64")), "usr/lib/x86_64-linux-gnu/qemu"),
		biosDir:   filepath.Join(q, "usr/share/qemu"),
		kernel:    filepath.Join(k, "boot", "vmlinuz-"+release),
		modDir:    filepath.Join(k, "lib/modules", release),
		busybox:   filepath.Join(c.root(b.busybox), "bin/busybox"),
		dtb:       filepath.Join(c.Dir, "boards", b.Name+"_"+c.use(b.kernel).dir(), filepath.Base(b.dtb)),
	}
	for _, p := range []string{bf.qemu, bf.kernel, bf.modDir, bf.busybox} {
		if _, err := os.Stat(p); err != nil {
			return bf, fmt.Errorf("vmtest: %s missing: run `vmtest pi fetch` (%w)", p, err)
		}
	}
	// The GUI package's modules sit with the OpenGL ones; QEMU looks in one
	// directory, so link them together once.
	gui := filepath.Join(c.root(piPackage("qemu-system-gui", "amd64")), "usr/lib/x86_64-linux-gnu/qemu")
	if ents, err := os.ReadDir(gui); err == nil {
		for _, e := range ents {
			dst := filepath.Join(bf.moduleDir, e.Name())
			if _, err := os.Lstat(dst); err != nil {
				os.Symlink(filepath.Join(gui, e.Name()), dst)
			}
		}
	}
	if _, err := os.Stat(bf.dtb); err == nil {
		return bf, nil
	}
	if err := os.MkdirAll(filepath.Dir(bf.dtb), 0o755); err != nil {
		return bf, err
	}
	src, err := os.ReadFile(filepath.Join(k, "usr/lib/linux-image-"+release, b.dtb))
	if err != nil {
		return bf, err
	}
	tmp := bf.dtb + ".tmp"
	if err := os.WriteFile(tmp, src, 0o644); err != nil {
		return bf, err
	}
	if err := b.edit(ctx, &fdt{c: c, path: tmp}); err != nil {
		os.Remove(tmp)
		return bf, fmt.Errorf("vmtest: editing %s's device tree: %w", b.Name, err)
	}
	return bf, os.Rename(tmp, bf.dtb)
}

// sortedKeys is for stable error messages.
func sortedKeys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

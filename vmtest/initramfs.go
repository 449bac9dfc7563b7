package vmtest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// initramfsModule names a module the initramfs loads.
type initramfsModule struct {
	name     string
	optional bool
}

// initramfsModules are what it takes to mount an ext4 virtio disk and the 9p
// shares. Modules built into the kernel are skipped; a required one that is
// neither built in nor present is an error, an optional one (names that
// changed across kernel versions, such as crc32c_generic becoming
// crc32c-cryptoapi) is skipped quietly.
func initramfsModules() []initramfsModule {
	return []initramfsModule{
		{"virtio_pci", true},
		{"virtio_blk", false},
		{"virtio_console", true},
		{"crc32c_generic", true},
		{"crc32c_cryptoapi", true},
		{"crc32c_intel", true},
		{"ext4", false},
		{"9pnet_virtio", false},
		{"9p", false},
	}
}

// moduleIndex is what depmod wrote for one kernel: module name -> path
// relative to the modules directory, its dependencies, and the built-ins.
type moduleIndex struct {
	path    map[string]string
	deps    map[string][]string
	builtin map[string]bool
}

// modName turns "kernel/fs/ext4/ext4.ko.xz" into "ext4", with dashes folded to
// underscores as the kernel does.
func modName(p string) string {
	b := path.Base(p)
	if i := strings.Index(b, ".ko"); i >= 0 {
		b = b[:i]
	}
	return strings.ReplaceAll(b, "-", "_")
}

func readModuleIndex(modDir string) (*moduleIndex, error) {
	idx := &moduleIndex{path: map[string]string{}, deps: map[string][]string{}, builtin: map[string]bool{}}
	dep, err := os.ReadFile(filepath.Join(modDir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("reading depmod output: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(dep))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name := modName(mod)
		idx.path[name] = mod
		for _, d := range strings.Fields(rest) {
			idx.deps[name] = append(idx.deps[name], modName(d))
		}
	}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			idx.builtin[modName(l)] = true
		}
	}
	return idx, nil
}

// loadOrder returns module paths with every module after its dependencies.
func (idx *moduleIndex) loadOrder(names []string) ([]string, error) {
	var order []string
	seen := map[string]bool{}
	var visit func(n string, stack []string) error
	visit = func(n string, stack []string) error {
		if seen[n] {
			return nil
		}
		if len(stack) > 64 {
			return fmt.Errorf("module dependency loop: %v", stack)
		}
		seen[n] = true
		for _, d := range idx.deps[n] {
			if err := visit(d, append(stack, n)); err != nil {
				return err
			}
		}
		order = append(order, idx.path[n])
		return nil
	}
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// moduleLoadOrder is the files to insmod, dependencies first, for mods
// under modDir: those built into the kernel need nothing, a missing one
// that is not optional is an error.
func moduleLoadOrder(modDir string, mods []initramfsModule) ([]string, error) {
	idx, err := readModuleIndex(modDir)
	if err != nil {
		return nil, err
	}
	var want []string
	for _, m := range mods {
		switch {
		case idx.builtin[m.name]:
		case idx.path[m.name] != "":
			want = append(want, m.name)
		case !m.optional:
			return nil, fmt.Errorf("kernel module %s is neither built in nor in %s", m.name, modDir)
		}
	}
	return idx.loadOrder(want)
}

// buildInitramfs writes a gzip'd newc cpio with busybox, the init script and
// the modules above, decompressed because busybox insmod cannot read .ko.xz.
func buildInitramfs(ctx context.Context, out, modDir, busybox string, initScript []byte) error {
	order, err := moduleLoadOrder(modDir, initramfsModules())
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	cw := &cpioWriter{w: zw}
	for _, d := range []string{".", "bin", "dev", "proc", "sys", "newroot", "lib", "lib/modules"} {
		cw.dir(d)
	}
	cw.charDev("dev/console", 5, 1)
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("busybox for the initramfs (install busybox-static): %w", err)
	}
	cw.file("bin/busybox", 0o755, bb)
	cw.file("init", 0o755, initScript)
	if err := cw.modules(ctx, modDir, order); err != nil {
		return err
	}
	cw.trailer()
	if cw.err != nil {
		return fmt.Errorf("writing %s: %w", out, cw.err)
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// decompressModule returns a module's plain ELF bytes.
func decompressModule(ctx context.Context, p string) ([]byte, error) {
	switch {
	case strings.HasSuffix(p, ".ko"):
		return os.ReadFile(p)
	case strings.HasSuffix(p, ".ko.gz"):
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return io.ReadAll(zr)
	case strings.HasSuffix(p, ".ko.xz"):
		return output(ctx, io.Discard, "", "xz", "-dc", p)
	case strings.HasSuffix(p, ".ko.zst"):
		return output(ctx, io.Discard, "", "zstd", "-dcq", p)
	}
	return nil, fmt.Errorf("module %s: unknown compression", p)
}

// modules adds the modules at order (paths under modDir, in load order),
// decompressed, to lib/modules, and lib/modules/load listing them for init.
func (w *cpioWriter) modules(ctx context.Context, modDir string, order []string) error {
	var load []string
	for _, rel := range order {
		data, err := decompressModule(ctx, filepath.Join(modDir, rel))
		if err != nil {
			return err
		}
		name := path.Base(rel)
		name = name[:strings.Index(name, ".ko")] + ".ko"
		w.file("lib/modules/"+name, 0o644, data)
		load = append(load, name)
	}
	w.file("lib/modules/load", 0o644, []byte(strings.Join(load, "\n")+"\n"))
	return nil
}

// cpioWriter writes the "newc" format the kernel unpacks into its initial
// root file system. Writing it here rather than with cpio(1) lets the archive
// hold /dev/console (the kernel needs it to give init a console) without
// creating a device node on the host.
type cpioWriter struct {
	w   io.Writer
	ino int
	n   int64
	err error
}

func (c *cpioWriter) header(name string, mode uint32, rdevMajor, rdevMinor int, size int) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	h := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.write([]byte(h))
	c.write(append([]byte(name), 0))
	c.pad()
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) dir(name string) { c.header(name, 0o040755, 0, 0, 0) }
func (c *cpioWriter) trailer()        { c.header("TRAILER!!!", 0, 0, 0, 0) }
func (c *cpioWriter) charDev(name string, major, minor int) {
	c.header(name, 0o020600, major, minor, 0)
}

func (c *cpioWriter) file(name string, perm uint32, data []byte) {
	c.header(name, 0o100000|perm, 0, 0, len(data))
	c.write(data)
	c.pad()
}

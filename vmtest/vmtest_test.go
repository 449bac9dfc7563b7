package vmtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSelftest boots the VM twice (device checks, then `false`). It needs
// root, the host packages (`vmtest deps`) and minutes, so it only runs with
// RASPI_MCP_VM=1.
func TestSelftest(t *testing.T) {
	if os.Getenv("RASPI_MCP_VM") != "1" {
		t.Skip("set RASPI_MCP_VM=1 to boot the test VM (needs root and qemu; see vmtest deps)")
	}
	// Building the image from nothing and two boots under TCG take a few
	// minutes: run with -timeout 20m; the VM runs stop before the test's end.
	deadline := time.Now().Add(14 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c, err := NewCache(DefaultCacheDir(), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := c.Selftest(ctx, SelftestOptions{Accel: os.Getenv("RASPI_MCP_VM_ACCEL"), Stdout: &out, Stderr: &out})
	t.Logf("guest output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s; image %.1fs; checks: %s; false: %s; total %.1fs",
		rep.KernelImage, rep.Image.Seconds(), rep.Check, rep.False, rep.Total.Seconds())
}

// TestProbeBoot checks the accelerator probe's two outcomes with TCG, since
// the machines this runs on may have no KVM: the marker boot succeeds, and a
// boot that cannot finish in time is reported as failed with qemu gone.
func TestProbeBoot(t *testing.T) {
	if os.Getenv("RASPI_MCP_VM") != "1" {
		t.Skip("set RASPI_MCP_VM=1 to boot the test VM")
	}
	c, err := NewCache(DefaultCacheDir(), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	im, err := c.Image(context.Background(), DefaultRecipe(), false)
	if err != nil {
		t.Fatal(err)
	}
	// A TCG boot on a busy host can take minutes; the probe returns as
	// soon as the marker shows.
	if ok, detail := probeBoot(context.Background(), im, "tcg", 5*time.Minute); !ok {
		t.Errorf("TCG probe boot failed: %s", detail)
	} else {
		t.Logf("TCG probe: %s", detail)
	}
	ok, detail := probeBoot(context.Background(), im, "tcg", 300*time.Millisecond)
	if ok || !strings.Contains(detail, "no sign of life within 300ms") {
		t.Errorf("probe with no time to boot = %v, %q", ok, detail)
	}
	if left := qemuChildren(t); len(left) != 0 {
		t.Errorf("qemu still running after the timed-out probe returned: pids %v", left)
	}
}

// qemuChildren lists this process's qemu children, alive or not yet reaped.
func qemuChildren(t *testing.T) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:]) // state, ppid, ...
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && strings.HasPrefix(s[open+1:end], "qemu-system") {
			pids = append(pids, s[:open-1])
		}
	}
	return pids
}

// testLog sends the harness's progress to t.Log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func TestParseForward(t *testing.T) {
	f, err := ParseForward("2222:22")
	if err != nil || f != (Forward{2222, 22}) {
		t.Fatalf("ParseForward(2222:22) = %v, %v", f, err)
	}
	for _, bad := range []string{"", "22", "a:22", "0:22", "22:70000", "1:2:3"} {
		if _, err := ParseForward(bad); err == nil {
			t.Errorf("ParseForward(%q) accepted", bad)
		}
	}
}

func TestQemuArgsForwardsAreLoopbackOnly(t *testing.T) {
	im := &Image{Dir: "/img"}
	v := &vm{dir: "/run", console: "/run/console.log", qmp: "/q/qmp.sock"}
	args := strings.Join(qemuArgs(im, "tcg", RunOptions{CPUs: 2, MemoryMB: 512,
		Forwards: []Forward{{8022, 22}, {8080, 80}}}, v, "/run/o.qcow2", "/run/control"), " ")
	for _, want := range []string{
		"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:8022-:22,hostfwd=tcp:127.0.0.1:8080-:80",
		"vmtest.ssh", "tcg,thread=multi", "-no-reboot", "readonly=on",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("qemu args lack %q:\n%s", want, args)
		}
	}
	args = strings.Join(qemuArgs(im, "kvm", RunOptions{CPUs: 1, MemoryMB: 512}, v, "/o", "/c"), " ")
	if strings.Contains(args, "netdev") || strings.Contains(args, "vmtest.ssh") {
		t.Errorf("no forwards but networking in qemu args:\n%s", args)
	}
	if !strings.Contains(args, "-accel kvm -cpu host") {
		t.Errorf("kvm args missing:\n%s", args)
	}
}

func TestWriteControl(t *testing.T) {
	dir := t.TempDir()
	err := writeControl(dir, RunOptions{Command: []string{"sh", "-c", "echo 'a b'"}, Share: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "argv"))
	if string(b) != "sh\x00-c\x00echo 'a b'\x00" {
		t.Errorf("argv = %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "share")); err != nil {
		t.Error("share marker missing")
	}
	if _, err := os.Stat(filepath.Join(dir, "net")); err == nil {
		t.Error("net marker without forwards")
	}
	if err := writeControl(t.TempDir(), RunOptions{Command: []string{"a\x00b"}}); err == nil {
		t.Error("NUL in an argument accepted")
	}
}

func TestModuleLoadOrder(t *testing.T) {
	dir := t.TempDir()
	dep := "kernel/fs/ext4/ext4.ko.xz: kernel/lib/crc16.ko.xz kernel/fs/mbcache.ko.xz kernel/fs/jbd2/jbd2.ko.xz\n" +
		"kernel/lib/crc16.ko.xz:\nkernel/fs/mbcache.ko.xz:\nkernel/fs/jbd2/jbd2.ko.xz:\n" +
		"kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz\n" +
		"kernel/net/9p/9pnet.ko.xz:\nkernel/fs/netfs/netfs.ko.xz:\n" +
		"kernel/net/9p/9pnet_virtio.ko.xz: kernel/net/9p/9pnet.ko.xz\n"
	os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644)
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/drivers/virtio/virtio_pci.ko\n"), 0o644)
	idx, err := readModuleIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !idx.builtin["virtio_pci"] {
		t.Error("virtio_pci not seen as built in")
	}
	order, err := idx.loadOrder([]string{"ext4", "9pnet_virtio", "9p"})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, p := range order {
		pos[modName(p)] = i
	}
	if len(order) != 8 {
		t.Errorf("order has %d modules, want 8: %v", len(order), order)
	}
	for _, pair := range [][2]string{{"jbd2", "ext4"}, {"crc16", "ext4"}, {"9pnet", "9pnet_virtio"}, {"netfs", "9p"}} {
		if pos[pair[0]] >= pos[pair[1]] {
			t.Errorf("%s loads after %s: %v", pair[0], pair[1], order)
		}
	}
}

func TestCpioNewc(t *testing.T) {
	var buf bytes.Buffer
	cw := &cpioWriter{w: &buf}
	cw.dir(".")
	cw.charDev("dev/console", 5, 1)
	cw.file("init", 0o755, []byte("#!/bin/sh\n"))
	cw.trailer()
	if cw.err != nil {
		t.Fatal(cw.err)
	}
	b := buf.Bytes()
	if len(b)%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", len(b))
	}
	if !bytes.HasPrefix(b, []byte("070701")) || !bytes.Contains(b, []byte("TRAILER!!!\x00")) {
		t.Error("not a newc archive")
	}
	// The char device header: mode 020600, rdev 5:1.
	i := bytes.Index(b, []byte("dev/console\x00"))
	h := string(b[i-110 : i])
	if h[14:22] != "00002180" || h[78:86] != "00000005" || h[86:94] != "00000001" {
		t.Errorf("console header %q", h)
	}
}

func TestRecipeKeyCoversGuestFiles(t *testing.T) {
	r := DefaultRecipe()
	k1, err := r.imageKey()
	if err != nil {
		t.Fatal(err)
	}
	r.FreeMB++
	k2, _ := r.imageKey()
	if k1 == k2 {
		t.Error("image key ignores the recipe")
	}
	if r.rootfsKey() != DefaultRecipe().rootfsKey() {
		t.Error("rootfs key depends on fields debootstrap does not use")
	}
}

func TestConsoleCrashDetection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "console.log")
	var b strings.Builder
	b.WriteString("SeaBIOS\r\n")
	for i := range 10 {
		b.WriteString("[    1.0] boot line " + strings.Repeat("x", i) + "\r\n")
	}
	b.WriteString("[    2.013862] Oops: int3: 0000 [#1] SMP NOPTI\r\n")
	for range 100 {
		b.WriteString("[    2.03] R10: 0000000000000000 R11: ff6605c9400f0ff8\r\n")
	}
	os.WriteFile(p, []byte(b.String()), 0o644)
	crashed, why := guestCrashed(p)
	if !crashed || !strings.Contains(why, "Oops: int3") {
		t.Errorf("guestCrashed = %v, %q", crashed, why)
	}
	if ex := consoleExcerpt(p, 30); !strings.Contains(ex, "Oops: int3") || !strings.Contains(ex, "boot line") {
		t.Errorf("excerpt misses the oops and what led to it:\n%s", ex)
	}

	os.WriteFile(p, []byte("raspi-vm login: \r\n"), 0o644)
	if crashed, _ := guestCrashed(p); crashed {
		t.Error("a clean console counted as a crash")
	}
}

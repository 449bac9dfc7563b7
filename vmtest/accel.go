package vmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// probeTimeout bounds the KVM probe boot. A working KVM reaches the
// initramfs in about a second; under a nested hypervisor that breaks, the
// guest dies in the decompressor and qemu hangs paused, so anything slow is
// a failure.
const probeTimeout = 25 * time.Second

// kvmProbe is the cached verdict of one probe.
type kvmProbe struct {
	Machine string    `json:"machine"` // hash of what the verdict depends on
	KVM     bool      `json:"kvm"`
	Detail  string    `json:"detail"`
	At      time.Time `json:"at"`
}

// chooseAccel resolves "auto" to kvm or tcg. An explicit kvm or tcg is taken
// as asked, so a probe can be overridden both ways.
func (c *Cache) chooseAccel(ctx context.Context, im *Image, want string) (string, error) {
	switch want {
	case "kvm", "tcg":
		return want, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("accelerator %q: want kvm, tcg or auto", want)
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(c.Log, "vmtest: using TCG: %v\n", err)
		return "tcg", nil
	}
	f.Close()

	machine := machineKey(ctx, im)
	path := filepath.Join(c.Dir, "kvm-probe.json")
	var p kvmProbe
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &p) == nil && p.Machine == machine {
		fmt.Fprintf(c.Log, "vmtest: KVM works: %v (cached probe: %s)\n", p.KVM, p.Detail)
	} else {
		p = kvmProbe{Machine: machine, At: time.Now().UTC()}
		p.KVM, p.Detail = c.probeKVM(ctx, im)
		fmt.Fprintf(c.Log, "vmtest: KVM works: %v (%s)\n", p.KVM, p.Detail)
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		b, _ := json.MarshalIndent(p, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			return "", err
		}
	}
	if p.KVM {
		return "kvm", nil
	}
	return "tcg", nil
}

// machineKey identifies what a KVM verdict depends on: the host (its name,
// kernel and CPU), the qemu build and the guest kernel.
func machineKey(ctx context.Context, im *Image) string {
	h := sha256.New()
	host, _ := os.Hostname()
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Fprintf(h, "%s\n%s\n", host, bytes.TrimSpace(rel))
	if cpu, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(cpu), "\n") {
			if strings.HasPrefix(l, "model name") || strings.HasPrefix(l, "flags") {
				fmt.Fprintln(h, l)
				break
			}
		}
	}
	if out, err := exec.CommandContext(ctx, "qemu-system-x86_64", "--version").Output(); err == nil {
		h.Write(out)
	}
	fmt.Fprintln(h, im.Manifest.KernelRelease)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// probeKVM boots the image's kernel and initramfs under KVM with
// vmtest.probe on the command line: the initramfs prints a marker and powers
// off. Only the marker within probeTimeout counts as working.
func (c *Cache) probeKVM(ctx context.Context, im *Image) (bool, string) {
	return probeBoot(ctx, im, "kvm", probeTimeout)
}

// probeBoot is probeKVM for any accelerator and time limit, so the
// mechanism can be tested where there is no KVM.
func probeBoot(ctx context.Context, im *Image, accel string, timeout time.Duration) (bool, string) {
	dir, err := os.MkdirTemp("", "vmtest-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	console := filepath.Join(dir, "console.log")
	args := []string{
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-machine", "pc", "-m", "256",
	}
	args = append(args, accelArgs(accel)...)
	args = append(args,
		"-kernel", im.Kernel(), "-initrd", im.Initrd(),
		"-append", "console=ttyS0 panic=-1 loglevel=4 vmtest.probe",
		"-chardev", "file,id=con,path="+qemuOpt(console), "-serial", "chardev:con",
	)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command("qemu-system-x86_64", args...)
	// A file, not a buffer: exec would copy into a buffer from another
	// goroutine while we read it.
	qlog, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return false, err.Error()
	}
	defer qlog.Close()
	cmd.Stdout, cmd.Stderr = qlog, qlog
	qemuSaid := func() string { b, _ := os.ReadFile(qlog.Name()); return firstLine(string(b)) }
	cmd.SysProcAttr = qemuAttr()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return false, "starting qemu: " + err.Error()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Sprintf("no sign of life within %s; qemu said: %s", timeout, qemuSaid())
		case err := <-exited:
			exited <- err // for the deferred wait
			if b, _ := os.ReadFile(console); bytes.Contains(b, []byte("VMTEST-PROBE-OK")) {
				return true, fmt.Sprintf("probe boot took %.1fs", time.Since(start).Seconds())
			}
			return false, fmt.Sprintf("qemu exited (%v) before the initramfs ran: %s", err, qemuSaid())
		case <-tick.C:
			if b, _ := os.ReadFile(console); bytes.Contains(b, []byte("VMTEST-PROBE-OK")) {
				return true, fmt.Sprintf("probe boot took %.1fs", time.Since(start).Seconds())
			}
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "(nothing)"
	}
	return s
}

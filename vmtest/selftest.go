package vmtest

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

//go:embed selftest/check.sh
var selftestScript []byte

// SelftestOptions configure Selftest.
type SelftestOptions struct {
	Accel          string
	Timeout        time.Duration // per VM run
	Stdout, Stderr io.Writer     // the guest script's output
}

// SelftestReport holds what Selftest measured.
type SelftestReport struct {
	Image       time.Duration // getting the image (building it if needed)
	Check       *Result       // the device checks
	False       *Result       // the `false` run
	Total       time.Duration
	KernelImage string
}

// Selftest proves the harness end to end: it builds the image if needed, runs
// the device checks (selftest/check.sh) from a shared directory, then runs
// `false` to prove the exit status comes back.
func (c *Cache) Selftest(ctx context.Context, opts SelftestOptions) (*SelftestReport, error) {
	start := time.Now()
	rep := &SelftestReport{}
	im, err := c.Image(ctx, DefaultRecipe(), false)
	if err != nil {
		return rep, err
	}
	rep.Image = time.Since(start)
	rep.KernelImage = im.Manifest.KernelRelease

	share, err := os.MkdirTemp("", "vmtest-selftest-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(share)
	if err := os.WriteFile(filepath.Join(share, "check.sh"), selftestScript, 0o755); err != nil {
		return rep, err
	}
	// The 9p share shows host ownership and modes as they are.
	if err := os.Chmod(share, 0o755); err != nil {
		return rep, err
	}

	base := RunOptions{Accel: opts.Accel, Timeout: opts.Timeout, Stdout: opts.Stdout, Stderr: opts.Stderr}
	checks := base
	checks.Share = share
	checks.Command = []string{"/share/check.sh"}
	rep.Check, err = c.Run(ctx, im, checks)
	if err != nil {
		return rep, fmt.Errorf("device checks: %w", err)
	}
	fmt.Fprintf(c.Log, "vmtest: device checks: exit %d, %s\n", rep.Check.ExitCode, rep.Check)
	if rep.Check.ExitCode != 0 {
		return rep, fmt.Errorf("device checks failed with exit status %d", rep.Check.ExitCode)
	}

	f := base
	f.Command = []string{"false"}
	f.Accel = rep.Check.Accel // the probe verdict is already in
	rep.False, err = c.Run(ctx, im, f)
	if err != nil {
		return rep, fmt.Errorf("exit status run: %w", err)
	}
	fmt.Fprintf(c.Log, "vmtest: false: exit %d, %s\n", rep.False.ExitCode, rep.False)
	if rep.False.ExitCode != 1 {
		return rep, fmt.Errorf("`false` in the guest exited %d, want 1", rep.False.ExitCode)
	}
	rep.Total = time.Since(start)
	return rep, nil
}

// HostPackages are the Debian packages the host needs to build and run images.
func HostPackages() []string {
	return []string{
		"qemu-system-x86", "qemu-utils", "debootstrap", "kmod", "cpio", "zstd",
		"xz-utils", "busybox-static", "e2fsprogs",
	}
}

// InstallDeps installs HostPackages with apt-get (as root), skipping apt
// entirely when every tool they provide is already there, which keeps a
// repeated CI step at zero cost and working offline.
func InstallDeps(ctx context.Context, log io.Writer) error {
	var missing []string
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "debootstrap", "depmod", "cpio", "zstd", "xz", "mkfs.ext4", "dpkg-deb", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if err := checkStatic("/bin/busybox"); err != nil {
		missing = append(missing, "static busybox")
	}
	if len(missing) == 0 {
		fmt.Fprintln(log, "vmtest: host packages already installed")
		return nil
	}
	fmt.Fprintf(log, "vmtest: missing %s; installing %s\n", strings.Join(missing, ", "), strings.Join(HostPackages(), " "))
	if err := run(ctx, log, "", "apt-get", "update", "-q"); err != nil {
		return err
	}
	args := append([]string{"install", "-y", "-q", "--no-install-recommends"}, HostPackages()...)
	return run(ctx, log, "", "apt-get", args...)
}

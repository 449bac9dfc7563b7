// Command vmtest runs commands inside a throw-away VM with a real Linux
// kernel that has gpio-sim and i2c-stub devices shaped like a Raspberry Pi.
// See package github.com/raspi-mcp/raspi-mcp/vmtest for how it works.
//
// Usage:
//
//	vmtest deps                      install the host packages (apt-get, as root)
//	vmtest image [--cache DIR] [--rebuild]
//	vmtest run [flags] -- COMMAND ARGS...
//	vmtest selftest [--cache DIR] [--accel auto|kvm|tcg]
//	vmtest pi fetch|pins|run ...     emulated Raspberry Pis (make test-pi)
//
// run exits with the guest command's exit status, 124 when the time limit
// ran out and 125 when the VM could not run the command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/raspi-mcp/raspi-mcp/vmtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

const usage = `usage:
  vmtest deps
  vmtest image [--cache DIR] [--rebuild] [-v]
  vmtest run [--cache DIR] [--share HOSTDIR] [--timeout 15m] [--mem 1024] [--cpus 2]
             [--accel auto|kvm|tcg] [--forward HOSTPORT:GUESTPORT]... [--console] [--keep] [-v]
             -- COMMAND ARGS...
  vmtest selftest [--cache DIR] [--accel auto|kvm|tcg] [--timeout 10m] [-v]
  vmtest pi fetch|pins|run ...     emulated Raspberry Pis (make test-pi; vmtest pi for help)
`

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	code := 0
	switch args[0] {
	case "deps":
		err = vmtest.InstallDeps(ctx, os.Stderr)
	case "image":
		err = imageCmd(ctx, args[1:])
	case "run":
		code, err = runCmd(ctx, args[1:])
	case "selftest":
		err = selftestCmd(ctx, args[1:])
	case "pi":
		code, err = piCmd(ctx, args[1:])
	case "help", "-h", "--help":
		fmt.Fprint(os.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "vmtest: unknown subcommand %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// common are the flags every subcommand but deps has.
type common struct {
	cache   *string
	verbose *bool
}

func newFlags(name string) (*flag.FlagSet, common) {
	fs := flag.NewFlagSet("vmtest "+name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage) }
	return fs, common{
		cache:   fs.String("cache", vmtest.DefaultCacheDir(), "cache directory (images, KVM probe verdict, run scratch space)"),
		verbose: fs.Bool("v", false, "also log every host command vmtest runs (debootstrap, qemu, ...)"),
	}
}

// newCache opens the cache with progress going to stderr.
func (c common) newCache() (*vmtest.Cache, error) {
	var log io.Writer = os.Stderr
	if !*c.verbose {
		log = &prefixFilter{w: os.Stderr}
	}
	return vmtest.NewCache(*c.cache, log)
}

func imageCmd(ctx context.Context, args []string) error {
	fs, cf := newFlags("image")
	rebuild := fs.Bool("rebuild", false, "build even if the image is cached (picks up a newer kernel)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf.newCache()
	if err != nil {
		return err
	}
	start := time.Now()
	im, err := c.Image(ctx, vmtest.DefaultRecipe(), *rebuild)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "vmtest: image ready in %.1fs\n", time.Since(start).Seconds())
	fmt.Printf("%s\nkernel %s (%s), built %s in %.0fs\n", im.Dir, im.Manifest.KernelRelease,
		im.Manifest.KernelVersion, im.Manifest.BuiltAt.Format(time.RFC3339), im.Manifest.BuildSeconds)
	return nil
}

// forwards collects repeated --forward flags.
type forwards []vmtest.Forward

func (f *forwards) String() string { return fmt.Sprint(*f) }
func (f *forwards) Set(s string) error {
	fw, err := vmtest.ParseForward(s)
	if err != nil {
		return err
	}
	*f = append(*f, fw)
	return nil
}

func runCmd(ctx context.Context, args []string) (int, error) {
	fs, cf := newFlags("run")
	share := fs.String("share", "", "host directory to mount read-only at /share in the guest")
	timeout := fs.Duration("timeout", 15*time.Minute, "time limit for the whole run, boot included")
	mem := fs.Int("mem", 1024, "guest memory in MiB")
	cpus := fs.Int("cpus", 2, "guest CPUs")
	accel := fs.String("accel", "auto", "kvm, tcg, or auto (KVM if a probe boot works)")
	console := fs.Bool("console", false, "copy the guest's serial console (kernel, systemd) to stderr")
	keep := fs.Bool("keep", false, "keep the run directory (overlay, console.log) and print its path")
	var fwd forwards
	fs.Var(&fwd, "forward", "forward 127.0.0.1:HOSTPORT to guest port GUESTPORT (repeatable)")
	expectReboot := fs.Bool("expect-reboot", false, "the command schedules a reboot and exits 0: succeed only if the guest then reboots")
	if err := fs.Parse(args); err != nil {
		return vmtest.ExitHarness, err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return vmtest.ExitHarness, errors.New("no command given after --")
	}
	c, err := cf.newCache()
	if err != nil {
		return vmtest.ExitHarness, err
	}
	// vmtest's own messages share stderr with the guest command's; they all
	// start with "vmtest:".
	im, err := c.Image(ctx, vmtest.DefaultRecipe(), false)
	if err != nil {
		return vmtest.ExitHarness, err
	}
	opts := vmtest.RunOptions{
		Command: fs.Args(), Share: *share, Timeout: *timeout, MemoryMB: *mem, CPUs: *cpus,
		Forwards: fwd, Accel: *accel, Stdout: os.Stdout, Stderr: os.Stderr, Keep: *keep, ExpectReboot: *expectReboot,
	}
	if *console {
		opts.Console = os.Stderr
	}
	res, err := c.Run(ctx, im, opts)
	if res.RunDir != "" {
		fmt.Fprintf(os.Stderr, "vmtest: run directory kept: %s\n", res.RunDir)
	}
	if err != nil {
		return res.ExitCode, err
	}
	fmt.Fprintf(os.Stderr, "vmtest: %s exited %d; %s\n", strings.Join(opts.Command, " "), res.ExitCode, res)
	if *expectReboot && res.ExitCode == 0 {
		if !res.Rebooted {
			return 1, errors.New("the guest did not reboot after the command")
		}
		fmt.Fprintln(os.Stderr, "vmtest: the guest rebooted, as the command arranged")
	}
	return res.ExitCode, nil
}

func selftestCmd(ctx context.Context, args []string) error {
	fs, cf := newFlags("selftest")
	accel := fs.String("accel", "auto", "kvm, tcg, or auto")
	timeout := fs.Duration("timeout", 10*time.Minute, "time limit per VM run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := cf.newCache()
	if err != nil {
		return err
	}
	rep, err := c.Selftest(ctx, vmtest.SelftestOptions{Accel: *accel, Timeout: *timeout, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return fmt.Errorf("selftest: %w", err)
	}
	fmt.Fprintf(os.Stderr, "vmtest: selftest passed: kernel %s; image %.1fs; checks: %s; false: %s; total %.1fs\n",
		rep.KernelImage, rep.Image.Seconds(), rep.Check, rep.False, rep.Total.Seconds())
	return nil
}

// prefixFilter drops the "vmtest: $ command" lines of the build log and
// keeps the rest.
type prefixFilter struct {
	w       io.Writer
	pending []byte
}

func (p *prefixFilter) Write(b []byte) (int, error) {
	p.pending = append(p.pending, b...)
	for {
		i := strings.IndexByte(string(p.pending), '\n')
		if i < 0 {
			return len(b), nil
		}
		line := p.pending[:i+1]
		if !strings.HasPrefix(string(line), "vmtest: $ ") {
			if _, err := p.w.Write(line); err != nil {
				return len(b), err
			}
		}
		p.pending = p.pending[i+1:]
	}
}

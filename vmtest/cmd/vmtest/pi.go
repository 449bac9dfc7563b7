package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/vmtest"
)

const piUsage = `usage:
  vmtest pi fetch [--cache DIR] [-v]       download (pinned, checksummed) and unpack QEMU, kernels, busybox
  vmtest pi pins [--cache DIR]             what the mirror has now for each pin
  vmtest pi run [--cache DIR] [--boards raspi0,raspi3b,raspi4b] --bin DIR [--timeout 10m] [-v]
                [-- GUEST-TEST-ARGS...]
      DIR/armv6 and DIR/arm64 each hold pi.test (a test binary) and what it needs
      (make test-pi: raspi-mcp.deb); each board gets the files of its architecture
      in /share and runs ./pi.test there.
  vmtest pi record [--cache DIR] [--boards ...] --out DIR
      boot each board with only a script that copies the /proc, /sys and device-tree
      files hw/sysinfo reads, into DIR/BOARD (raspi4b as raspi4b-qemu: pi4 is a real
      board's): how hw/sysinfo/testdata's emulated trees are made
`

// piCmd is `vmtest pi`: the emulated Raspberry Pis of make test-pi.
func piCmd(ctx context.Context, args []string) (int, error) {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, piUsage)
		return 2, nil
	}
	fs, cf := newFlags("pi " + args[0])
	fs.Usage = func() { fmt.Fprint(fs.Output(), piUsage) }
	*cf.cache = vmtest.DefaultPiCacheDir()
	boards := fs.String("boards", "raspi0,raspi3b,raspi4b", "boards to boot, one at a time, in this order")
	bin := fs.String("bin", "", "directory with armv6/ and arm64/ subdirectories of guest binaries")
	out := fs.String("out", "", "pi record: where the boards' trees go")
	timeout := fs.Duration("timeout", 10*time.Minute, "time limit per boot attempt")
	if err := fs.Parse(args[1:]); err != nil {
		return 2, err
	}
	var log = os.Stderr
	c, err := vmtest.NewPiCache(*cf.cache, &prefixFilter{w: log})
	if *cf.verbose {
		c, err = vmtest.NewPiCache(*cf.cache, log)
	}
	if err != nil {
		return 1, err
	}
	switch args[0] {
	case "fetch":
		start := time.Now()
		if err := c.Fetch(ctx); err != nil {
			return 1, err
		}
		fmt.Fprintf(os.Stderr, "vmtest pi: packages ready in %s (%.1fs)\n", c.Dir, time.Since(start).Seconds())
		return 0, nil
	case "pins":
		return 0, c.Pins(ctx, os.Stdout)
	case "record":
		if *out == "" {
			return 2, errors.New("pi record: --out is required")
		}
		if err := c.Fetch(ctx); err != nil {
			return 1, err
		}
		for _, name := range strings.Split(*boards, ",") {
			b, err := vmtest.PiBoardNamed(strings.TrimSpace(name))
			if err != nil {
				return 2, err
			}
			dir := b.Name
			if dir == "raspi4b" {
				dir = "raspi4b-qemu"
			}
			res, err := c.RecordTree(ctx, b, filepath.Join(*out, dir))
			if err != nil {
				return 1, err
			}
			fmt.Fprintf(os.Stderr, "vmtest pi: %s recorded into %s (%s)\n", b.Name, filepath.Join(*out, dir), res)
		}
		return 0, nil
	case "run":
	default:
		fmt.Fprint(os.Stderr, piUsage)
		return 2, fmt.Errorf("unknown pi subcommand %q", args[0])
	}
	if *bin == "" {
		return 2, errors.New("pi run: --bin is required")
	}
	if err := c.Fetch(ctx); err != nil {
		return 1, err
	}
	var summary []string
	code := 0
	for _, name := range strings.Split(*boards, ",") {
		b, err := vmtest.PiBoardNamed(strings.TrimSpace(name))
		if err != nil {
			return 2, err
		}
		dir := filepath.Join(*bin, b.GoArch)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 2, err
		}
		files := map[string]string{}
		for _, e := range ents {
			if e.Type().IsRegular() {
				files[e.Name()] = filepath.Join(dir, e.Name())
			}
		}
		if files["pi.test"] == "" {
			return 2, fmt.Errorf("pi run: no pi.test in %s", dir)
		}
		command := "./pi.test -test.v -test.count=1"
		for _, a := range fs.Args() {
			command += " '" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		fmt.Fprintf(os.Stderr, "vmtest pi: booting %s (%s binaries)\n", b.Name, b.GoArch)
		res, err := c.RunPi(ctx, b, vmtest.PiRunOptions{Files: files, Command: command, Timeout: *timeout, Console: os.Stdout})
		verdict := "PASS"
		switch {
		case err != nil:
			verdict = "ERROR " + err.Error()
			code = 1
		case res.ExitCode != 0:
			verdict = fmt.Sprintf("FAIL (exit %d)", res.ExitCode)
			code = 1
		}
		summary = append(summary, fmt.Sprintf("vmtest pi: %-8s %s; %s", b.Name, verdict, res))
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintln(os.Stderr, strings.Join(summary, "\n"))
	return code, nil
}

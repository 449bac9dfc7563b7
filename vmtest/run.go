package vmtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit codes vmtest uses for itself, chosen like timeout(1) and env(1) so
// they are unlikely to be confused with the guest command's own.
const (
	ExitTimeout = 124 // the time limit ran out
	ExitHarness = 125 // the VM could not run the command
)

// Forward is one loopback-only TCP port forward into the guest.
type Forward struct {
	HostPort, GuestPort int
}

// ParseForward parses HOSTPORT:GUESTPORT.
func ParseForward(s string) (Forward, error) {
	h, g, ok := strings.Cut(s, ":")
	hp, err1 := strconv.Atoi(h)
	gp, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || hp < 1 || hp > 65535 || gp < 1 || gp > 65535 {
		return Forward{}, fmt.Errorf("port forward %q: want HOSTPORT:GUESTPORT", s)
	}
	return Forward{hp, gp}, nil
}

// RunOptions say how to run one command.
type RunOptions struct {
	Command  []string
	Share    string        // host directory mounted read-only at /share; "" for none
	Timeout  time.Duration // for the whole run, boot included; 0 means 15 minutes
	MemoryMB int           // 0 means 1024
	CPUs     int           // 0 means 2
	Forwards []Forward
	Accel    string // "kvm", "tcg" or "auto" (default)

	Stdout, Stderr io.Writer // the command's output; nil discards
	Console        io.Writer // if set, the serial console (kernel, systemd) as it is written
	Keep           bool      // keep the run directory (overlay, console log) for a post-mortem

	// ExpectReboot: the command arranges a reboot (through systemd) and
	// exits 0; the guest then stays up instead of powering off, and the run
	// waits up to RebootWithin (default 2 minutes) for the guest to reboot.
	// qemu runs with -no-reboot, so the reboot ends it; Result.Rebooted says
	// whether the kernel went down restarting, not powering off.
	ExpectReboot bool
	RebootWithin time.Duration
}

// Result is what a run measured. ExitCode is the guest command's, or
// ExitTimeout/ExitHarness together with a non-nil error.
type Result struct {
	ExitCode int
	Accel    string
	Boot     time.Duration // qemu start to command start
	Command  time.Duration // command start to command end
	Total    time.Duration // Run call to qemu gone
	RunDir   string        // set when Keep
	Rebooted bool          // the guest kernel restarted after the command (see ExpectReboot)
}

func (r *Result) String() string {
	return fmt.Sprintf("accel %s, boot to command %.1fs, command %.1fs, total %.1fs",
		r.Accel, r.Boot.Seconds(), r.Command.Seconds(), r.Total.Seconds())
}

// ErrTimeout is wrapped by Run's error when the time limit ran out.
var ErrTimeout = errors.New("time limit reached")

// Run boots im through a throw-away overlay and runs opts.Command as root.
// The qemu process group is always gone when Run returns.
func (c *Cache) Run(ctx context.Context, im *Image, opts RunOptions) (*Result, error) {
	start := time.Now()
	res := &Result{ExitCode: ExitHarness}
	if len(opts.Command) == 0 {
		return res, errors.New("no command to run")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Minute
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = 1024
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Share != "" {
		st, err := os.Stat(opts.Share)
		if err != nil || !st.IsDir() {
			return res, fmt.Errorf("shared directory %q is not a directory", opts.Share)
		}
		if opts.Share, err = filepath.Abs(opts.Share); err != nil {
			return res, err
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, opts.Timeout, ErrTimeout)
	defer cancel()

	accel, err := c.chooseAccel(ctx, im, opts.Accel)
	if err != nil {
		return res, err
	}
	res.Accel = accel
	if opts.CPUs <= 0 {
		opts.CPUs = 2
	}

	unlock, err := c.lock(false)
	if err != nil {
		return res, err
	}
	defer unlock()

	runs := filepath.Join(c.Dir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return res, err
	}
	c.removeStaleRuns(runs)
	dir, err := os.MkdirTemp(runs, "run-")
	if err != nil {
		return res, err
	}
	// Held for the run's life: removeStaleRuns takes a run directory whose
	// lock is free as left behind by a killed vmtest.
	runLock, err := os.Create(filepath.Join(dir, "lock"))
	if err != nil {
		return res, err
	}
	defer runLock.Close()
	if err := syscall.Flock(int(runLock.Fd()), syscall.LOCK_EX); err != nil {
		return res, fmt.Errorf("locking %s: %w", runLock.Name(), err)
	}
	if opts.Keep {
		res.RunDir = dir
		os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644)
	} else {
		defer os.RemoveAll(dir)
	}
	// A unix socket path must fit in 108 bytes; the cache path may not.
	sockDir, err := os.MkdirTemp("", "vmtest-qmp-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(sockDir)
	qmpSock := filepath.Join(sockDir, "qmp.sock")

	if err := writeControl(filepath.Join(dir, "control"), opts); err != nil {
		return res, fmt.Errorf("preparing the command share: %w", err)
	}
	overlay := filepath.Join(dir, "overlay.qcow2")
	v := &vm{
		dir:     dir,
		console: filepath.Join(dir, "console.log"),
		qmp:     qmpSock,
	}
	args := qemuArgs(im, accel, opts, v, overlay, filepath.Join(dir, "control"))
	var code int
	for attempt := 1; ; attempt++ {
		os.Remove(overlay)
		os.Remove(qmpSock)
		if err := run(ctx, c.Log, "", "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", im.Disk(), overlay); err != nil {
			return res, fmt.Errorf("creating the disk overlay: %w", err)
		}
		var started bool
		code, started, err = v.run(ctx, c.Log, args, opts, res)
		if err == nil || started || attempt > 1 || accel != "tcg" || ctx.Err() != nil {
			break
		}
		// The command never ran, so booting again cannot run it twice.
		crashed, why := guestCrashed(v.console)
		if !crashed {
			break
		}
		fmt.Fprintf(c.Log, "vmtest: guest kernel crashed while booting (%s); booting once more in case it was multi-threaded TCG's int3 race\n", why)
		os.Rename(v.console, filepath.Join(dir, fmt.Sprintf("console-attempt%d.log", attempt)))
	}
	res.Total = time.Since(start)
	if err != nil {
		if errors.Is(context.Cause(ctx), ErrTimeout) {
			res.ExitCode = ExitTimeout
			return res, fmt.Errorf("%w after %s (accel %s); last console lines:\n%s",
				ErrTimeout, opts.Timeout, accel, consoleExcerpt(v.console, 30))
		}
		return res, err
	}
	res.ExitCode = code
	if opts.ExpectReboot {
		res.Rebooted = consoleSays(v.console, "reboot: Restarting system")
	}
	return res, nil
}

// consoleSays reports whether the serial console log contains s.
func consoleSays(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

// removeStaleRuns deletes run directories of vmtest processes that died
// without cleaning up (their overlays can be large), leaving --keep ones.
func (c *Cache) removeStaleRuns(runs string) {
	dirs, _ := filepath.Glob(filepath.Join(runs, "run-*"))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "keep")); err == nil {
			continue
		}
		// A run that has just made its directory may not hold its lock yet.
		if st, err := os.Stat(d); err != nil || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		f, err := os.Open(filepath.Join(d, "lock"))
		if err != nil {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
				os.RemoveAll(d) // died before taking its lock
			}
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			fmt.Fprintf(c.Log, "vmtest: removing stale %s\n", d)
			os.RemoveAll(d)
		}
		f.Close()
	}
}

// writeControl fills the directory the guest mounts as the "vmtest" share.
func writeControl(dir string, opts RunOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var argv bytes.Buffer
	for _, a := range opts.Command {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argument %q contains a NUL byte", a)
		}
		argv.WriteString(a)
		argv.WriteByte(0)
	}
	if err := os.WriteFile(filepath.Join(dir, "argv"), argv.Bytes(), 0o644); err != nil {
		return err
	}
	if opts.Share != "" {
		if err := os.WriteFile(filepath.Join(dir, "share"), nil, 0o644); err != nil {
			return err
		}
	}
	if len(opts.Forwards) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "net"), nil, 0o644); err != nil {
			return err
		}
	}
	if opts.ExpectReboot {
		if err := os.WriteFile(filepath.Join(dir, "expect-reboot"), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// qemuOpt escapes a value for qemu's comma-separated option syntax.
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// accelArgs picks the accelerator. TCG with -cpu max runs the same amd64
// kernel, just slower; thread=multi uses every host core.
func accelArgs(accel string) []string {
	if accel == "kvm" {
		return []string{"-accel", "kvm", "-cpu", "host"}
	}
	return []string{"-accel", "tcg,thread=multi", "-cpu", "max"}
}

// kernelCmdline: console on the first serial port (the log file), a panic or
// a reboot ends qemu (-no-reboot), and no interactive prompts.
const kernelCmdline = "console=ttyS0 root=/dev/vda rw panic=-1 edd=off loglevel=4 systemd.show_status=auto"

func qemuArgs(im *Image, accel string, opts RunOptions, v *vm, overlay, control string) []string {
	args := []string{
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-machine", "pc", "-smp", strconv.Itoa(opts.CPUs), "-m", strconv.Itoa(opts.MemoryMB),
	}
	args = append(args, accelArgs(accel)...)
	cmdline := kernelCmdline
	if accel != "kvm" {
		// TCG's TSC follows the host's clock and is consistent across
		// vCPUs, but slow vCPUs make the clocksource watchdog declare it
		// unstable, and the static-key flip that follows live-patches kernel
		// text. With two vCPUs, qemu 7.2's multi-threaded TCG can then run a
		// stale int3: about one boot in eight died with "Oops: int3" in
		// sched_clock_idle_wakeup_event. With tsc=reliable, 0 of 15 did;
		// Run still boots once more after a crash before the command started.
		cmdline += " tsc=reliable"
	}
	if len(opts.Forwards) > 0 {
		cmdline += " vmtest.ssh"
	}
	args = append(args,
		"-kernel", im.Kernel(), "-initrd", im.Initrd(), "-append", cmdline,
		// cache=unsafe: the overlay is deleted afterwards, so flushes are waste.
		"-drive", "file="+qemuOpt(overlay)+",format=qcow2,if=virtio,cache=unsafe,discard=unmap",
		"-chardev", "file,id=con,path="+qemuOpt(v.console), "-serial", "chardev:con",
		"-qmp", "unix:"+qemuOpt(v.qmp)+",server=on,wait=off",
		"-device", "virtio-rng-pci",
		"-virtfs", "local,path="+qemuOpt(control)+",mount_tag=vmtest,security_model=none,readonly=on",
		"-device", "virtio-serial-pci,id=vser",
	)
	for _, p := range []string{"stdout", "stderr", "status"} {
		args = append(args,
			"-chardev", "file,id="+p+",path="+qemuOpt(filepath.Join(v.dir, p)),
			"-device", "virtserialport,bus=vser.0,chardev="+p+",name=vmtest."+p)
	}
	if opts.Share != "" {
		args = append(args, "-virtfs", "local,path="+qemuOpt(opts.Share)+",mount_tag=share,security_model=none,readonly=on")
	}
	if len(opts.Forwards) > 0 {
		netdev := "user,id=net0,restrict=on"
		for _, f := range opts.Forwards {
			netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", f.HostPort, f.GuestPort)
		}
		// romfile= : no iPXE option ROM, we boot with -kernel.
		args = append(args, "-netdev", netdev, "-device", "virtio-net-pci,netdev=net0,romfile=")
	}
	return args
}

// vm is one qemu process and the files it writes.
type vm struct {
	dir     string // stdout, stderr, status files live here
	console string
	qmp     string
}

// run starts qemu, copies the command's output as it appears, and returns
// the command's exit code once qemu is gone.
func (v *vm) run(ctx context.Context, log io.Writer, args []string, opts RunOptions, res *Result) (code int, started bool, err error) {
	qemuLog := filepath.Join(v.dir, "qemu.log")
	ql, err := os.Create(qemuLog)
	if err != nil {
		return 0, false, err
	}
	defer ql.Close()
	cmd := exec.Command("qemu-system-x86_64", args...)
	cmd.Stdin = nil
	cmd.Stdout = ql
	cmd.Stderr = ql
	cmd.SysProcAttr = qemuAttr()
	fmt.Fprintf(log, "vmtest: $ qemu-system-x86_64 %s\n", strings.Join(args, " "))
	qemuStart := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, false, fmt.Errorf("starting qemu (apt-get install qemu-system-x86): %w", err)
	}
	pgid := cmd.Process.Pid
	kill := func() { syscall.Kill(-pgid, syscall.SIGKILL) }
	defer kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	streams := []*tail{
		{path: filepath.Join(v.dir, "stdout"), w: opts.Stdout},
		{path: filepath.Join(v.dir, "stderr"), w: opts.Stderr},
	}
	if opts.Console != nil {
		streams = append(streams, &tail{path: v.console, w: opts.Console})
	}
	status := &tail{path: filepath.Join(v.dir, "status")}
	defer func() {
		for _, t := range append(streams, status) {
			t.close()
		}
	}()

	var (
		cmdStart    time.Time
		exitCode    = -1
		lingerUntil time.Time // after the command ended, how long qemu may take to power off
		poweredDown bool
	)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var qemuErr error
		done := false
		select {
		case <-ctx.Done():
			kill()
			<-exited
			for _, t := range streams {
				t.pump()
			}
			return 0, !cmdStart.IsZero(), context.Cause(ctx)
		case qemuErr = <-exited:
			done = true
		case <-tick.C:
		}
		for _, t := range streams {
			t.pump()
		}
		for _, line := range status.lines() {
			switch {
			case line == "start":
				cmdStart = time.Now()
				res.Boot = cmdStart.Sub(qemuStart)
			case strings.HasPrefix(line, "exit "):
				n, err := strconv.Atoi(strings.TrimPrefix(line, "exit "))
				if err != nil {
					n = ExitHarness
				}
				exitCode = n
				if !cmdStart.IsZero() {
					res.Command = time.Since(cmdStart)
				}
				lingerUntil = time.Now().Add(30 * time.Second)
				if opts.ExpectReboot && n == 0 {
					// The guest stays up until its own reboot ends qemu.
					within := opts.RebootWithin
					if within <= 0 {
						within = 2 * time.Minute
					}
					lingerUntil = time.Now().Add(within + 25*time.Second)
				}
			}
		}
		if done {
			if exitCode >= 0 {
				return exitCode, true, nil
			}
			how := "qemu exited"
			if qemuErr != nil {
				how = "qemu: " + qemuErr.Error()
			}
			said := fileTail(qemuLog, 10)
			if said != "" {
				said = "; qemu said:\n" + said
			}
			return 0, !cmdStart.IsZero(), fmt.Errorf("guest stopped before the command finished (%s)%s\nlast console lines:\n%s",
				how, said, consoleExcerpt(v.console, 30))
		}
		// The guest powers itself off after the command; pressing the power
		// button covers one whose poweroff did not get through.
		if exitCode >= 0 && !poweredDown && time.Until(lingerUntil) < 25*time.Second {
			poweredDown = true
			if err := qmpPowerdown(v.qmp); err != nil {
				fmt.Fprintf(log, "vmtest: QMP system_powerdown: %v\n", err)
			}
		}
		if exitCode >= 0 && time.Now().After(lingerUntil) {
			fmt.Fprintln(log, "vmtest: guest did not power off within 30 s; killing qemu")
			kill()
			<-exited
			for _, t := range streams {
				t.pump()
			}
			return exitCode, true, nil
		}
	}
}

// tail follows a file qemu appends to (a chardev backend). A regular file
// read past EOF returns the data written since, so polling is enough.
type tail struct {
	path    string
	w       io.Writer
	f       *os.File
	partial []byte // for lines(): an unterminated last line
}

func (t *tail) read() []byte {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return nil
		}
		t.f = f
	}
	var out []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := t.f.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil || n == 0 {
			return out
		}
	}
}

func (t *tail) pump() {
	if b := t.read(); len(b) > 0 {
		t.w.Write(b)
	}
}

// lines returns the complete lines written since the last call.
func (t *tail) lines() []string {
	t.partial = append(t.partial, t.read()...)
	var out []string
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return out
		}
		out = append(out, strings.TrimSpace(string(t.partial[:i])))
		t.partial = t.partial[i+1:]
	}
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
}

// qmpPowerdown presses the virtual power button over QMP.
func qmpPowerdown(sock string) error {
	conn, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	dec := json.NewDecoder(r)
	var greeting map[string]any
	if err := dec.Decode(&greeting); err != nil {
		return fmt.Errorf("reading QMP greeting: %w", err)
	}
	for _, c := range []string{"qmp_capabilities", "system_powerdown"} {
		if _, err := fmt.Fprintf(conn, "{\"execute\":%q}\n", c); err != nil {
			return err
		}
		for { // skip asynchronous events until the reply
			var msg map[string]json.RawMessage
			if err := dec.Decode(&msg); err != nil {
				return fmt.Errorf("QMP %s: %w", c, err)
			}
			if e, ok := msg["error"]; ok {
				return fmt.Errorf("QMP %s: %s", c, e)
			}
			if _, ok := msg["return"]; ok {
				break
			}
		}
	}
	return nil
}

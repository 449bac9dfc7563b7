package vmtest

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PiRunOptions say what to run on an emulated board.
type PiRunOptions struct {
	// Files go into the guest's /share (the binaries and the test program),
	// keyed by their name there.
	Files map[string]string
	// Command runs from /share as root with stdin on the serial console
	// (the register handshake), e.g. "./pi.test -test.v".
	Command string
	// Timeout bounds one attempt, boot included; 0 means 10 minutes.
	Timeout time.Duration
	// BootStall and Stall are how long the console may stay silent before
	// the attempt is called stalled, before and after init started; 0 means
	// 90 s for both (the longest quiet phase seen after init, unpacking the
	// .deb on raspi0, takes about 11 s). A stalled attempt is killed and the
	// board booted again, up to piAttempts boots.
	BootStall, Stall time.Duration
	Console          io.Writer // the serial console as it is written; nil discards
}

// PiResult is what a run measured.
type PiResult struct {
	ExitCode int           // the command's; ExitTimeout/ExitHarness with an error
	Boot     time.Duration // qemu start to init
	Command  time.Duration // init to the command's exit
	Attempts int
	Reads    int // register reads the guest asked for
}

func (r *PiResult) String() string {
	return fmt.Sprintf("boot %.1fs, test %.1fs, %d register reads, %d attempt(s)", r.Boot.Seconds(), r.Command.Seconds(), r.Reads, r.Attempts)
}

// piTMP105MilliC is the temperature the host gives QEMU's TMP105 when the
// guest's init starts, in m°C (PI_TMP105_MILLIC in the guest): a value a
// 12-bit reading holds exactly.
const piTMP105MilliC = 23125

// errStalled marks an attempt whose console went silent.
var errStalled = errors.New("console silent: stalled")

// RunPi boots board with a fresh initramfs holding busybox, the kernel
// modules, opts.Files and an init that runs opts.Command, answers the
// guest's register reads over the console, and returns the command's exit
// status. The guest has no network device; QEMU's only other channel is a
// QMP socket in a private temporary directory.
func (c *PiCache) RunPi(ctx context.Context, b PiBoard, opts PiRunOptions) (*PiResult, error) {
	res := &PiResult{ExitCode: ExitHarness}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.BootStall <= 0 {
		opts.BootStall = 90 * time.Second
	}
	if opts.Stall <= 0 {
		opts.Stall = 90 * time.Second
	}
	if opts.Console == nil {
		opts.Console = io.Discard
	}
	bf, err := c.prepare(ctx, b)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "vmtest-pi-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	initrd := filepath.Join(dir, "initrd.gz")
	if err := buildPiInitramfs(ctx, initrd, bf, b, opts); err != nil {
		return res, fmt.Errorf("vmtest: %s initramfs: %w", b.Name, err)
	}
	for attempt := 1; attempt <= piAttempts; attempt++ {
		res.Attempts = attempt
		err = c.attempt(ctx, b, bf, initrd, dir, opts, res)
		if !errors.Is(err, errStalled) || ctx.Err() != nil {
			break
		}
		if attempt < piAttempts {
			fmt.Fprintf(c.Log, "vmtest: %v; booting once more\n", err)
		}
	}
	return res, err
}

// piAttempts bounds the boots of one board. raspi0's stalls (a lost timer
// tick: see its qemuArgs) ended with -icount; the bound stays for a stall of
// a kind not seen yet, so that two in a row do not fail CI.
const piAttempts = 3

var (
	xpAsk  = regexp.MustCompile(`PI-XP\? (0x[0-9a-fA-F]+)`)
	xpSaid = regexp.MustCompile(`^[0-9a-fA-F]+: (0x[0-9a-fA-F]+)`)
	exitRe = regexp.MustCompile(`PI-EXIT (\d+)`)
)

func (c *PiCache) attempt(ctx context.Context, b PiBoard, bf boardFiles, initrd, dir string, opts PiRunOptions, res *PiResult) error {
	ctx, cancel := context.WithTimeoutCause(ctx, opts.Timeout, ErrTimeout)
	defer cancel()
	sock := filepath.Join(dir, "qmp.sock")
	os.Remove(sock)
	cmdline := fmt.Sprintf("console=ttyAMA0 loglevel=4 rdinit=/init PI_BOARD=%s PI_GPIO_BASE=%#x PI_TMP105_MILLIC=%d", b.Name, b.GPIOBase, piTMP105MilliC)
	args := []string{
		"-M", b.Name, "-L", bf.biosDir,
		"-kernel", bf.kernel, "-dtb", bf.dtb, "-initrd", initrd, "-append", cmdline,
		"-display", "none", "-audio", "none", "-monitor", "none",
		"-serial", "stdio", "-no-reboot",
		"-qmp", "unix:" + qemuOpt(sock) + ",server=on,wait=off",
		// Linux's i2c-1 is QEMU's i2c-bus.1: a TMP105 (LM75 family) at 0x48.
		"-device", "tmp105,bus=i2c-bus.1,address=0x48,id=tmp105",
	}
	args = append(args, b.qemuArgs...)
	cmd := exec.Command(bf.qemu, args...)
	cmd.Env = append(os.Environ(), "QEMU_MODULE_DIR="+bf.moduleDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var qemuErr strings.Builder
	cmd.Stderr = &qemuErr
	fmt.Fprintf(c.Log, "vmtest: $ %s %s\n", bf.qemu, strings.Join(args, " "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	// kill ends qemu's process group, never after it was reaped: the
	// group's id could be another's by then.
	var reaped sync.Mutex
	gone := false
	kill := func() {
		reaped.Lock()
		defer reaped.Unlock()
		if !gone {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}

	var (
		mu       sync.Mutex
		last     = time.Now()
		initAt   time.Time
		exitCode = -1
		exitAt   time.Time
	)
	var afterExit *time.Timer // touched only by the console goroutine until it is done
	qmp := &qmpConn{sock: sock}
	defer qmp.close()
	consoleDone := make(chan error, 1)
	go func() {
		r := bufio.NewReader(stdout)
		var line []byte
		for {
			chunk := make([]byte, 4096)
			n, err := r.Read(chunk)
			if n > 0 {
				mu.Lock()
				last = time.Now()
				mu.Unlock()
				opts.Console.Write(chunk[:n])
				line = append(line, chunk[:n]...)
				for {
					i := strings.IndexByte(string(line), '\n')
					if i < 0 {
						break
					}
					l := string(line[:i])
					line = line[i+1:]
					switch {
					case strings.Contains(l, "PI-INIT"):
						mu.Lock()
						if initAt.IsZero() {
							initAt = time.Now()
						}
						mu.Unlock()
						// The TMP105 starts at 0 °C; a known other
						// value shows sensors_read decodes it.
						if _, err := qmp.execute("qom-set", map[string]any{"path": "/machine/peripheral/tmp105", "property": "temperature", "value": piTMP105MilliC}); err != nil {
							fmt.Fprintf(c.Log, "vmtest: %s: setting the TMP105's temperature: %v\n", b.Name, err)
						}
					case xpAsk.MatchString(l):
						addr := xpAsk.FindStringSubmatch(l)[1]
						val, err := qmp.readWord(addr)
						if err != nil {
							fmt.Fprintf(stdin, "PI-XP= %s error %s\n", addr, strings.ReplaceAll(err.Error(), "\n", " "))
						} else {
							fmt.Fprintf(stdin, "PI-XP= %s %s\n", addr, val)
						}
						res.Reads++
					case exitRe.MatchString(l):
						n, _ := strconv.Atoi(exitRe.FindStringSubmatch(l)[1])
						mu.Lock()
						exitCode, exitAt = n, time.Now()
						mu.Unlock()
						// arm64 kernels halt instead of powering off.
						afterExit = time.AfterFunc(10*time.Second, kill)
					}
				}
			}
			if err != nil {
				consoleDone <- err
				return
			}
		}
	}()
	waitDone := make(chan error, 1)
	go func() {
		<-consoleDone
		err := cmd.Wait()
		reaped.Lock()
		gone = true
		reaped.Unlock()
		waitDone <- err
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var why error
	for why == nil {
		select {
		case <-waitDone:
			why = io.EOF
		case <-ctx.Done():
			why = context.Cause(ctx)
		case <-tick.C:
			mu.Lock()
			silent, booted := time.Since(last), !initAt.IsZero()
			mu.Unlock()
			limit := opts.BootStall
			if booted {
				limit = opts.Stall
			}
			if silent > limit {
				c.logCPU(qmp, b.Name)
				why = fmt.Errorf("%w: no console output for %s (%s)", errStalled, silent.Round(time.Second), map[bool]string{false: "booting", true: "after init"}[booted])
			}
		}
	}
	kill()
	if why != io.EOF {
		<-waitDone // the console goroutine is done with opts.Console and res
	}
	if afterExit != nil {
		afterExit.Stop()
	}
	mu.Lock()
	defer mu.Unlock()
	if !initAt.IsZero() {
		res.Boot = initAt.Sub(start)
		res.Command = time.Since(initAt)
		if !exitAt.IsZero() {
			res.Command = exitAt.Sub(initAt)
		}
	}
	if exitCode >= 0 {
		res.ExitCode = exitCode
		return nil
	}
	if errors.Is(why, ErrTimeout) {
		res.ExitCode = ExitTimeout
		return fmt.Errorf("vmtest: %s: %w after %s", b.Name, why, opts.Timeout)
	}
	if why == io.EOF {
		return fmt.Errorf("vmtest: %s: qemu ended before the command said PI-EXIT: %s", b.Name, strings.TrimSpace(qemuErr.String()))
	}
	return fmt.Errorf("%s: %w", b.Name, why)
}

// logCPU records, for a stalled guest, where its CPU is, twice a second
// apart: a program counter that moves is a guest busy or waiting in a loop,
// one that stays is a guest stuck (or an emulator that stopped).
func (c *PiCache) logCPU(q *qmpConn, board string) {
	for i := 0; i < 2; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		raw, err := q.execute("human-monitor-command", map[string]string{"command-line": "info registers"})
		var out string
		if err == nil {
			err = json.Unmarshal(raw, &out)
		}
		if err != nil {
			fmt.Fprintf(c.Log, "vmtest: %s stalled; no registers: %v\n", board, err)
			return
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "PC") || strings.Contains(l, "R12=") || strings.Contains(l, "PSR") {
				fmt.Fprintf(c.Log, "vmtest: %s stalled: %s\n", board, strings.TrimSpace(l))
			}
		}
	}
}

// qmpConn is a lazily opened QMP connection for the monitor's xp command:
// the register values the silicon model holds, not what the guest says.
type qmpConn struct {
	mu   sync.Mutex // the console goroutine and the stall report share it
	sock string
	conn net.Conn
	dec  *json.Decoder
}

func (q *qmpConn) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn != nil {
		q.conn.Close()
	}
}

func (q *qmpConn) execute(cmd string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.executeLocked(cmd, args)
}

func (q *qmpConn) executeLocked(cmd string, args any) (json.RawMessage, error) {
	if q.conn == nil {
		conn, err := net.DialTimeout("unix", q.sock, 5*time.Second)
		if err != nil {
			return nil, err
		}
		q.conn, q.dec = conn, json.NewDecoder(conn)
		var greeting map[string]any
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if err := q.dec.Decode(&greeting); err != nil {
			q.close()
			q.conn = nil
			return nil, fmt.Errorf("QMP greeting: %w", err)
		}
		if _, err := q.executeLocked("qmp_capabilities", nil); err != nil {
			return nil, err
		}
	}
	q.conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	if err := json.NewEncoder(q.conn).Encode(req); err != nil {
		return nil, err
	}
	for {
		var msg map[string]json.RawMessage
		if err := q.dec.Decode(&msg); err != nil {
			return nil, fmt.Errorf("QMP %s: %w", cmd, err)
		}
		if e, ok := msg["error"]; ok {
			return nil, fmt.Errorf("QMP %s: %s", cmd, e)
		}
		if r, ok := msg["return"]; ok {
			return r, nil
		}
	}
}

// readWord returns the 32-bit word at a guest physical address as 0x…,
// from the monitor's `xp /1wx ADDR`.
func (q *qmpConn) readWord(addr string) (string, error) {
	raw, err := q.execute("human-monitor-command", map[string]string{"command-line": "xp /1wx " + addr})
	if err != nil {
		return "", err
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", err
	}
	return parseXP(out)
}

// parseXP takes "0000000020200034: 0x00020000\r\n" to "0x00020000".
func parseXP(out string) (string, error) {
	m := xpSaid.FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		return "", fmt.Errorf("xp said %q", out)
	}
	return m[1], nil
}

// piInit is the guest's /init: busybox, the kernel file systems, the
// modules, then the command with the console as its stdin.
const piInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp /root /sys/kernel/debug
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug
while read m; do insmod /lib/modules/$m || echo "PI-WARN insmod $m failed"; done < /lib/modules/load
hostname raspberrypi
ip link set lo up
echo "PI-INIT $(cat /proc/uptime)"
cd /share
%s < /dev/console
echo "PI-EXIT $?"
sync
poweroff -f
`

// buildPiInitramfs writes the board's initramfs: busybox, init, the
// modules of piModules that are modules, the /share files and an
// /etc/passwd with the agent's user.
func buildPiInitramfs(ctx context.Context, out string, bf boardFiles, b PiBoard, opts PiRunOptions) error {
	order, err := moduleLoadOrder(bf.modDir, b.modules)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	cw := &cpioWriter{w: zw}
	for _, d := range []string{".", "bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "etc", "lib", "lib/modules", "share", "run", "tmp", "root"} {
		cw.dir(d)
	}
	cw.charDev("dev/console", 5, 1)
	bb, err := os.ReadFile(bf.busybox)
	if err != nil {
		return err
	}
	cw.file("bin/busybox", 0o755, bb)
	cw.file("init", 0o755, []byte(fmt.Sprintf(piInit, opts.Command)))
	cw.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nraspi-mcp:x:999:999::/nonexistent:/bin/false\n"))
	cw.file("etc/group", 0o644, []byte("root:x:0:\nraspi-mcp:x:999:\ngpio:x:997:raspi-mcp\ni2c:x:998:raspi-mcp\n"))
	if err := cw.modules(ctx, bf.modDir, order); err != nil {
		return err
	}
	for _, name := range sortedFileNames(opts.Files) {
		data, err := os.ReadFile(opts.Files[name])
		if err != nil {
			return err
		}
		cw.file("share/"+name, 0o755, data)
	}
	cw.trailer()
	if cw.err != nil {
		return cw.err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func sortedFileNames(m map[string]string) []string {
	set := map[string]bool{}
	for k := range m {
		set[k] = true
	}
	return sortedKeys(set)
}

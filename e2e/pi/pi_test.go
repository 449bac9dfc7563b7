// Package pi is the emulated Raspberry Pi test. `make test-pi` builds this
// test binary and the two daemons for the board's architecture, boots QEMU's
// raspi0/raspi3b/raspi4b with Debian's own Pi kernel and device tree (see
// vmtest.PiBoards) and runs it there as /init's child, as root: it unpacks
// the board's .deb, then runs the helper as root and the agent as user
// raspi-mcp on the real board backend, driven over
// `raspi-mcp stdio`. GPIO effects are checked in QEMU's GPIO registers: the
// test prints "PI-XP? ADDR" on the serial console and the host answers with
// the word the monitor's `xp` reads there, so the verdict is what the silicon
// model saw, not what our code or the kernel says.
package pi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/e2e/mcpcall"
)

// board is what the guest knows about the emulated board, from the kernel
// command line vmtest writes (PI_BOARD, PI_GPIO_BASE reach init's
// environment).
type board struct {
	name     string
	gpioBase uint64
}

func guest(t *testing.T) board {
	t.Helper()
	name := os.Getenv("PI_BOARD")
	if name == "" {
		t.Skip("runs inside an emulated Raspberry Pi only: make test-pi")
	}
	base, err := strconv.ParseUint(os.Getenv("PI_GPIO_BASE"), 0, 64)
	if err != nil {
		t.Fatalf("PI_GPIO_BASE=%q: %v", os.Getenv("PI_GPIO_BASE"), err)
	}
	return board{name: name, gpioBase: base}
}

// models are the device tree model strings of Debian's DTBs.
var models = map[string]string{
	"raspi0":  "Raspberry Pi Zero",
	"raspi3b": "Raspberry Pi 3 Model B",
	"raspi4b": "Raspberry Pi 4 Model B",
}

// xp asks the host for the 32-bit word at physical address addr as QEMU's
// GPIO model holds it. stdin is the serial console; the host's answer is a
// line "PI-XP= ADDR VALUE" (the tty echoes it, which the host ignores).
func xp(t *testing.T, addr uint64) uint32 {
	t.Helper()
	want := fmt.Sprintf("%#x", addr)
	fmt.Printf("\nPI-XP? %s\n", want)
	var line []byte
	b := make([]byte, 1)
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); {
		n, err := os.Stdin.Read(b)
		if err != nil {
			t.Fatalf("reading the host's answer for %s: %v", want, err)
		}
		if n == 0 {
			continue
		}
		if b[0] != '\n' {
			line = append(line, b[0])
			continue
		}
		f := strings.Fields(string(line))
		line = line[:0]
		if len(f) >= 3 && f[0] == "PI-XP=" && f[1] == want {
			v, err := strconv.ParseUint(f[2], 0, 32)
			if err != nil {
				t.Fatalf("host could not read %s: %s", want, strings.Join(f[2:], " "))
			}
			return uint32(v)
		}
	}
	t.Fatalf("no answer from the host for %s", want)
	return 0
}

// BCM2835/BCM2711 GPIO registers, offsets from the GPIO block.
const (
	gpfsel0   = 0x00 // 3 bits a pin, 10 pins a register; 001 is output
	gplev0    = 0x34 // pin levels 0-31
	pupPdnCtl = 0xe4 // BCM2711 only: 2 bits a pin, 01 up, 10 down
)

func (b board) function(t *testing.T, pin int) uint32 {
	return xp(t, b.gpioBase+gpfsel0+uint64(4*(pin/10))) >> (3 * (pin % 10)) & 7
}

func (b board) level(t *testing.T, pin int) uint32 {
	return xp(t, b.gpioBase+gplev0) >> pin & 1
}

const hangGuard = 3 * time.Minute

// pkg is the board's raspi-mcp .deb, when make test-pi put one in /share.
const pkg = "/share/raspi-mcp.deb"

// outputs are the allowlisted output pins; 4 is an allowlisted input (its
// mainline line name is GPIO_GCLK, not GPIO4).
var outputs = []int{17, 27, 22}

type rig struct {
	dir, bin, cfg string
	cs            *mcp.ClientSession
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// start writes a config, starts the helper as root and the agent as
// raspi-mcp (uid 999 in the initramfs's /etc/passwd) and connects through
// `raspi-mcp stdio`.
func start(t *testing.T) *rig {
	t.Helper()
	r := &rig{dir: "/run/raspi-mcp-pi", bin: "/share"}
	// The package as built by make deb, unpacked where dpkg puts it. Its
	// maintainer scripts need systemd (sysusers, units), which this guest
	// has not: they do not run, and the test makes the user itself.
	if _, err := os.Stat(pkg); err == nil {
		run(t, "dpkg-deb", "-x", pkg, "/")
		r.bin = "/usr/bin"
	}
	const uid, gid = 999, 999
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(r.dir, uid, gid)
	r.cfg = filepath.Join(r.dir, "config.toml")
	pins := ""
	for _, p := range outputs {
		pins += fmt.Sprintf("  { pin = %d, name = \"out%d\", mode = \"output\", value = 0 },\n", p, p)
	}
	cfg := fmt.Sprintf(`[agent]
socket = "%[1]s/mcp.sock"
state = "%[1]s/state.db"
[helper]
socket = "%[1]s/helper.sock"
agent_user = "raspi-mcp"
state_dir = "/run/raspi-mcp-pi-helper"
[gpio]
writes = true
pins = [
%[2]s  { pin = 4, name = "button", mode = "input", pull = "none" },
]
[i2c]
writes = true
read = ["1:*"]
write = ["1:0x48"]
sensors = [{ name = "board", type = "tmp105", bus = 1, address = 0x48 }]
[metrics]
default_job = false
[system]
reboot = true # only dry runs: the guest has no logind, which the tools must say
`, r.dir, pins)
	if err := os.WriteFile(r.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon := func(cred *syscall.Credential, name string, args ...string) {
		cmd := exec.Command(filepath.Join(r.bin, name), args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	}
	daemon(nil, "raspi-mcp-helper", "--config", r.cfg)
	daemon(&syscall.Credential{Uid: uid, Gid: gid}, "raspi-mcp", "serve", "--config", r.cfg)
	r.cs = mcpcall.Stdio(t, filepath.Join(r.bin, "raspi-mcp"), r.cfg, "pitest", hangGuard)
	return r
}

func (r *rig) call(t *testing.T, name string, args map[string]any) (bool, map[string]any) {
	t.Helper()
	res, m := mcpcall.Call(t, r.cs, name, args)
	// Short: a slow serial console carries it all.
	s := fmt.Sprint(m)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	t.Logf("%s %v -> error=%v %s", name, args, res.IsError, s)
	return res.IsError, m
}

// hardware is system_get_capabilities' hardware part.
func hardware(t *testing.T, r *rig) map[string]any {
	t.Helper()
	_, m := r.call(t, "system_get_capabilities", map[string]any{})
	hw, _ := m["hardware"].(map[string]any)
	if hw == nil {
		t.Fatalf("capabilities without hardware: %v", m)
	}
	return hw
}

// TestBoard starts the daemons once (slow under emulation) and checks the
// board through them.
func TestBoard(t *testing.T) {
	b := guest(t)
	r := start(t)

	t.Run("installed from the package", func(t *testing.T) {
		if r.bin != "/usr/bin" {
			t.Skip("no " + pkg + ": the binaries run from /share")
		}
		for _, f := range []string{"/usr/bin/raspi-mcp", "/usr/bin/raspi-mcp-helper", "/usr/lib/raspi-mcp/raspi-mcp-stdio", "/etc/raspi-mcp/config.toml"} {
			if _, err := os.Stat(f); err != nil {
				t.Error(err)
			}
		}
		t.Logf("%s", run(t, "/usr/bin/raspi-mcp", "version"))
		// The packaged default configuration is valid on this board.
		t.Logf("%s", run(t, "/usr/bin/raspi-mcp", "config", "check", "/etc/raspi-mcp/config.toml"))
	})

	t.Run("identity", func(t *testing.T) {
		want := models[b.name]
		isErr, m := r.call(t, "system_get_capabilities", map[string]any{})
		dev, _ := m["device"].(map[string]any)
		if isErr || dev["is_raspberry_pi"] != true || !strings.HasPrefix(fmt.Sprint(dev["model"]), want) {
			t.Errorf("capabilities: want is_raspberry_pi and model %q: %v", want, dev)
		}
		isErr, m = r.call(t, "system_get_basic_info", map[string]any{})
		if isErr || !strings.HasPrefix(fmt.Sprint(m["model"]), want) {
			t.Errorf("basic info: want model %q: %v", want, m)
		}
		// Zeros are no identity (32-bit Debian kernels print them):
		// unknown, unless the device tree has the real values.
		for _, k := range []string{"serial", "revision"} {
			if v := fmt.Sprint(m[k]); v != "<nil>" && strings.Trim(v, "0") == "" {
				t.Errorf("%s %q: zeros reported as the board's", k, v)
			}
		}
		// The guest has no /etc/os-release: the line leaves the OS out
		// rather than printing an empty field.
		res, _ := mcpcall.Call(t, r.cs, "system_get_basic_info", map[string]any{})
		if line := mcpcall.Text(res); strings.Contains(line, ",  ,") || strings.Contains(line, ", ,") {
			t.Errorf("basics line with an empty field: %q", line)
		}
		// i2c_list_buses lists the device's buses, as capabilities
		// does, marking the allowlisted ones.
		var caps []int
		for _, b := range hardware(t, r)["i2c_buses"].([]any) {
			caps = append(caps, int(b.(float64)))
		}
		_, m = r.call(t, "i2c_list_buses", map[string]any{})
		var listed []int
		allowed := map[int]bool{}
		buses, _ := m["buses"].([]any)
		for _, b := range buses {
			b := b.(map[string]any)
			n := int(b["bus"].(float64))
			listed, allowed[n] = append(listed, n), b["allowed"] == true
		}
		if fmt.Sprint(listed) != fmt.Sprint(caps) || !allowed[1] {
			t.Errorf("i2c_list_buses %v, capabilities %v: want the same buses, bus 1 allowed", m, caps)
		}
	})

	t.Run("gpio writes reach the silicon", func(t *testing.T) {
		for _, pin := range outputs {
			if f := b.function(t, pin); f != 1 {
				t.Errorf("GPIO%d: function %03b after start, want 001 (output, safe state)", pin, f)
			}
			for _, v := range []string{"high", "low", "high", "low"} {
				if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": pin, "value": v, "reason": "pi"}); isErr {
					t.Fatalf("GPIO%d %s: %v", pin, v, m)
				}
				want := uint32(0)
				if v == "high" {
					want = 1
				}
				if got := b.level(t, pin); got != want {
					t.Errorf("GPIO%d written %s: GPLEV0 bit is %d", pin, v, got)
				}
			}
		}
		// A pin off the allowlist is refused and its register untouched.
		before := b.function(t, 5)
		if _, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}); mcpcall.Code(m) != "permission_denied" {
			t.Errorf("GPIO5 (not allowed) write: %v", m)
		}
		if after := b.function(t, 5); after != before {
			t.Errorf("GPIO5 function changed %03b -> %03b by a refused write", before, after)
		}
	})

	t.Run("pin names", func(t *testing.T) {
		// BCM 4 is GPIO_GCLK in the mainline device tree: reading it
		// works only if the backend maps BCM numbers through the
		// kernel's line names.
		if isErr, m := r.call(t, "gpio_read_pin", map[string]any{"pin": 4}); isErr {
			t.Errorf("GPIO4 (GPIO_GCLK) read: %v", m)
		}
		if f := b.function(t, 4); f != 0 {
			t.Errorf("GPIO4: function %03b, want 000 (input)", f)
		}
		dbg, err := os.ReadFile("/sys/kernel/debug/gpio")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"SDA1", "GPIO_GCLK", "GPIO17"} {
			if !strings.Contains(string(dbg), name) {
				t.Errorf("kernel's line names lack %s:\n%s", name, dbg)
			}
		}
		_, m := r.call(t, "gpio_list_pins", map[string]any{})
		pins, _ := m["pins"].([]any)
		if len(pins) < len(outputs)+1 {
			t.Errorf("gpio_list_pins: %v", m)
		}
	})

	t.Run("pulls", func(t *testing.T) {
		if b.name != "raspi4b" {
			t.Skip("QEMU's BCM2835 GPIO model keeps no pull state (GPPUD/GPPUDCLK are write-only there); only its BCM2711 has the pull register")
		}
		for _, c := range []struct {
			pull string
			bits uint32
		}{{"up", 1}, {"down", 2}, {"none", 0}} {
			if isErr, m := r.call(t, "gpio_configure_pin", map[string]any{"pin": 4, "mode": "input", "pull": c.pull, "confirm": true, "reason": "pi"}); isErr {
				t.Fatalf("pull %s: %v", c.pull, m)
			}
			if got := xp(t, b.gpioBase+pupPdnCtl) >> 8 & 3; got != c.bits {
				t.Errorf("GPIO4 pull %s: GPIO_PUP_PDN_CNTRL_REG0 bits %02b, want %02b", c.pull, got, c.bits)
			}
		}
	})

	t.Run("i2c against QEMU's TMP105", func(t *testing.T) {
		if b.name == "raspi4b" {
			// Measured: with QEMU 10.0.2's raspi4b and Debian's 6.1
			// arm64 kernel every i2c-bcm2835 transfer on fe804000
			// times out (the controller's interrupt never arrives), so
			// the bus shows no devices. raspi0 and raspi3b cover I2C.
			t.Skip("QEMU 10.0.2 raspi4b: i2c-bcm2835 transfers time out under Debian's 6.1 kernel")
		}
		_, m := r.call(t, "i2c_scan_bus", map[string]any{"bus": 1})
		if fmt.Sprint(m["addresses"]) != "[72]" {
			t.Fatalf("scan of bus 1: want the TMP105 at 0x48 only: %v", m)
		}
		// Configuration register (1): the resolution bits R1:R0 (0x60)
		// are read/write on a TMP105.
		if isErr, m := r.call(t, "i2c_write", map[string]any{"bus": 1, "address": 0x48, "register": 1, "data": []int{0x60}, "confirm": true, "reason": "pi"}); isErr {
			t.Fatalf("write: %v", m)
		}
		if _, m := r.call(t, "i2c_read", map[string]any{"bus": 1, "address": 0x48, "register": 1, "length": 1}); fmt.Sprint(m["data"]) != "[96]" {
			t.Errorf("config register read back: %v", m)
		}
		if isErr, m := r.call(t, "i2c_read", map[string]any{"bus": 1, "address": 0x48, "register": 0, "length": 2}); isErr {
			t.Errorf("temperature register: %v", m)
		}
		if _, m := r.call(t, "i2c_write", map[string]any{"bus": 1, "address": 0x49, "register": 1, "data": []int{1}, "confirm": true, "reason": "pi"}); mcpcall.Code(m) != "permission_denied" {
			t.Errorf("write to 0x49 (not allowed): %v", m)
		}
	})

	t.Run("throttling source", func(t *testing.T) {
		// What the kernel offers decides what the tools say: the
		// rpi_volt alarm (Debian's armel kernel) is under-voltage only,
		// nothing at all is "none", never "not throttled".
		want := "none"
		if names, _ := filepath.Glob("/sys/class/hwmon/hwmon*/name"); len(names) > 0 {
			for _, n := range names {
				if b, _ := os.ReadFile(n); strings.TrimSpace(string(b)) == "rpi_volt" {
					want = "hwmon rpi_volt"
				}
			}
		}
		_, m := r.call(t, "system_get_health_snapshot", map[string]any{})
		if got := fmt.Sprint(m["throttling_source"]); got != want {
			t.Errorf("throttling_source %q, want %q: %v", got, want, m)
		}
		if m["throttling_flags"] != nil {
			t.Errorf("throttling flags without a firmware source: %v", m["throttling_flags"])
		}
		if (m["under_voltage_now"] != nil) != (want == "hwmon rpi_volt") {
			t.Errorf("under_voltage_now %v with source %q", m["under_voltage_now"], want)
		}
		if got := fmt.Sprint(hardware(t, r)["throttle_source"]); got != want {
			t.Errorf("capabilities throttle_source %q, want %q", got, want)
		}
	})

	t.Run("power without logind", func(t *testing.T) {
		// No logind in the guest: the tools say so, not "unknown method".
		_, m := r.call(t, "system_reboot", map[string]any{"dry_run": true})
		if mcpcall.Code(m) != "failed_precondition" || !strings.Contains(fmt.Sprint(m), "systemd-logind") || strings.Contains(fmt.Sprint(m), "unknown method") {
			t.Errorf("reboot dry run without logind: %v", m)
		}
	})

	t.Run("sensor on QEMU's TMP105", func(t *testing.T) {
		if b.name == "raspi4b" {
			t.Skip("QEMU 10.0.2 raspi4b: i2c-bcm2835 transfers time out under Debian's 6.1 kernel")
		}
		// The host set the chip's temperature at init (vmtest).
		milli, err := strconv.Atoi(os.Getenv("PI_TMP105_MILLIC"))
		if err != nil {
			t.Fatalf("PI_TMP105_MILLIC=%q: %v", os.Getenv("PI_TMP105_MILLIC"), err)
		}
		want := float64(milli) / 1000
		isErr, m := r.call(t, "sensors_read", map[string]any{"name": "board"})
		got, ok := m["temperature_celsius"].(float64)
		// 0.5 °C: the chip's coarsest (9-bit) resolution.
		if isErr || !ok || got < want-0.5 || got > want || m["type"] != "tmp105" {
			t.Errorf("sensors_read: want %.3f °C (to 0.5 below) from the tmp105: %v", want, m)
		}
		if _, m := r.call(t, "sensors_read", map[string]any{"name": "nope"}); mcpcall.Code(m) != "not_found" {
			t.Errorf("unknown sensor: %v", m)
		}
	})

	t.Run("thermal source", func(t *testing.T) {
		_, m := r.call(t, "system_get_health_snapshot", map[string]any{})
		src := fmt.Sprint(m["temperature_source"])
		if b.name == "raspi4b" {
			// Debian's 6.1 arm64 kernel finds no BCM2711 thermal
			// sensor QEMU models: no thermal zone at all.
			t.Logf("raspi4b temperature source: %q", src)
			return
		}
		if !strings.Contains(src, "thermal_zone0") {
			t.Errorf("temperature source %q, want thermal_zone0: %v", src, m)
		}
	})

	t.Run("selftest", func(t *testing.T) {
		_, m := r.call(t, "selftest_run", map[string]any{})
		seen := map[string]map[string]any{}
		checks, _ := m["checks"].([]any)
		for _, c := range checks {
			c := c.(map[string]any)
			seen[fmt.Sprint(c["name"])] = c
		}
		// No systemd or logind in the initramfs: their rows fail or
		// warn. What the board itself decides must pass.
		for _, name := range []string{"helper", "helper_socket", "agent_socket", "gpio_pin_17", "gpio_pin_4"} {
			if seen[name]["status"] != "pass" {
				t.Errorf("%s: %v", name, seen[name])
			}
		}
		if d := fmt.Sprint(seen["logind"]["detail"]); !strings.HasPrefix(d, "logind not running") {
			t.Errorf("logind row: %v", seen["logind"])
		}
		// What a Pi owner pastes into an issue (docs/test-pi.md).
		out, _ := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "status", "--check", "--config", r.cfg).CombinedOutput()
		t.Logf("raspi-mcp status --check:\n%s", out)
	})
}

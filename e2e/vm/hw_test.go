// Package vm is the real-device test. `make test-vm` builds this test binary
// and the two daemons, boots a Debian VM with the kernel's gpio-sim and
// i2c-stub (see vmtest), and runs it there as root: the helper as root, the
// agent as user raspi-mcp, driven over `raspi-mcp stdio` by the Go SDK
// client, with every effect checked through the kernel, not through us.
package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/e2e/mcpcall"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// guest skips unless running inside the test VM.
func guest(t *testing.T) (sysfs string, bus int) {
	t.Helper()
	if os.Getenv("RASPI_MCP_VM_GUEST") != "1" {
		t.Skip("runs inside the test VM only: make test-vm")
	}
	sysfs = os.Getenv("GPIO_SIM_SYSFS")
	bus, err := strconv.Atoi(os.Getenv("I2C_STUB_BUS"))
	if sysfs == "" || err != nil {
		t.Fatalf("the VM did not set up gpio-sim and i2c-stub: GPIO_SIM_SYSFS=%q I2C_STUB_BUS=%q", sysfs, os.Getenv("I2C_STUB_BUS"))
	}
	return sysfs, bus
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func simValue(t *testing.T, sysfs string, line int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sysfs, fmt.Sprintf("sim_gpio%d", line), "value"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func setPull(t *testing.T, sysfs string, line int, pull string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(sysfs, fmt.Sprintf("sim_gpio%d", line), "pull"), []byte(pull), 0); err != nil {
		t.Fatal(err)
	}
}

// helperState is the helper's state directory in the VM tests.
const helperState = "/run/raspi-mcp-vmtest-helper"

type rig struct {
	dir, bin, cfg string
	cs            *mcp.ClientSession
}

// start installs nothing: it writes a config, starts the helper as root and
// the agent as raspi-mcp, and connects through `raspi-mcp stdio`.
func start(t *testing.T, bus int) *rig { return startWith(t, bus, "") }

// startWith adds extra TOML sections (not [gpio], [i2c] or [metrics]) to
// the config.
func startWith(t *testing.T, bus int, extra string) *rig {
	t.Helper()
	r := &rig{dir: "/run/raspi-mcp-vmtest", bin: os.Getenv("RASPI_MCP_BIN")}
	if r.bin == "" {
		r.bin = "/share"
	}
	if _, err := user.Lookup("raspi-mcp"); err != nil {
		run(t, "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "raspi-mcp")
	}
	u, _ := user.Lookup("raspi-mcp")
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	os.RemoveAll(r.dir)
	// The helper's audit witness, root's as in the package, and fresh per
	// test like the agent's state.db: a witness kept from an earlier test
	// would report this test's new trail as wiped.
	os.RemoveAll(helperState)
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(r.dir, uid, gid)
	r.cfg = filepath.Join(r.dir, "config.toml") // readable by the agent user
	cfg := fmt.Sprintf(`[agent]
socket = "%[1]s/mcp.sock"
state = "%[1]s/state.db"
[helper]
socket = "%[1]s/helper.sock"
agent_user = "raspi-mcp"
state_dir = "%[3]s"
[gpio]
writes = true
pins = [
  { pin = 17, name = "relay", mode = "output", value = 0 },
  { pin = 27, name = "led", mode = "output", value = 0 },
  { pin = 4, name = "button", mode = "input", pull = "none" },
]
[i2c]
writes = true
read = ["%[2]d:*"]
write = ["%[2]d:0x48"]
[metrics]
default_job = false
`, r.dir, bus, helperState) + extra
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
	waitFile(t, filepath.Join(r.dir, "helper.sock"))
	// As the package will: the agent reads the journal as a member of
	// systemd-journal.
	var groups []uint32
	if g, err := user.LookupGroup("systemd-journal"); err == nil {
		n, _ := strconv.Atoi(g.Gid)
		groups = append(groups, uint32(n))
	}
	daemon(&syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}, "raspi-mcp", "serve", "--config", r.cfg)
	r.cs = mcpcall.Stdio(t, filepath.Join(r.bin, "raspi-mcp"), r.cfg, "vmtest", hangGuard)
	return r
}

// hangGuard bounds waits for what must happen. Under software emulation
// (TCG) on a busy host the guest runs many times slower than real hardware,
// so it is long, and no verdict may depend on how fast something happens.
const hangGuard = 3 * time.Minute

func waitFile(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", p)
}

func (r *rig) call(t *testing.T, name string, args map[string]any) (bool, map[string]any) {
	t.Helper()
	res, m := mcpcall.Call(t, r.cs, name, args)
	return res.IsError, m
}

func errCode(m map[string]any) string { return mcpcall.Code(m) }

// helperDirect bypasses the agent: root may talk to the helper, whose own
// allowlists must still refuse.
func (r *rig) helperDirect() *client.Client {
	return client.New(client.Options{Socket: filepath.Join(r.dir, "helper.sock"), ClientName: "vmtest/bypass", DialTimeout: hangGuard / 2})
}

func TestGPIOOnGPIOSim(t *testing.T) {
	sysfs, bus := guest(t)
	r := start(t, bus)
	if v := simValue(t, sysfs, 17); v != "0" {
		t.Fatalf("safe state not applied: GPIO17 reads %s", v)
	}
	if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "vm"}); isErr {
		t.Fatalf("write: %v", m)
	}
	if v := simValue(t, sysfs, 17); v != "1" {
		t.Fatalf("the kernel sees GPIO17 = %s after writing high", v)
	}
	// Lease: high, then back by itself. A long lease first, so the check
	// that the kernel sees high cannot race the revert on a slow guest;
	// renewing it to 500 ms keeps its original revert value.
	if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 27, "value": "high", "duration_ms": 600000}); isErr || simValue(t, sysfs, 27) != "1" {
		t.Fatalf("lease write: %v", m)
	}
	if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 27, "value": "high", "duration_ms": 500}); isErr || m["revert_to"] != "low" {
		t.Fatalf("lease renewal: %v", m)
	}
	deadline := time.Now().Add(hangGuard)
	for simValue(t, sysfs, 27) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("lease did not revert in the kernel")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Inputs read what the outside world drives.
	for pull, want := range map[string]string{"pull-up": "high", "pull-down": "low"} {
		setPull(t, sysfs, 4, pull)
		if _, m := r.call(t, "gpio_read_pin", map[string]any{"pin": 4}); m["value"] != want {
			t.Fatalf("%s: read %v", pull, m)
		}
	}
	// Outside the allowlist: refused by the agent, and by the helper when bypassed.
	before := simValue(t, sysfs, 5)
	if _, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"}); errCode(m) != "permission_denied" {
		t.Fatalf("agent let pin 5 through: %v", m)
	}
	hc := r.helperDirect()
	defer hc.Close()
	_, err := client.Call(context.Background(), hc, proto.GPIOWrite, proto.GPIOWriteReq{Pin: 5, Value: 1})
	if proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Fatalf("helper let pin 5 through: %v", err)
	}
	if simValue(t, sysfs, 5) != before {
		t.Fatal("GPIO5 changed")
	}

	// The round trip a client sees: MCP over stdio -> agent -> helper -> kernel.
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		v := []string{"low", "high"}[i%2]
		t0 := time.Now()
		if isErr, m := r.call(t, "gpio_write_pin", map[string]any{"pin": 17, "value": v}); isErr {
			t.Fatal(m)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("BENCH gpio_write_pin round trip in the VM: p50 %s p99 %s (n=%d)\n", lat[len(lat)/2], lat[len(lat)*99/100], len(lat))

	out, err := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "audit", "verify", "--config", r.cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("audit verify: %v %s", err, out)
	}
}

func TestI2COnI2CStub(t *testing.T) {
	_, bus := guest(t)
	r := start(t, bus)
	b := strconv.Itoa(bus)
	_, m := r.call(t, "i2c_scan_bus", map[string]any{"bus": bus})
	if fmt.Sprint(m["addresses"]) != "[72 118]" {
		t.Fatalf("scan of the stub: %v", m)
	}
	if isErr, m := r.call(t, "i2c_write", map[string]any{"bus": bus, "address": 0x48, "register": 0x10, "data": []int{0xab}, "confirm": true, "reason": "vm"}); isErr {
		t.Fatalf("write: %v", m)
	}
	if got := run(t, "i2cget", "-y", b, "0x48", "0x10"); got != "0xab" {
		t.Fatalf("the kernel reads %s at 0x48/0x10", got)
	}
	run(t, "i2cset", "-y", b, "0x76", "0x20", "0x5a")
	if _, m := r.call(t, "i2c_read", map[string]any{"bus": bus, "address": 0x76, "register": 0x20, "length": 1}); fmt.Sprint(m["data"]) != "[90]" {
		t.Fatalf("read: %v", m)
	}
	// 0x76 is readable but not writable: refused by the agent and by the helper.
	before := run(t, "i2cget", "-y", b, "0x76", "0x20")
	if _, m := r.call(t, "i2c_write", map[string]any{"bus": bus, "address": 0x76, "register": 0x20, "data": []int{1}, "confirm": true, "reason": "vm"}); errCode(m) != "permission_denied" {
		t.Fatalf("agent let a write to 0x76 through: %v", m)
	}
	hc := r.helperDirect()
	defer hc.Close()
	reg := 0x20
	_, err := client.Call(context.Background(), hc, proto.I2CWrite, proto.I2CWriteReq{Bus: bus, Address: 0x76, Register: &reg, Data: []int{1}})
	if proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Fatalf("helper let a write to 0x76 through: %v", err)
	}
	if got := run(t, "i2cget", "-y", b, "0x76", "0x20"); got != before {
		t.Fatalf("0x76/0x20 changed: %s -> %s", before, got)
	}
}

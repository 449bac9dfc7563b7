package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A configured pin that another process holds in the kernel (gpioset on
// gpio-sim, started before the helper) fails selftest_run with the holder's
// name and how to find it, and `raspi-mcp status --check` exits 2 saying so;
// the pins the helper holds pass.
func TestSelftestHeldPinOnGPIOSim(t *testing.T) {
	sysfs, bus := guest(t)
	chip := strings.TrimPrefix(os.Getenv("GPIO_SIM_CHIP"), "/dev/") // gpioset -c takes the name, as vmtest/selftest/check.sh does
	if chip == "" {
		t.Fatal("the VM did not set GPIO_SIM_CHIP")
	}
	hold := exec.Command("gpioset", "-c", chip, "-C", "vmtest-holder", "GPIO27=1")
	hold.Stderr = os.Stderr
	hold.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Process.Kill(); _ = hold.Wait() })
	deadline := time.Now().Add(hangGuard) // gpioset starts when the guest gets to it
	for simValue(t, sysfs, 27) != "1" {
		if time.Now().After(deadline) {
			t.Fatal("gpioset never drove GPIO27")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := start(t, bus)
	isErr, m := r.call(t, "selftest_run", map[string]any{})
	if isErr || m["status"] != "fail" {
		t.Fatalf("selftest_run: %v", m)
	}
	seen := map[string]map[string]any{}
	for _, c := range m["checks"].([]any) {
		c := c.(map[string]any)
		seen[c["name"].(string)] = c
	}
	p27 := seen["gpio_pin_27"]
	if p27["status"] != "fail" || !strings.Contains(p27["detail"].(string), `"vmtest-holder"`) || !strings.Contains(p27["fix_hint"].(string), "gpioinfo") {
		t.Fatalf("gpio_pin_27: %v", p27)
	}
	// The held pin is the only failure this test causes. systemd's row lists
	// every unit over D-Bus within the check's bound, which an emulated VM on
	// a busy host may not make: it is checked on the simulated board instead.
	for _, name := range []string{"helper", "helper_socket", "agent_socket", "gpio_pin_17", "gpio_pin_4", "audit_chain", "logind"} {
		if seen[name]["status"] != "pass" {
			t.Errorf("%s: %v", name, seen[name])
		}
	}
	out, err := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "status", "--check", "--config", r.cfg).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "FAIL  gpio_pin_27") || !strings.Contains(string(out), "fix: another process holds") {
		t.Fatalf("status --check: %v\n%s", err, out)
	}
}

package vm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/e2e/mcpcall"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// approveConfig wires the approval button to gpio-sim's GPIO26 (to ground,
// pulled up) with its LED on GPIO21, allows a shutdown, and keeps the
// safety floor at 10 minutes.
const approveConfig = `
[system]
shutdown = true
min_power_interval = "10m"
[guard]
approval_timeout = "30s"
[guard.button]
pin = 26
pull = "up"
active_low = true
debounce = "10ms"
long_press = "1s"
led = 21
`

// button is the gpio-sim line under the approval button.
type button struct {
	t     *testing.T
	sysfs string
	r     *rig
}

func (b button) pull(p string) {
	b.t.Helper()
	if err := os.WriteFile(filepath.Join(b.sysfs, "sim_gpio26", "pull"), []byte(p), 0); err != nil {
		b.t.Error(err)
	}
}

// waiting blocks until the helper waits for the button, as the person
// waits for the LED to blink, and returns the LED values seen while it
// watched the line for a while.
func (b button) waiting() map[string]bool {
	c := b.r.helperDirect()
	defer c.Close()
	deadline := time.Now().Add(hangGuard)
	for {
		st, err := client.Call(context.Background(), c, proto.ButtonStatus, proto.ButtonStatusReq{})
		if err == nil && st.Waiting {
			break
		}
		if time.Now().After(deadline) {
			b.t.Errorf("the helper never waited for the button: %+v %v", st, err)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]bool{}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if v, err := os.ReadFile(filepath.Join(b.sysfs, "sim_gpio21", "value")); err == nil {
			seen[strings.TrimSpace(string(v))] = true
		}
	}
	return seen
}

// press holds the button down for hold once a call waits for it.
func (b button) press(hold time.Duration) map[string]bool {
	led := b.waiting()
	b.pull("pull-down")
	time.Sleep(hold)
	b.pull("pull-up")
	return led
}

// TestDeviceApprovalOnGPIOSim is issue 30's proof on real parts: the root
// helper holds the button on the kernel's GPIO character device, the agent
// runs as raspi-mcp, the client comes through `raspi-mcp stdio`, logind
// schedules the shutdown, and `raspi-mcp approve` runs as root.
func TestDeviceApprovalOnGPIOSim(t *testing.T) {
	sysfs, bus := guest(t)
	logindUp(t)
	btn := button{t: t, sysfs: sysfs}
	btn.pull("pull-up") // released before the helper takes the line
	t.Cleanup(func() { btn.pull("pull-down") })
	r := startWith(t, bus, approveConfig)
	btn.r = r
	audits := func() int {
		out := run(t, filepath.Join(r.bin, "raspi-mcp"), "audit", "verify", "--config", r.cfg)
		var n int
		fmt.Sscanf(out[strings.Index(out, "intact: ")+len("intact: "):], "%d", &n)
		return n
	}
	shutdown := map[string]any{"delay_seconds": 600, "reason": "vm: approval test"}

	// A press: scheduled, and the LED blinked while the call waited.
	led := make(chan map[string]bool, 1)
	go func() { led <- btn.press(150 * time.Millisecond) }()
	isErr, m := r.call(t, "system_shutdown", shutdown)
	seen := <-led
	if isErr || m["scheduled"] != true || !strings.Contains(scheduled(t), "poweroff") {
		t.Fatalf("pressed: %v; logind has %q", m, scheduled(t))
	}
	if !seen["0"] || !seen["1"] {
		t.Errorf("the LED line did not blink while the call waited: saw %v", seen)
	}
	if _, m := r.call(t, "system_cancel_scheduled_power_action", map[string]any{}); m["cancelled"] != true {
		t.Fatalf("cancel: %v", m)
	}
	n := audits()

	// A long press: declined, nothing scheduled, one record.
	go btn.press(2 * time.Second)
	isErr, m = r.call(t, "system_shutdown", map[string]any{"delay_seconds": 600, "reason": "vm: approval test", "force": true})
	if !isErr || errCode(m) != "permission_denied" || strings.Contains(scheduled(t), "poweroff") || audits() != n+1 {
		t.Fatalf("long press: %v; logind has %q; %d records after %d", m, scheduled(t), audits(), n)
	}

	// No press: refused after approval_timeout.
	isErr, m = r.call(t, "system_shutdown", shutdown)
	if !isErr || !strings.Contains(fmt.Sprint(m), "timeout") || strings.Contains(scheduled(t), "poweroff") || audits() != n+2 {
		t.Fatalf("no press: %v; logind has %q", m, scheduled(t))
	}

	// Turning a switch on widens a power. A change token alone is refused
	// (nobody at the Pi: the wait times out) and changes nothing.
	dropIn := filepath.Join(r.dir, "config.d", "50-mcp.toml")
	if isErr, m := r.applyConfig(t, "[i2c]\nwrites = false\n[service]\ncontrol = true\nallow = [\"ssh.service\"]\n"); !isErr || !strings.Contains(fmt.Sprint(m), "not approved on the device") {
		t.Fatalf("a widening apply by change token alone: %v", m)
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("a refused apply wrote the drop-in")
	}
	// A client whose person (or the client itself) accepts: refused too.
	yes := mcp.NewClient(&mcp.Implementation{Name: "vmtest-yes", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
	ycs, err := yes.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(filepath.Join(r.bin, "raspi-mcp"), "stdio", "--config", r.cfg)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ycs.Close()
	res, ym := mcpcall.Call(t, ycs, "manage_config_apply", map[string]any{"toml": "[service]\ncontrol = true\nallow = [\"ssh.service\"]\n", "reason": "vm"})
	if !res.IsError || !strings.Contains(fmt.Sprint(ym), "not approved on the device") {
		t.Fatalf("a widening apply approved by elicitation alone: %v", ym)
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("a refused apply wrote the drop-in")
	}
	// A lowered safety floor, likewise.
	if isErr, m := r.applyConfig(t, "[system]\nmin_power_interval = \"0s\"\n"); !isErr {
		t.Fatalf("a lowered floor: %v", m)
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Fatal("a refused floor wrote the drop-in")
	}
	// Root at the console approves the same apply: it is written.
	console := make(chan string, 1)
	go func() {
		cmd := exec.Command(filepath.Join(r.bin, "raspi-mcp"), "approve", "--wait", "3m", "--config", r.cfg)
		cmd.Stdin = strings.NewReader("y\n")
		out, err := cmd.CombinedOutput()
		console <- fmt.Sprintf("%s%v", out, err)
	}()
	isErr, m = r.applyConfig(t, "[service]\ncontrol = true\nallow = [\"ssh.service\"]\n")
	out := <-console
	if isErr || !strings.Contains(out, "manage_config_apply") || !strings.Contains(out, "approved") {
		t.Fatalf("approved at the console: %v\nconsole:\n%s", m, out)
	}
	if b, err := os.ReadFile(dropIn); err != nil || !strings.Contains(string(b), "ssh.service") {
		t.Fatalf("the drop-in after the approval: %q %v", b, err)
	}
	tail := run(t, filepath.Join(r.bin, "raspi-mcp"), "audit", "tail", "-n", "20", "--config", r.cfg)
	for _, want := range []string{"button", "console:root"} {
		if !strings.Contains(tail, want) {
			t.Errorf("the audit tail does not name channel %s:\n%s", want, tail)
		}
	}
}

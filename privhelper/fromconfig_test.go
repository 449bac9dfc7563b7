package privhelper_test

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// optionsFrom is OptionsFromConfig on the laptop config with mod applied.
func optionsFrom(t *testing.T, mod func(*config.Config), b privhelper.Backends) (config.Config, privhelper.Options) {
	t.Helper()
	cfg := config.Laptop(t.TempDir(), strconv.Itoa(agentUID()))
	if mod != nil {
		mod(&cfg)
	}
	o, err := privhelper.OptionsFromConfig(&cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, o
}

// Reboot and poweroff need both their own switch and [system] enabled: with
// either off the helper refuses the action, whatever the agent asks.
func TestOptionsFromConfigPowerSwitches(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		enabled, reboot, shutdown bool
		wantReboot, wantPoweroff  bool
	}{
		{"all on", true, true, true, true, true},
		{"domain off", false, true, true, false, false},
		{"reboot only", true, true, false, true, false},
		{"shutdown only", true, false, true, false, true},
		{"all off", false, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, o := optionsFrom(t, func(c *config.Config) {
				c.System.Enabled, c.System.Reboot, c.System.Shutdown = tc.enabled, tc.reboot, tc.shutdown
			}, privhelper.Backends{})
			if o.Policy.Allows(config.SwitchSystemReboot) != tc.wantReboot || o.Policy.Allows(config.SwitchSystemShutdown) != tc.wantPoweroff {
				t.Fatalf("policy %+v, want reboot %v poweroff %v", o.Policy.Config.System, tc.wantReboot, tc.wantPoweroff)
			}
			o.Power = nil // startHelperWith records into its own sim
			h := startHelperWith(t, sockIn(t), o)
			c := newClient(t, h.sock)
			for action, allowed := range map[string]bool{proto.ActionReboot: tc.wantReboot, proto.ActionPoweroff: tc.wantPoweroff} {
				_, err := client.Call(context.Background(), c, proto.PowerSchedule, proto.PowerScheduleReq{Action: action, DelaySeconds: 600})
				if allowed && err != nil {
					t.Errorf("%s: %v", action, err)
				}
				if !allowed {
					protoErr(t, err, proto.CodePermissionDenied)
				}
			}
			if want := btoi(tc.wantReboot) + btoi(tc.wantPoweroff); len(h.sim.Events()) != want {
				t.Fatalf("power events %+v, want %d", h.sim.Events(), want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The allowlists and rules are the config's, unchanged, and the agent's
// user is the one [helper] agent_user names.
func TestOptionsFromConfigCarriesAllowlists(t *testing.T) {
	cfg, o := optionsFrom(t, func(c *config.Config) {
		c.I2C.Write = []string{"1:0x50"}
		c.Service.Allow = []string{"nginx", "motion*"}
		c.Process.AllowedSignals = []string{"TERM"}
	}, privhelper.Backends{Backend: "sim", Version: "9.9"})
	if o.Policy.AgentUID != agentUID() {
		t.Errorf("agent uid %d, want %d", o.Policy.AgentUID, agentUID())
	}
	if !reflect.DeepEqual(o.Policy.Config, cfg) {
		t.Errorf("policy's config\n got %+v\nwant %+v", o.Policy.Config, cfg)
	}
	if o.Backend != "sim" || o.Version != "9.9" {
		t.Errorf("backend %q version %q: the backends' facts must pass through", o.Backend, o.Version)
	}
	if o.Hardware.Camera != nil {
		t.Error("a camera without a camera backend")
	}
	_, o = optionsFrom(t, nil, privhelper.Backends{Camera: camsim.New(t.TempDir())})
	if o.Hardware.Camera == nil {
		t.Error("the camera backend is not served")
	}
}

// Protected users are resolved through the accounts the backends name (the
// simulated board's own in laptop mode); a name with no account is
// skipped, and the names are kept for the refusal's message.
func TestOptionsFromConfigProtectedUsers(t *testing.T) {
	board := map[string]int{"root": 0, "pi": 1000, "www-data": 33}
	_, o := optionsFrom(t, func(c *config.Config) { c.Process.ProtectedUsers = []string{"root", "nobody-here", "www-data"} },
		privhelper.Backends{Accounts: func(name string) (int, bool) { uid, ok := board[name]; return uid, ok }})
	if want := []int{0, 33}; !slices.Equal(o.Policy.ProtectedUIDs, want) {
		t.Errorf("protected uids %v, want %v", o.Policy.ProtectedUIDs, want)
	}
	if want := []string{"root", "nobody-here", "www-data"}; !slices.Equal(o.Policy.Config.Process.ProtectedUsers, want) {
		t.Errorf("protected names %v, want %v", o.Policy.Config.Process.ProtectedUsers, want)
	}

	// Without Accounts, this system's: root is uid 0 everywhere, and a
	// numeric name is its own uid.
	_, o = optionsFrom(t, func(c *config.Config) { c.Process.ProtectedUsers = []string{"root", "4242"} }, privhelper.Backends{})
	if want := []int{0, 4242}; !slices.Equal(o.Policy.ProtectedUIDs, want) {
		t.Errorf("system lookup: protected uids %v, want %v", o.Policy.ProtectedUIDs, want)
	}
}

// An agent user that does not exist is an error, not a helper that lets
// nobody (or root only) in without saying why.
func TestOptionsFromConfigUnknownAgentUser(t *testing.T) {
	cfg := config.Laptop(t.TempDir(), "no-such-user-raspi-mcp")
	if _, err := privhelper.OptionsFromConfig(&cfg, privhelper.Backends{}); err == nil {
		t.Fatal("an unknown agent user was accepted")
	}
	cfg.Helper.AgentUser = "-5"
	if _, err := privhelper.OptionsFromConfig(&cfg, privhelper.Backends{}); err == nil {
		t.Fatal("a negative uid was accepted")
	}
}

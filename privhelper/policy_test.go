package privhelper

import (
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

func TestPolicyAllowsPeer(t *testing.T) {
	p := Policy{AgentUID: 1000}
	for uid, want := range map[int]bool{0: true, 1000: true, 1001: false, 65534: false, -1: false} {
		if got := p.allowsPeer(uid); got != want {
			t.Errorf("allowsPeer(%d) = %v, want %v", uid, got, want)
		}
	}
	// The zero Policy lets only root in.
	var zero Policy
	if zero.allowsPeer(1000) || !zero.allowsPeer(0) {
		t.Error("zero Policy")
	}
}

// A power action is allowed by its own [system] switch with [system]
// enabled on, and an action the helper does not know by none.
func TestPolicyAllowsPower(t *testing.T) {
	policy := func(enabled, reboot, shutdown bool) Policy {
		var p Policy
		p.Config.System.Enabled, p.Config.System.Reboot, p.Config.System.Shutdown = enabled, reboot, shutdown
		return p
	}
	allows := func(p Policy, action string) bool {
		sw := powerSwitch(action)
		return sw != config.NoSwitch && p.Allows(sw)
	}
	tests := []struct {
		p      Policy
		action string
		want   bool
	}{
		{policy(true, true, false), proto.ActionReboot, true},
		{policy(true, true, false), proto.ActionPoweroff, false},
		{policy(true, false, true), proto.ActionPoweroff, true},
		{policy(true, false, true), proto.ActionReboot, false},
		{policy(false, true, true), proto.ActionReboot, false},
		{policy(false, true, true), proto.ActionPoweroff, false},
		{policy(true, true, true), "halt", false},
		{policy(true, true, true), "", false},
	}
	for _, tc := range tests {
		if got := allows(tc.p, tc.action); got != tc.want {
			t.Errorf("%+v allows %q = %v, want %v", tc.p.Config.System, tc.action, got, tc.want)
		}
	}
}

func TestHandleRejectsDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering a method twice did not panic")
		}
	}()
	s := NewServer(Options{})
	handle(s.mux, proto.Status, s.status)
}

func TestClip(t *testing.T) {
	if clip("short") != "short" {
		t.Fatal("clip changed a short name")
	}
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'a'
	}
	if got := clip(string(long)); len(got) > maxEchoedName+len("…") {
		t.Fatalf("clip left %d bytes", len(got))
	}
}

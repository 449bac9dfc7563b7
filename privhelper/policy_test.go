package privhelper

import (
	"testing"

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
	if (Policy{}).allowsPeer(1000) || !(Policy{}).allowsPeer(0) {
		t.Error("zero Policy")
	}
}

func TestPolicyAllowsPower(t *testing.T) {
	tests := []struct {
		p      Policy
		action string
		want   bool
	}{
		{Policy{Reboot: true}, proto.ActionReboot, true},
		{Policy{Reboot: true}, proto.ActionPoweroff, false},
		{Policy{Poweroff: true}, proto.ActionPoweroff, true},
		{Policy{Poweroff: true}, proto.ActionReboot, false},
		{Policy{Reboot: true, Poweroff: true}, "halt", false},
		{Policy{Reboot: true, Poweroff: true}, "", false},
	}
	for _, tc := range tests {
		if got := tc.p.allowsPower(tc.action); got != tc.want {
			t.Errorf("%+v.allowsPower(%q) = %v, want %v", tc.p, tc.action, got, tc.want)
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

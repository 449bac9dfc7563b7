package privhelper_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// fakeOps records what reached the backends: a refusal must reach nothing.
type fakeOps struct {
	mu         sync.Mutex
	controls   []string
	enables    []string
	signals    []string
	dependents []string
	procs      map[int]privhelper.ProcIdentity
}

func (f *fakeOps) ops() privhelper.Ops {
	return privhelper.Ops{Units: fakeUnits{f}, Processes: fakeProcs{f}}
}

type fakeUnits struct{ f *fakeOps }

func (u fakeUnits) ActiveDependents(context.Context, string) ([]string, error) {
	return u.f.dependents, nil
}
func (u fakeUnits) Control(_ context.Context, unit, action string) (proto.ServiceControlResp, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	u.f.controls = append(u.f.controls, action+" "+unit)
	return proto.ServiceControlResp{Unit: unit, Action: action, Job: "done"}, nil
}
func (u fakeUnits) SetEnabled(_ context.Context, unit string, on bool) (proto.ServiceEnableResp, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	u.f.enables = append(u.f.enables, unit)
	return proto.ServiceEnableResp{Unit: unit, Before: "disabled", After: "enabled"}, nil
}

type fakeProcs struct{ f *fakeOps }

func (p fakeProcs) Identify(pid int) (privhelper.ProcIdentity, error) {
	id, ok := p.f.procs[pid]
	if !ok {
		return id, proto.Errorf(proto.CodeNotFound, "no process %d", pid)
	}
	return id, nil
}
func (p fakeProcs) Signal(pid int, _ uint64, sig string) error {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	p.f.signals = append(p.f.signals, sig)
	return nil
}

// opsPolicy is defaultPolicy with service control and signals on.
func opsPolicy() privhelper.Policy {
	p := defaultPolicy()
	p.Config.Service = config.Service{Enabled: true, Control: true, Allow: []string{"nginx", "motion*"}}
	p.Config.Process = config.Process{Enabled: true, Signals: true, AllowedSignals: []string{"TERM", "HUP"}, ProtectedUsers: []string{"root"}}
	p.ProtectedUIDs = []int{0}
	return p
}

func TestHelperRefusesUnitsOutsideItsAllowList(t *testing.T) {
	f := &fakeOps{}
	pol := opsPolicy()
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Ops: f.ops()})
	c := newClient(t, h.sock)
	ctx := context.Background()
	for _, req := range []proto.ServiceControlReq{
		{Unit: "ssh.service", Action: "stop"},
		{Unit: "nginx.socket", Action: "stop"},
		{Unit: "-h.service", Action: "stop"},
		{Unit: "nginx.service", Action: "explode"},
	} {
		if _, err := client.Call(ctx, c, proto.ServiceControl, req); err == nil {
			t.Errorf("%+v accepted", req)
		}
	}
	if _, err := client.Call(ctx, c, proto.ServiceEnable, proto.ServiceEnableReq{Unit: "ssh.service", Enabled: true}); proto.CodeOf(err) != proto.CodePermissionDenied {
		t.Errorf("enable ssh: %v", err)
	}
	if len(f.controls)+len(f.enables) != 0 {
		t.Fatalf("refused requests reached systemd: %v %v", f.controls, f.enables)
	}
	f.dependents = []string{"bluetooth.service"}
	if _, err := client.Call(ctx, c, proto.ServiceControl, proto.ServiceControlReq{Unit: "motion.service", Action: "stop"}); proto.CodeOf(err) != proto.CodeFailedPrecondition {
		t.Fatalf("stop with dependents: %v", err)
	}
	if _, err := client.Call(ctx, c, proto.ServiceControl, proto.ServiceControlReq{Unit: "motion.service", Action: "stop", Force: true}); err != nil {
		t.Fatalf("forced stop: %v", err)
	}
	if resp, err := client.Call(ctx, c, proto.ServiceControl, proto.ServiceControlReq{Unit: "nginx.service", Action: "restart"}); err != nil || resp.Job != "done" {
		t.Fatalf("restart nginx: %v %v", resp, err)
	}
	if !slices.Equal(f.controls, []string{"stop motion.service", "restart nginx.service"}) {
		t.Fatalf("controls = %v", f.controls)
	}
}

func TestHelperServiceSwitchesOff(t *testing.T) {
	for name, mod := range map[string]func(*privhelper.Policy){
		"namespace off": func(p *privhelper.Policy) { p.Config.Service.Enabled = false },
		"control off":   func(p *privhelper.Policy) { p.Config.Service.Control = false },
	} {
		f := &fakeOps{}
		pol := opsPolicy()
		mod(&pol)
		h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: pol, Ops: f.ops()})
		_, err := client.Call(context.Background(), newClient(t, h.sock), proto.ServiceControl, proto.ServiceControlReq{Unit: "nginx.service", Action: "start"})
		if proto.CodeOf(err) != proto.CodePermissionDenied || len(f.controls) != 0 {
			t.Errorf("%s: %v, controls %v", name, err, f.controls)
		}
	}
}

func TestHelperSignalRules(t *testing.T) {
	f := &fakeOps{procs: map[int]privhelper.ProcIdentity{
		1:           {PID: 1, UID: 0, StartTicks: 1, Name: "systemd"},
		2:           {PID: 2, UID: 0, StartTicks: 1, Kernel: true, Name: "kthreadd"},
		500:         {PID: 500, UID: 0, StartTicks: 9, Name: "sshd"},
		700:         {PID: 700, UID: 1000, StartTicks: 42, Name: "python3"},
		os.Getpid(): {PID: os.Getpid(), UID: 1000, StartTicks: 5, Name: "raspi-mcp"},
	}}
	h := startHelperWith(t, sockIn(t), privhelper.Options{Policy: opsPolicy(), Ops: f.ops()})
	c := newClient(t, h.sock)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		req  proto.ProcessSignalReq
		code string
	}{
		"pid 1":            {proto.ProcessSignalReq{PID: 1, StartTicks: 1, Signal: "TERM"}, proto.CodeInvalidArgument},
		"kernel thread":    {proto.ProcessSignalReq{PID: 2, StartTicks: 1, Signal: "TERM"}, proto.CodePermissionDenied},
		"protected root":   {proto.ProcessSignalReq{PID: 500, StartTicks: 9, Signal: "TERM"}, proto.CodePermissionDenied},
		"the helper":       {proto.ProcessSignalReq{PID: os.Getpid(), StartTicks: 5, Signal: "TERM"}, proto.CodePermissionDenied},
		"KILL not allowed": {proto.ProcessSignalReq{PID: 700, StartTicks: 42, Signal: "KILL"}, proto.CodePermissionDenied},
		"reused pid":       {proto.ProcessSignalReq{PID: 700, StartTicks: 41, Signal: "TERM"}, proto.CodeFailedPrecondition},
		"gone":             {proto.ProcessSignalReq{PID: 999, StartTicks: 1, Signal: "TERM"}, proto.CodeNotFound},
		"SIG prefix":       {proto.ProcessSignalReq{PID: 700, StartTicks: 42, Signal: "SIGTERM"}, proto.CodeInvalidArgument},
	} {
		if _, err := client.Call(ctx, c, proto.ProcessSignal, tc.req); proto.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	if len(f.signals) != 0 {
		t.Fatalf("refused signals were sent: %v", f.signals)
	}
	resp, err := client.Call(ctx, c, proto.ProcessSignal, proto.ProcessSignalReq{PID: 700, StartTicks: 42, Signal: "HUP"})
	if err != nil || resp.Name != "python3" || !slices.Equal(f.signals, []string{"HUP"}) {
		t.Fatalf("HUP to python3: %+v %v (sent %v)", resp, err, f.signals)
	}
}

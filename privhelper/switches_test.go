package privhelper_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/apt"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/selfupdate"
)

// The helper's part of the switches: which of its methods each write switch
// of config/switches.go gates, and why every other method of the protocol
// is gated by none. The tests below read the switches from config.Switches
// and the methods from proto.Names, so a new write switch, or a new method,
// fails them until it has a row here: a gate, or a reason it has none.

// gatedCall is one request a switch gates, sent as the agent would, with
// the allowlists of allOnPolicy permitting it.
type gatedCall struct {
	method string
	call   func(ctx context.Context, c *client.Client) error
}

// switchGate is a write switch's row: the calls it gates in the helper, or
// why no helper method acts under it.
type switchGate struct {
	calls []gatedCall
	none  string
}

func call[Req proto.Validator, Resp any](m proto.Method[Req, Resp], req Req) gatedCall {
	return gatedCall{method: m.Name, call: func(ctx context.Context, c *client.Client) error {
		_, err := client.Call(ctx, c, m, req)
		return err
	}}
}

var testPlan = apt.Plan{Upgrades: []apt.Change{{Name: "curl", From: "7.88.1-10", To: "7.88.1-10+deb12u5"}}, Held: []string{}}

var switchGates = map[config.Switch]switchGate{
	config.SwitchSystemReboot: {calls: []gatedCall{
		call(proto.PowerSchedule, proto.PowerScheduleReq{Action: proto.ActionReboot, DelaySeconds: 60, Reason: "switch test"})}},
	config.SwitchSystemShutdown: {calls: []gatedCall{
		call(proto.PowerSchedule, proto.PowerScheduleReq{Action: proto.ActionPoweroff, DelaySeconds: 60, Reason: "switch test"})}},
	config.SwitchMetricsJobs: {none: "sampling jobs run in the agent's own sampler: no helper method acts for them"},
	config.SwitchManageUpdates: {calls: []gatedCall{
		call(proto.AptRefresh, proto.AptRefreshReq{}),
		call(proto.AptApply, applyReq(testPlan)),
		call(proto.UpdateStart, proto.UpdateStartReq{ID: "switch-test", From: "1.0.0", To: "1.1.0", Channel: "stable"}),
	}},
	config.SwitchServiceControl: {calls: []gatedCall{
		call(proto.ServiceControl, proto.ServiceControlReq{Unit: "nginx.service", Action: proto.ServiceRestart}),
		call(proto.ServiceEnable, proto.ServiceEnableReq{Unit: "nginx.service", Enabled: true}),
	}},
	config.SwitchProcessSignals: {calls: []gatedCall{
		call(proto.ProcessSignal, proto.ProcessSignalReq{PID: 4242, StartTicks: 7, Signal: "TERM"})}},
	config.SwitchGPIOWrites: {calls: []gatedCall{
		call(proto.GPIOConfigure, proto.GPIOConfigureReq{Pin: 18, Mode: "output", Pull: "none"}),
		call(proto.GPIOWrite, proto.GPIOWriteReq{Pin: 18, Value: 1}),
		call(proto.PWMSet, proto.PWMSetReq{Pin: 18, FrequencyHz: 50, DutyCyclePercent: 7.5}),
	}},
	config.SwitchI2CWrites: {calls: []gatedCall{
		call(proto.I2CWrite, proto.I2CWriteReq{Bus: 1, Address: 0x48, Data: []int{1, 2}})}},
	config.SwitchCameraEnabled: {calls: []gatedCall{
		call(proto.CameraCapture, proto.CameraCaptureReq{Width: 640, Height: 480, Format: "jpeg", Quality: 80})}},
}

// ungated are the methods no write switch gates, and why.
var ungated = map[string]string{
	"hello":          "the handshake",
	"status":         "describes the helper; reads",
	"power.state":    "reads the pending power action",
	"power.cancel":   "cancelling is the safe direction, allowed whatever the switches",
	"gpio.state":     "reads; under [gpio] enabled and the pin allowlist",
	"gpio.read":      "reads; under [gpio] enabled and the pin allowlist",
	"i2c.buses":      "reads; under [i2c] enabled and the read allowlist",
	"i2c.scan":       "reads; under [i2c] enabled and the read allowlist",
	"i2c.read":       "reads; under [i2c] enabled and the read allowlist",
	"sensor.read":    "reads a sensor [i2c] sensors declares; under [i2c] enabled",
	"update.plan":    "reads what an update would do, so the owner sees it before turning [manage] updates on",
	"update.state":   "reads the last self-update's record",
	"update.report":  "the new agent's health word on a run update.start began under [manage] updates; it installs nothing",
	"apt.cancel":     "stopping a run is the safe direction, allowed with updates off",
	"apt.status":     "reads the package runs",
	"audit.witness":  "moves the audit witness forward only; changes nothing on the device",
	"config.apply":   "changes the config itself, not the device: the helper re-checks the candidate's keys against config.Changeable (never [manage], [roles], [helper], ...) and reloads; the agent's tool is admin and critical",
	"config.restore": "puts the previous MCP drop-in back (undoes config.apply) and reloads",
	// The approval button is the owner's consent, not a power of the
	// agent's: it changes nothing on the device, and [guard.button] (a key
	// no tool may write) is what wires it. A switch the agent could turn on
	// would make the button an agent's power.
	"button.wait":   "waits for the owner's press on the approval button ([guard.button]); it changes nothing on the device",
	"button.status": "reads the approval button's health",
	"button.press":  "the simulated board's finger (laptop mode); a real board's helper does not serve it",
}

// The tables cover every write switch and every method, and say nothing of
// switches or methods that do not exist.
func TestSwitchGatesCoverEveryWriteSwitchAndMethod(t *testing.T) {
	names := proto.Names()
	gated := map[string]bool{}
	for _, s := range config.Switches() {
		g, ok := switchGates[s]
		switch {
		case s.Write() && !ok:
			t.Errorf("write switch %s (%s) has no row in switchGates: list the helper methods it gates, or why none", s.Path(), s.Doc())
		case !s.Write() && ok:
			t.Errorf("%s is not a write switch: the helper checks namespace switches through the write switches' tables (Switch.Within)", s.Path())
		case ok && len(g.calls) == 0 && g.none == "":
			t.Errorf("write switch %s gates no helper method and says not why", s.Path())
		case ok && len(g.calls) > 0 && g.none != "":
			t.Errorf("write switch %s both gates methods and says it gates none", s.Path())
		}
		for _, c := range g.calls {
			if !slices.Contains(names, c.method) {
				t.Errorf("%s gates %q, which is not a method of proto's table", s.Path(), c.method)
			}
			gated[c.method] = true
		}
	}
	for s := range switchGates {
		if !s.Valid() {
			t.Errorf("switchGates has a row for %v, not a switch of config's table", s)
		}
	}
	for _, m := range names {
		why, free := ungated[m]
		switch {
		case gated[m] && free:
			t.Errorf("method %s is both gated by a switch and listed as ungated (%s)", m, why)
		case !gated[m] && !free:
			t.Errorf("method %s is gated by no write switch and not listed as ungated: add it to switchGates, or to ungated with the reason", m)
		case free && why == "":
			t.Errorf("method %s is ungated without a reason", m)
		}
	}
	for m := range ungated {
		if !slices.Contains(names, m) {
			t.Errorf("ungated lists %q, which is not a method of proto's table", m)
		}
	}
}

// For every write switch and every method it gates: off, the request is
// refused naming the switch and reaches no backend; its table's enabled
// switch off, the same naming that one; on (the allowlists permitting), it
// passes and reaches the backend.
func TestHelperEnforcesEveryWriteSwitch(t *testing.T) {
	for _, s := range config.Switches() {
		for _, gc := range switchGates[s].calls {
			t.Run(s.Path()+"/"+gc.method, func(t *testing.T) {
				refused := func(t *testing.T, off config.Switch) {
					t.Helper()
					pol := allOnPolicy()
					off.Set(&pol.Config, false)
					rig := startSwitchRig(t, pol)
					err := gc.call(context.Background(), rig.c)
					e := protoErr(t, err, proto.CodePermissionDenied)
					if e.Details["switch"] != off.Path() || e.Details["config_key"] != off.Key() ||
						!strings.Contains(e.Message, off.Path()) || !strings.Contains(e.Message, off.Key()+" = true") {
						t.Errorf("refusal with %s off does not name it: %q %v", off.Path(), e.Message, e.Details)
					}
					if seen := rig.rec.seen(); len(seen) != 0 {
						t.Errorf("refused with %s off, yet the backends saw %v", off.Path(), seen)
					}
				}
				t.Run("off", func(t *testing.T) { refused(t, s) })
				if w := s.Within(); w != config.NoSwitch {
					t.Run("table off", func(t *testing.T) { refused(t, w) })
				}
				t.Run("on", func(t *testing.T) {
					rig := startSwitchRig(t, allOnPolicy())
					if err := gc.call(context.Background(), rig.c); err != nil {
						t.Fatalf("with every switch on and the allowlists permitting: %v", err)
					}
					if len(rig.rec.seen()) == 0 {
						t.Error("passed, yet reached no backend")
					}
				})
			})
		}
	}
}

// Every gated method is served by the rig, so the test above reaches
// each handler rather than not_found.
func TestSwitchRigServesEveryGatedMethod(t *testing.T) {
	rig := startSwitchRig(t, allOnPolicy())
	st, err := client.Call(context.Background(), rig.c, proto.Status, proto.StatusReq{})
	if err != nil {
		t.Fatal(err)
	}
	for s, g := range switchGates {
		for _, gc := range g.calls {
			if !slices.Contains(st.Methods, gc.method) {
				t.Errorf("%s: the rig does not serve %s", s.Path(), gc.method)
			}
		}
	}
}

// The helper reads a switch only through Policy (config.Switch): no file
// of the package reads a switch's field of the config itself, which would
// be a second way with its own refusal. The fields are found from the
// switches table's paths, so a new switch is covered too.
func TestHelperReadsSwitchesOnlyThroughPolicy(t *testing.T) {
	var fields []string
	for _, s := range config.Switches() {
		table, key, _ := strings.Cut(s.Path(), ".")
		f, ok := goField(reflect.TypeFor[config.Config](), table)
		if !ok {
			t.Fatalf("%s: no table %q in config.Config", s.Path(), table)
		}
		k, ok := goField(f.Type, key)
		if !ok {
			t.Fatalf("%s: no key %q in config.%s", s.Path(), key, f.Name)
		}
		fields = append(fields, regexp.QuoteMeta("."+f.Name+"."+k.Name))
	}
	re := regexp.MustCompile(`(` + strings.Join(fields, "|") + `)\b`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := re.FindString(line); m != "" && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d reads the switch field %s directly; use Policy.Allows or Server.require", f, i+1, m)
			}
		}
	}
}

// goField finds the field of struct type t with toml tag tag.
func goField(t reflect.Type, tag string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); strings.Split(f.Tag.Get("toml"), ",")[0] == tag {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// allOnPolicy turns on every switch of config's table and allows exactly
// what switchGates sends: GPIO18 (output, PWM), I²C 1:0x48, nginx, SIGTERM.
func allOnPolicy() privhelper.Policy {
	p := privhelper.Policy{AgentUID: agentUID()}
	for _, s := range config.Switches() {
		s.Set(&p.Config, true)
	}
	p.Config.GPIO.Pins = []config.Pin{{Pin: 18, Mode: "output", PWM: true}}
	p.Config.I2C.Read, p.Config.I2C.Write = []string{"1:0x48"}, []string{"1:0x48"}
	p.Config.Service.Allow = []string{"nginx"}
	p.Config.Process.AllowedSignals = []string{"TERM"}
	p.Config.Manage.UpdateHealthTimeout = config.Duration(time.Minute)
	return p
}

// switchRig is a helper whose every backend is a recorder.
type switchRig struct {
	c   *client.Client
	rec *recorder
}

func startSwitchRig(t *testing.T, pol privhelper.Policy) switchRig {
	t.Helper()
	rec := &recorder{}
	h := startHelperWith(t, sockIn(t), privhelper.Options{
		Policy:   pol,
		Power:    rec,
		Hardware: privhelper.Hardware{GPIO: rec, PWM: rec, I2C: i2cRec{rec}, Camera: rec},
		Ops:      privhelper.Ops{Units: rec, Processes: rec, Apt: aptRec{rec}},
		Updates:  privhelper.Updates{Dir: selfupdate.Dir(t.TempDir()), Catalog: rec, Launcher: rec},
	})
	return switchRig{c: newClient(t, h.sock), rec: rec}
}

// recorder is every backend the helper has; it records each call, reads
// included, so a refusal can be shown to have reached none.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) saw(call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// power.Power
func (r *recorder) Schedule(_ context.Context, a power.Action, _ time.Time) error {
	r.saw("power schedule " + string(a))
	return nil
}
func (r *recorder) Cancel(context.Context) (power.Schedule, bool, error) {
	r.saw("power cancel")
	return power.Schedule{}, false, nil
}
func (r *recorder) Scheduled(context.Context) (power.Schedule, bool, error) {
	r.saw("power scheduled")
	return power.Schedule{}, false, nil
}

// privhelper.GPIO and PWM
func (r *recorder) State(_ context.Context, pin int) (proto.GPIOPin, error) {
	r.saw("gpio state")
	return proto.GPIOPin{Pin: pin}, nil
}
func (r *recorder) Configure(_ context.Context, pin int, mode, _ string, _ int) (proto.GPIOPin, error) {
	r.saw("gpio configure")
	return proto.GPIOPin{Pin: pin, Mode: mode}, nil
}
func (r *recorder) Read(_ context.Context, pin int) (proto.GPIOPin, error) {
	r.saw("gpio read")
	return proto.GPIOPin{Pin: pin}, nil
}
func (r *recorder) Write(_ context.Context, pin, value int) (proto.GPIOPin, error) {
	r.saw("gpio write")
	return proto.GPIOPin{Pin: pin, Value: &value}, nil
}
func (r *recorder) Set(_ context.Context, pin int, hz, duty float64) (proto.PWMState, error) {
	r.saw("pwm set")
	return proto.PWMState{Pin: pin}, nil
}

// privhelper.I2C, through i2cRec: its Read and Write differ from GPIO's.
type i2cRec struct{ r *recorder }

func (i i2cRec) Buses(context.Context) ([]proto.I2CBus, error) {
	i.r.saw("i2c buses")
	return nil, nil
}
func (i i2cRec) Scan(_ context.Context, bus int) (proto.I2CScanResp, error) {
	i.r.saw("i2c scan")
	return proto.I2CScanResp{Bus: bus}, nil
}
func (i i2cRec) Read(context.Context, int, int, *int, int) ([]int, error) {
	i.r.saw("i2c read")
	return nil, nil
}
func (i i2cRec) Write(context.Context, int, int, *int, []int) error {
	i.r.saw("i2c write")
	return nil
}
func (i i2cRec) Sensor(_ context.Context, s config.Sensor) (proto.SensorReading, error) {
	i.r.saw("sensor")
	return proto.SensorReading{Name: s.Name}, nil
}

// privhelper.Camera
func (r *recorder) Capture(context.Context, proto.CameraCaptureReq) (proto.CameraPhoto, error) {
	r.saw("camera capture")
	return proto.CameraPhoto{Path: "/media/test.jpg"}, nil
}

// privhelper.Units
func (r *recorder) ActiveDependents(context.Context, string) ([]string, error) {
	r.saw("unit dependents")
	return nil, nil
}
func (r *recorder) Control(_ context.Context, unit, action string) (proto.ServiceControlResp, error) {
	r.saw("unit " + action)
	return proto.ServiceControlResp{Unit: unit, Action: action}, nil
}
func (r *recorder) SetEnabled(_ context.Context, unit string, _ bool) (proto.ServiceEnableResp, error) {
	r.saw("unit enable")
	return proto.ServiceEnableResp{Unit: unit, Changes: []proto.UnitFileChange{}}, nil
}

// privhelper.Processes
func (r *recorder) Identify(pid int) (privhelper.ProcIdentity, error) {
	r.saw("process identify")
	return privhelper.ProcIdentity{PID: pid, PPID: 1, UID: 4000, StartTicks: 7, Name: "sleeper"}, nil
}
func (r *recorder) Signal(int, uint64, string) error {
	r.saw("process signal")
	return nil
}

// privhelper.AptRunner, through aptRec: its Cancel differs from power's.
type aptRec struct{ r *recorder }

func (a aptRec) Refresh(context.Context) (apt.RunInfo, error) {
	a.r.saw("apt refresh")
	return apt.RunInfo{ID: "refresh-1"}, nil
}
func (a aptRec) Apply(_ context.Context, p apt.Plan) (apt.RunInfo, error) {
	a.r.saw("apt apply")
	return apt.RunInfo{ID: "apply-1", PlanHash: p.Hash()}, nil
}
func (a aptRec) Cancel(_ context.Context, id string) (apt.RunInfo, error) {
	a.r.saw("apt cancel")
	return apt.RunInfo{ID: id}, nil
}
func (a aptRec) Status(id string) (apt.RunInfo, error) {
	a.r.saw("apt status")
	return apt.RunInfo{ID: id}, nil
}
func (a aptRec) List() []apt.RunInfo {
	a.r.saw("apt list")
	return nil
}

// selfupdate.Catalog and Launcher
func (r *recorder) Installed(context.Context) (string, error) {
	r.saw("installed version")
	return "1.0.0", nil
}
func (r *recorder) Available(context.Context) ([]selfupdate.Candidate, error) {
	r.saw("available versions")
	return []selfupdate.Candidate{{Version: "1.1.0", Channel: "stable"}}, nil
}
func (r *recorder) Launch(context.Context, string) (string, error) {
	r.saw("updater launch")
	return "raspi-mcp-update-switch-test.service", nil
}

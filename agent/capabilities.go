package agent

import (
	"cmp"
	"context"
	"sort"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// capabilities is system.get_capabilities: the modules, tools, hardware and
// each tool's stability (alpha, beta, stable) on this device, the capability
// matrix of the tool catalog (spec 002 §3.4, §9.2), so a model can adapt
// before it tries anything.
type capabilities struct {
	ServerVersion string       `json:"server_version"`
	APIVersion    string       `json:"api_version"`
	Mode          string       `json:"mode" jsonschema:"device, or sim for the simulated board"`
	Device        deviceCaps   `json:"device"`
	Hardware      hardwareCaps `json:"hardware"`
	Helper        helperBrief  `json:"helper"`
	Caller        caller       `json:"caller"`
	Domains       []domainCaps `json:"domains"`
	// ToolNamespaces and Features are how the tool catalog lets a client
	// negotiate versions (spec 002 addendum §3.1): each namespace's interface
	// versions, and which optional features this device and configuration offer.
	ToolNamespaces map[string]namespaceVersions `json:"tool_namespaces" jsonschema:"per namespace: the interface versions served and the default"`
	Features       map[string]bool              `json:"capabilities" jsonschema:"optional features by name (gpio.pwm, camera.still_capture, gpio.event_detection...): true when this device offers them now"`
}

// namespaceVersions lists a namespace's interface versions.
type namespaceVersions struct {
	Versions []string `json:"versions"`
	Default  string   `json:"default"`
}

// deviceCaps names the board.
type deviceCaps struct {
	Model         string `json:"model"`
	IsRaspberryPi bool   `json:"is_raspberry_pi"`
}

// hardwareCaps is what the kernel exposes.
type hardwareCaps struct {
	GPIOChips     []string `json:"gpio_chips"`
	I2CBuses      []int    `json:"i2c_buses"`
	PWMChips      []string `json:"pwm_chips"`
	Cameras       []string `json:"cameras"`
	Thermal       bool     `json:"thermal_sensor"`
	ThrottleFlags bool     `json:"throttle_flags"`
	// ThrottleSource says where throttling comes from, so a model knows
	// whether "no flags" means healthy or unknown.
	ThrottleSource string `json:"throttle_source" jsonschema:"firmware, vcgencmd, hwmon rpi_volt (under-voltage now only), sim, or none (throttling unknown)"`
}

// helperBrief says whether privileged tools can work right now.
type helperBrief struct {
	Reachable bool   `json:"reachable"`
	Backend   string `json:"backend,omitempty"`
	Error     string `json:"error,omitempty"`
}

// caller is who is asking and with which role.
type caller struct {
	Principal string `json:"principal"`
	Role      string `json:"role"`
}

// domainCaps is one namespace.
type domainCaps struct {
	Name     string          `json:"name"`
	Enabled  bool            `json:"enabled"`
	Tools    []toolCaps      `json:"tools"`
	Upstream *upstreamStatus `json:"upstream,omitempty" jsonschema:"set for a LAN MCP server mounted here"`
}

// toolCaps is one tool as this caller sees it.
type toolCaps struct {
	Name        string `json:"name"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Risk        string `json:"risk"`
	MinRole     string `json:"min_role"`
	Stability   string `json:"stability" jsonschema:"alpha, beta or stable"`
	ReadOnly    bool   `json:"read_only"`
	Available   bool   `json:"available" jsonschema:"true when this caller may use it now"`
	Unavailable string `json:"unavailable_reason,omitempty"`
}

// deviceOf is the one answer to "which board is this", for every tool that
// reports it (system_get_capabilities, manage_get_server_status, selftest_run).
func deviceOf(ctx context.Context, sys sysinfo.Source) (deviceCaps, error) {
	b, err := sys.Basic(ctx)
	if err != nil {
		return deviceCaps{}, err
	}
	hw, err := sys.Hardware(ctx)
	if err != nil {
		return deviceCaps{}, err
	}
	return deviceCaps{Model: b.Model, IsRaspberryPi: hw.IsRaspberryPi}, nil
}

// capsReader answers system.get_capabilities: the board, the helper, the
// configuration's switches, and every tool as the pipeline decides it for
// the caller, LAN upstreams included (read through a func: they are mounted
// after the catalog is built).
type capsReader struct {
	sys           sysinfo.Source
	helper        *client.Client
	version, mode string
	conf          func() *config.Config
	tools         *tool.Registry
	may           func(identity.Principal, string) *tool.Error // the pipeline's May
	upstreams     func() []upstreamStatus
}

func (a *Agent) capsReader() *capsReader {
	return &capsReader{sys: a.sys, helper: a.helper, version: a.version, mode: a.mode, conf: a.conf,
		tools: a.tools, may: a.pipe.May, upstreams: a.lanStatus}
}

func (cr *capsReader) read(ctx context.Context, c *tool.Call) (capabilities, error) {
	dev, err := deviceOf(ctx, cr.sys)
	if err != nil {
		return capabilities{}, err
	}
	hw, err := cr.sys.Hardware(ctx)
	if err != nil {
		return capabilities{}, err
	}
	cp := capabilities{
		ServerVersion: cr.version, APIVersion: "1.0", Mode: cr.mode,
		Device:   dev,
		Hardware: hardwareCaps{GPIOChips: nonNil(hw.GPIOChips), I2CBuses: nonNilInt(hw.I2CBuses), PWMChips: nonNil(hw.PWMChips), Cameras: nonNil(hw.Cameras), Thermal: hw.Thermal, ThrottleFlags: hw.Throttle, ThrottleSource: cmp.Or(hw.ThrottleSource, sysinfo.ThrottleNone)},
		Helper:   cr.helperBrief(ctx),
		Caller:   caller{Principal: c.Principal.Name, Role: c.Principal.Role.String()},
	}
	byDomain := map[string]*domainCaps{}
	for _, t := range cr.tools.All() {
		d := byDomain[t.Rule().Domain]
		if d == nil {
			on, _ := tool.DomainEnabled(cr.conf(), t.Rule().Domain)
			d = &domainCaps{Name: t.Rule().Domain, Enabled: on}
			byDomain[t.Rule().Domain] = d
		}
		tc := toolCaps{Name: t.Name(), ID: t.ID(), Title: t.MCP().Title, Risk: t.Rule().Risk.String(), MinRole: t.Rule().MinRole.String(),
			Stability: t.Stability(), ReadOnly: !t.Mutating()}
		// A dry run is exactly the check the real call makes, minus guards.
		if err := cr.may(c.Principal, t.ID()); err != nil {
			tc.Unavailable = err.Message
		} else {
			tc.Available = true
		}
		d.Tools = append(d.Tools, tc)
	}
	// Every mounted LAN server, with its health, even while it lists nothing.
	for _, us := range cr.upstreams() {
		d := byDomain[us.Name]
		if d == nil {
			d = &domainCaps{Name: us.Name, Enabled: true, Tools: []toolCaps{}}
			byDomain[us.Name] = d
		}
		d.Upstream = &us
	}
	cp.ToolNamespaces = map[string]namespaceVersions{}
	for _, d := range byDomain {
		cp.Domains = append(cp.Domains, *d)
		// Every namespace is at its first interface version: no tool has
		// had a breaking change that needed a second one.
		cp.ToolNamespaces[d.Name] = namespaceVersions{Versions: []string{"1"}, Default: "1"}
	}
	cp.Features = cr.features(cp.Hardware)
	sort.Slice(cp.Domains, func(i, j int) bool { return cp.Domains[i].Name < cp.Domains[j].Name })
	return cp, nil
}

// features is the capabilities map: what the hardware has and the owner's
// configuration allows, plus the features the tool catalog names that this
// server does not implement (false, so a client need not guess).
func (cr *capsReader) features(hw hardwareCaps) map[string]bool {
	return map[string]bool{
		"gpio.control":              len(hw.GPIOChips) > 0 && cr.conf().GPIO.Enabled,
		"gpio.pwm":                  len(hw.PWMChips) > 0 && cr.conf().GPIO.Enabled,
		"gpio.event_detection":      false,
		"i2c.bus_access":            len(hw.I2CBuses) > 0 && cr.conf().I2C.Enabled,
		"camera.still_capture":      len(hw.Cameras) > 0 && cr.conf().Camera.Enabled,
		"camera.video_recording":    false,
		"system.temperature_sensor": hw.Thermal,
		"system.throttling_flags":   hw.ThrottleFlags,
		"system.reboot":             cr.conf().System.Reboot,
		"system.shutdown":           cr.conf().System.Shutdown,
		"metrics.sampling_jobs":     cr.conf().Metrics.Jobs,
		"manage.self_update":        cr.conf().Manage.Enabled && cr.conf().Manage.Updates,
		"manage.os_updates":         false,
		"lan.upstreams":             len(cr.upstreams()) > 0,
	}
}

// helperBrief asks the helper for its status with a short timeout.
func (cr *capsReader) helperBrief(ctx context.Context) helperBrief {
	st, err := client.Call(ctx, cr.helper, proto.Status, proto.StatusReq{})
	if err != nil {
		return helperBrief{Error: tool.Truncate(err.Error(), 160)}
	}
	return helperBrief{Reachable: true, Backend: st.Backend}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInt(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

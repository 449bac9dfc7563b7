package agent

import (
	"context"
	"sort"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// Capabilities is system.get_capabilities: the capability matrix of spec 002
// §3.4 and §9.2, so a model can adapt before it tries anything.
type Capabilities struct {
	ServerVersion string       `json:"server_version"`
	APIVersion    string       `json:"api_version"`
	Mode          string       `json:"mode" jsonschema:"device, or sim for the simulated board"`
	Device        DeviceCaps   `json:"device"`
	Hardware      HardwareCaps `json:"hardware"`
	Helper        HelperBrief  `json:"helper"`
	Caller        Caller       `json:"caller"`
	Domains       []DomainCaps `json:"domains"`
}

// DeviceCaps names the board.
type DeviceCaps struct {
	Model         string `json:"model"`
	IsRaspberryPi bool   `json:"is_raspberry_pi"`
}

// HardwareCaps is what the kernel exposes.
type HardwareCaps struct {
	GPIOChips     []string `json:"gpio_chips"`
	I2CBuses      []int    `json:"i2c_buses"`
	PWMChips      []string `json:"pwm_chips"`
	Cameras       []string `json:"cameras"`
	Thermal       bool     `json:"thermal_sensor"`
	ThrottleFlags bool     `json:"throttle_flags"`
}

// HelperBrief says whether privileged tools can work right now.
type HelperBrief struct {
	Reachable bool   `json:"reachable"`
	Backend   string `json:"backend,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Caller is who is asking and with which role.
type Caller struct {
	Principal string `json:"principal"`
	Role      string `json:"role"`
}

// DomainCaps is one namespace.
type DomainCaps struct {
	Name     string          `json:"name"`
	Enabled  bool            `json:"enabled"`
	Tools    []ToolCaps      `json:"tools"`
	Upstream *UpstreamStatus `json:"upstream,omitempty" jsonschema:"set for a LAN MCP server mounted here"`
}

// ToolCaps is one tool as this caller sees it.
type ToolCaps struct {
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

func (a *Agent) capabilities(ctx context.Context, c *Call) (Capabilities, error) {
	b, err := a.sys.Basic(ctx)
	if err != nil {
		return Capabilities{}, err
	}
	hw, err := a.sys.Hardware(ctx)
	if err != nil {
		return Capabilities{}, err
	}
	cp := Capabilities{
		ServerVersion: a.version, APIVersion: "1.0", Mode: a.mode,
		Device:   DeviceCaps{Model: b.Model, IsRaspberryPi: hw.IsRaspberryPi},
		Hardware: HardwareCaps{GPIOChips: nonNil(hw.GPIOChips), I2CBuses: nonNilInt(hw.I2CBuses), PWMChips: nonNil(hw.PWMChips), Cameras: nonNil(hw.Cameras), Thermal: hw.Thermal, ThrottleFlags: hw.Throttle},
		Helper:   a.helperBrief(ctx),
		Caller:   Caller{Principal: c.Principal.Name, Role: c.Principal.Role.String()},
	}
	byDomain := map[string]*DomainCaps{}
	for _, t := range a.tools.all() {
		d := byDomain[t.rule.Domain]
		if d == nil {
			on, _ := domainEnabled(a.cfg, t.rule.Domain)
			d = &DomainCaps{Name: t.rule.Domain, Enabled: on}
			byDomain[t.rule.Domain] = d
		}
		tc := ToolCaps{Name: t.name, ID: t.id, Title: t.mcp.Title, Risk: t.rule.Risk.String(), MinRole: t.rule.MinRole.String(),
			Stability: t.stable, ReadOnly: !t.mutating}
		// A dry run is exactly the check the real call makes, minus guards.
		if err := Decide(a.cfg, c.Principal, t.rule, Guard{DryRun: true}, false); err != nil {
			tc.Unavailable = err.Message
		} else {
			tc.Available = true
		}
		d.Tools = append(d.Tools, tc)
	}
	// Every mounted LAN server, with its health, even while it lists nothing.
	for _, us := range a.lanStatus() {
		d := byDomain[us.Name]
		if d == nil {
			d = &DomainCaps{Name: us.Name, Enabled: true, Tools: []ToolCaps{}}
			byDomain[us.Name] = d
		}
		d.Upstream = &us
	}
	for _, d := range byDomain {
		cp.Domains = append(cp.Domains, *d)
	}
	sort.Slice(cp.Domains, func(i, j int) bool { return cp.Domains[i].Name < cp.Domains[j].Name })
	return cp, nil
}

// helperBrief asks the helper for its status with a short timeout.
func (a *Agent) helperBrief(ctx context.Context) HelperBrief {
	st, err := client.Call(ctx, a.helper, proto.Status, proto.StatusReq{})
	if err != nil {
		return HelperBrief{Error: truncate(err.Error(), 160)}
	}
	return HelperBrief{Reachable: true, Backend: st.Backend}
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

package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// i2cListBusesOut is i2c.list_buses: the I2C adapters, each with its number and
// description (the tool catalog's I2cBusInfo list, spec 002 §6.1).
type i2cListBusesOut struct {
	Buses []busInfo `json:"buses"`
}

// busInfo is one adapter, and whether this device's [i2c] read allowlist
// lets callers use it: a model learns which buses exist and which it may
// scan and read, rather than only the allowed ones.
type busInfo struct {
	Bus         int    `json:"bus"`
	Description string `json:"description,omitempty"`
	Allowed     bool   `json:"allowed" jsonschema:"true when the [i2c] read allowlist lets you scan and read this bus; the device owner can allow more"`
}

// mergeBuses is every bus the kernel lists (unprivileged, from /sys) plus
// every bus the helper may read, which it names; the helper's list decides
// what is allowed, since the helper enforces the allowlist.
func mergeBuses(all []int, allowed []proto.I2CBus) []busInfo {
	out := make([]busInfo, 0, len(all)+len(allowed))
	for _, b := range allowed {
		out = append(out, busInfo{Bus: b.Bus, Description: b.Name, Allowed: true})
	}
	for _, n := range all {
		if !slices.ContainsFunc(out, func(b busInfo) bool { return b.Bus == n }) {
			out = append(out, busInfo{Bus: n})
		}
	}
	slices.SortFunc(out, func(a, b busInfo) int { return cmp.Compare(a.Bus, b.Bus) })
	return out
}

// i2cScanIn is i2c.scan_bus: the bus to probe (tool catalog, spec 002 §6.1).
type i2cScanIn struct {
	Bus int `json:"bus"`
}

// i2cScanOut is the addresses that answered on the bus (tool catalog, spec 002
// §6.1), plus addresses held by kernel drivers.
type i2cScanOut struct {
	Bus       int   `json:"bus"`
	Addresses []int `json:"addresses"`
	InUse     []int `json:"in_use" jsonschema:"addresses bound to a kernel driver, not probed (UU in i2cdetect)"`
}

// i2cReadIn is i2c.read: bus, 7-bit address, optional register and up to 32
// bytes to read (tool catalog, spec 002 §6.2).
type i2cReadIn struct {
	Bus      int  `json:"bus"`
	Address  int  `json:"address"`
	Register *int `json:"register,omitempty"`
	Length   int  `json:"length"`
}

// i2cReadOut is the bytes read, with where they were read from (tool catalog,
// spec 002 §6.2).
type i2cReadOut struct {
	Bus      int   `json:"bus"`
	Address  int   `json:"address"`
	Register *int  `json:"register,omitempty"`
	Data     []int `json:"data"`
}

// i2cWriteIn is i2c.write: bus, 7-bit address, optional register and 1 to 32
// bytes to write (tool catalog, spec 002 §6.2).
type i2cWriteIn struct {
	Bus      int   `json:"bus"`
	Address  int   `json:"address"`
	Register *int  `json:"register,omitempty"`
	Data     []int `json:"data"`
	tool.GuardArgs
}

// i2cWriteOut confirms the write with bus, address and bytes written, the
// second of the two results the tool catalog allows (an empty object is the
// first; spec 002 §6.2).
type i2cWriteOut struct {
	Bus          int  `json:"bus"`
	Address      int  `json:"address"`
	Register     *int `json:"register,omitempty"`
	BytesWritten int  `json:"bytes_written"`
	DryRun       bool `json:"dry_run,omitempty"`
}

// sensorsListOut lists the configured sensors.
type sensorsListOut struct {
	Sensors []sensorInfo `json:"sensors"`
}

// sensorInfo is one configured sensor.
type sensorInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Bus     int    `json:"bus"`
	Address int    `json:"address"`
}

// sensorsReadIn names a sensor.
type sensorsReadIn struct {
	Name string `json:"name"`
}

// SensorsReadOut is a reading in units.
type SensorsReadOut struct {
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	TemperatureC    *float64 `json:"temperature_celsius,omitempty"`
	PressureHPa     *float64 `json:"pressure_hpa,omitempty"`
	HumidityPercent *float64 `json:"humidity_percent,omitempty"`
}

// i2cTools are the i2c and sensors namespaces' tools: the allowlists and
// sensors they read, and the helper that does the bus transfers.
type i2cTools struct {
	conf   func() *config.Config
	sys    sysinfo.Source // the buses the kernel lists, allowed or not
	helper *client.Client
	wire   func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerI2C() {
	(&i2cTools{conf: a.conf, sys: a.sys, helper: a.helper, wire: a.wire}).register(a.tools)
}

func (t *i2cTools) register(reg *tool.Registry) {
	addr := []tool.Prop{tool.P("bus", tool.Min(0), tool.Max(255)), tool.P("address", tool.Min(0), tool.Max(127)), tool.P("register", tool.Min(0), tool.Max(255))}
	tool.Add(reg, tool.Spec[noArgs, i2cListBusesOut]{
		ID: "i2c.list_buses", Title: "I2C buses",
		Description: "Every I2C bus on the device, and which ones you may use.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run: func(ctx context.Context, _ *tool.Call, _ noArgs) (i2cListBusesOut, error) {
			r, err := client.Call(ctx, t.helper, proto.I2CBuses, proto.I2CBusesReq{})
			if err != nil {
				return i2cListBusesOut{}, err
			}
			var all []int
			if hw, err := t.sys.Hardware(ctx); err == nil {
				all = hw.I2CBuses
			}
			return i2cListBusesOut{Buses: mergeBuses(all, r.Buses)}, nil
		},
		Summary: func(_ noArgs, o i2cListBusesOut) string {
			n := 0
			for _, b := range o.Buses {
				if b.Allowed {
					n++
				}
			}
			return fmt.Sprintf("%d I2C buses, %d allowed", len(o.Buses), n)
		},
	})
	tool.Add(reg, tool.Spec[i2cScanIn, i2cScanOut]{
		ID: "i2c.scan_bus", Title: "Scan an I2C bus",
		Description: "Find the devices answering on a bus, like i2cdetect.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       addr[:1],
		Example:     &i2cScanIn{Bus: 1},
		Run: func(ctx context.Context, _ *tool.Call, in i2cScanIn) (i2cScanOut, error) {
			if err := allowedI2C(t.conf().I2C.Read, "read", in.Bus, -1); err != nil {
				return i2cScanOut{}, err
			}
			r, err := client.Call(ctx, t.helper, proto.I2CScan, proto.I2CScanReq{Bus: in.Bus})
			if err != nil {
				return i2cScanOut{}, err
			}
			return i2cScanOut{Bus: r.Bus, Addresses: nonNilInt(r.Addresses), InUse: nonNilInt(r.InUse)}, nil
		},
		Summary: func(in i2cScanIn, o i2cScanOut) string {
			return fmt.Sprintf("bus %d: %s answered, %d held by drivers", in.Bus, hexList(o.Addresses), len(o.InUse))
		},
	})
	tool.Add(reg, tool.Spec[i2cReadIn, i2cReadOut]{
		ID: "i2c.read", Title: "Read I2C",
		Description: "Read bytes from a device, from a register when given.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       append(addr, tool.P("length", tool.Min(1), tool.Max(proto.MaxI2CBytes))),
		Example:     &i2cReadIn{Bus: 1, Address: 0x76, Length: 1},
		Run: func(ctx context.Context, _ *tool.Call, in i2cReadIn) (i2cReadOut, error) {
			if err := allowedI2C(t.conf().I2C.Read, "read", in.Bus, in.Address); err != nil {
				return i2cReadOut{}, err
			}
			r, err := client.Call(ctx, t.helper, proto.I2CRead, proto.I2CReadReq{Bus: in.Bus, Address: in.Address, Register: in.Register, Length: in.Length})
			if err != nil {
				return i2cReadOut{}, err
			}
			return i2cReadOut{Bus: r.Bus, Address: r.Address, Register: r.Register, Data: nonNilInt(r.Data)}, nil
		},
		Summary: func(in i2cReadIn, o i2cReadOut) string {
			return fmt.Sprintf("read %d bytes from bus %d 0x%02x: %s", len(o.Data), in.Bus, in.Address, hexList(o.Data))
		},
	})
	tool.Add(reg, tool.Spec[i2cWriteIn, i2cWriteOut]{
		ID: "i2c.write", Title: "Write I2C",
		Description: "Write bytes to a device, at a register when given. A wrong write can damage hardware.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskHigh, Gate: config.SwitchI2CWrites},
		Destructive: true,
		Props: append(addr, tool.P("data", tool.MinItems(1), tool.MaxItems(proto.MaxI2CBytes)), tool.P("data", func(s *jsonschema.Schema) {
			lo, hi := 0.0, 255.0
			s.Items.Minimum, s.Items.Maximum = &lo, &hi
		})),
		Example: &i2cWriteIn{Bus: 1, Address: 0x48, Data: []int{1}},
		Run: func(ctx context.Context, c *tool.Call, in i2cWriteIn) (i2cWriteOut, error) {
			if err := allowedI2C(t.conf().I2C.Write, "write", in.Bus, in.Address); err != nil {
				return i2cWriteOut{}, err
			}
			if c.DryRun {
				return i2cWriteOut{Bus: in.Bus, Address: in.Address, Register: in.Register, BytesWritten: 0, DryRun: true}, nil
			}
			r, err := client.Call(ctx, t.helper, proto.I2CWrite, proto.I2CWriteReq{Bus: in.Bus, Address: in.Address, Register: in.Register, Data: in.Data})
			if err != nil {
				return i2cWriteOut{}, err
			}
			return i2cWriteOut{Bus: r.Bus, Address: r.Address, Register: r.Register, BytesWritten: len(r.Data)}, nil
		},
		Summary: func(in i2cWriteIn, o i2cWriteOut) string {
			if o.DryRun {
				return fmt.Sprintf("would write %d bytes to bus %d 0x%02x", len(in.Data), in.Bus, in.Address)
			}
			return fmt.Sprintf("wrote %d bytes to bus %d 0x%02x", o.BytesWritten, in.Bus, in.Address)
		},
	})
	tool.Add(reg, tool.Spec[noArgs, sensorsListOut]{
		ID: "sensors.list", Title: "Sensors",
		Description: "The declared I2C sensors: name, type, bus, address.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run: func(context.Context, *tool.Call, noArgs) (sensorsListOut, error) {
			out := sensorsListOut{Sensors: []sensorInfo{}}
			for _, s := range t.conf().I2C.Sensors {
				out.Sensors = append(out.Sensors, sensorInfo{Name: s.Name, Type: s.Type, Bus: s.Bus, Address: s.Address})
			}
			return out, nil
		},
		Summary: func(_ noArgs, o sensorsListOut) string { return fmt.Sprintf("%d sensors", len(o.Sensors)) },
	})
	tool.Add(reg, tool.Spec[sensorsReadIn, SensorsReadOut]{
		ID: "sensors.read", Title: "Read a sensor",
		Description: "Read a declared sensor: temperature, pressure, humidity.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{tool.P("name", tool.MinLen(1), tool.MaxLen(64))},
		Example:     &sensorsReadIn{Name: "case"},
		Run: func(ctx context.Context, _ *tool.Call, in sensorsReadIn) (SensorsReadOut, error) {
			found := false
			for _, s := range t.conf().I2C.Sensors {
				found = found || s.Name == in.Name
			}
			if !found {
				return SensorsReadOut{}, tool.Errf(CodeNotFound, "no sensor named %q", in.Name).With("parameter", "name").
					Suggest(tool.SuggestedCall{Tool: t.wire("sensors.list"), Why: "see the declared sensors"})
			}
			r, err := client.Call(ctx, t.helper, proto.SensorRead, proto.SensorReadReq{Name: in.Name})
			if err != nil {
				return SensorsReadOut{}, err
			}
			return SensorsReadOut{Name: r.Name, Type: r.Type, TemperatureC: round1p(r.TemperatureC), PressureHPa: round1p(r.PressureHPa), HumidityPercent: round1p(r.HumidityPercent)}, nil
		},
		Summary: func(in sensorsReadIn, o SensorsReadOut) string {
			s := in.Name + ":"
			if o.TemperatureC != nil {
				s += fmt.Sprintf(" %.1f°C", *o.TemperatureC)
			}
			if o.HumidityPercent != nil {
				s += fmt.Sprintf(" %.1f%%RH", *o.HumidityPercent)
			}
			if o.PressureHPa != nil {
				s += fmt.Sprintf(" %.1f hPa", *o.PressureHPa)
			}
			return s
		},
	})
}

// allowedI2C checks an [i2c] allowlist (addr -1: any address of the bus,
// for a scan); the helper checks it again.
func allowedI2C(list []string, what string, bus, addr int) error {
	ok := false
	if addr < 0 {
		for _, e := range list {
			if b, _, err := config.ParseI2CAddr(e); err == nil && b == bus {
				ok = true
			}
		}
	} else {
		ok = config.I2CAllowed(list, bus, addr)
	}
	if ok {
		return nil
	}
	target := fmt.Sprintf("bus %d", bus)
	if addr >= 0 {
		target = fmt.Sprintf("bus %d address 0x%02x", bus, addr)
	}
	return tool.Errf(CodePermissionDenied, "I2C %s of %s is not allowed on this device", what, target).
		With("bus", bus).With("address", addr).With("allowed", list).
		Hint(fmt.Sprintf("the owner allows it in [i2c] %s of %s, e.g. \"%d:0x%02x\"", what, config.DefaultPath, bus, max(addr, 0)))
}

func hexList(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("0x%02x", x)
	}
	return s
}

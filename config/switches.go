package config

import (
	"slices"
	"sort"
	"strings"
)

// Switch is one on/off key of the file that decides which tools may run: a
// namespace's "[gpio] enabled" or a write switch such as "[gpio] writes".
//
// The switches table below is the only place a switch is declared: its key,
// default, the namespaces it turns on and off, and what it gates. Default,
// WritesOn, the agent's namespace and write checks (with the key they name
// in their fix hints), the local namespace names an upstream may not take
// and the config.example.toml test all read it. Tools name their switch by
// constant (agent.Rule{Gate: config.SwitchGPIOWrites}), so a misspelt switch
// does not compile.
type Switch int

// The switches, in the order WritesOn lists them. NoSwitch is the zero value:
// a tool with no write switch beyond its namespace's.
const (
	NoSwitch Switch = iota
	SwitchSystemEnabled
	SwitchSystemReboot
	SwitchSystemShutdown
	SwitchMetricsEnabled
	SwitchMetricsJobs
	SwitchLogsEnabled
	SwitchManageEnabled
	SwitchManageUpdates
	SwitchNetworkEnabled
	SwitchServiceEnabled
	SwitchServiceControl
	SwitchProcessEnabled
	SwitchProcessSignals
	SwitchGPIOEnabled
	SwitchGPIOWrites
	SwitchI2CEnabled
	SwitchI2CWrites
	SwitchCameraEnabled
	numSwitches
)

// switchDef declares one switch.
type switchDef struct {
	path string              // "gpio.writes": table and key as the file spells them
	def  bool                // its value in Default()
	ptr  func(*Config) *bool // the field; a test checks it is the one path names
	// namespaces are the tool id prefixes an "enabled" switch turns on and
	// off ("i2c" and "sensors" share [i2c] enabled); nil for a write switch.
	namespaces []string
	// write: turning it on lets a caller change something, so WritesOn
	// lists it. Every switch but a namespace's enabled is one; [camera]
	// enabled is one too, since a photo of the room is a privacy decision.
	write bool
	doc   string // what it gates, for people and for the table's tests
	// reserved, when set, says why the switch exists while no tool names it.
	reserved string
}

var switches = [numSwitches]switchDef{
	SwitchSystemEnabled: {path: "system.enabled", def: true, ptr: func(c *Config) *bool { return &c.System.Enabled },
		namespaces: []string{"system"}, doc: "device information, capabilities and the power actions"},
	SwitchSystemReboot: {path: "system.reboot", ptr: func(c *Config) *bool { return &c.System.Reboot }, write: true,
		doc: "system.reboot (risk high: confirm + reason)"},
	SwitchSystemShutdown: {path: "system.shutdown", ptr: func(c *Config) *bool { return &c.System.Shutdown }, write: true,
		doc: "system.shutdown (risk critical: change token)"},
	SwitchMetricsEnabled: {path: "metrics.enabled", def: true, ptr: func(c *Config) *bool { return &c.Metrics.Enabled },
		namespaces: []string{"metrics"}, doc: "live metrics and the sampled history"},
	SwitchMetricsJobs: {path: "metrics.jobs", ptr: func(c *Config) *bool { return &c.Metrics.Jobs }, write: true,
		doc: "metrics.start_sampling_job and metrics.stop_sampling_job (risk low)"},
	SwitchLogsEnabled: {path: "logs.enabled", def: true, ptr: func(c *Config) *bool { return &c.Logs.Enabled },
		namespaces: []string{"logs"}, doc: "the audit trail, the agent's own logs and the listed journal units"},
	SwitchManageEnabled: {path: "manage.enabled", def: true, ptr: func(c *Config) *bool { return &c.Manage.Enabled },
		namespaces: []string{"manage"}, doc: "server status and the queued jobs"},
	SwitchManageUpdates: {path: "manage.updates", ptr: func(c *Config) *bool { return &c.Manage.Updates }, write: true,
		doc: "refreshing package lists, OS updates and updating raspi-mcp itself (preview: operate; apply: critical, admin)"},
	SwitchNetworkEnabled: {path: "network.enabled", def: true, ptr: func(c *Config) *bool { return &c.Network.Enabled },
		namespaces: []string{"network"}, doc: "interfaces, routes, DNS and sockets (read only)"},
	SwitchServiceEnabled: {path: "service.enabled", def: true, ptr: func(c *Config) *bool { return &c.Service.Enabled },
		namespaces: []string{"service"}, doc: "systemd units: list, status, unit file checks"},
	SwitchServiceControl: {path: "service.control", ptr: func(c *Config) *bool { return &c.Service.Control }, write: true,
		doc: "service.control_service and service.set_enabled on the units in [service] allow (risk high)"},
	SwitchProcessEnabled: {path: "process.enabled", def: true, ptr: func(c *Config) *bool { return &c.Process.Enabled },
		namespaces: []string{"process"}, doc: "the process list and details"},
	SwitchProcessSignals: {path: "process.signals", ptr: func(c *Config) *bool { return &c.Process.Signals }, write: true,
		doc: "process.send_signal with [process] allowed_signals (risk high)"},
	SwitchGPIOEnabled: {path: "gpio.enabled", def: true, ptr: func(c *Config) *bool { return &c.GPIO.Enabled },
		namespaces: []string{"gpio"}, doc: "the pins in [gpio] pins: list and read"},
	SwitchGPIOWrites: {path: "gpio.writes", ptr: func(c *Config) *bool { return &c.GPIO.Writes }, write: true,
		doc: "gpio.configure_pin, gpio.write_pin and gpio.set_pwm (risk low)"},
	SwitchI2CEnabled: {path: "i2c.enabled", def: true, ptr: func(c *Config) *bool { return &c.I2C.Enabled },
		namespaces: []string{"i2c", "sensors"}, doc: "I2C scans and reads in [i2c] read, and the known sensors"},
	SwitchI2CWrites: {path: "i2c.writes", ptr: func(c *Config) *bool { return &c.I2C.Writes }, write: true,
		doc: "i2c.write to the addresses in [i2c] write (risk high)"},
	SwitchCameraEnabled: {path: "camera.enabled", ptr: func(c *Config) *bool { return &c.Camera.Enabled },
		namespaces: []string{"camera"}, write: true, doc: "camera.capture and camera.take_photo"},
}

// Namespace is one prefix of the agent's own tool ids ("gpio" of
// gpio.write_pin). An upstream may not take its name.
type Namespace struct {
	Name string
	// Switch turns the namespace on and off; NoSwitch: it has none of its
	// own (change.* acts on the tool it prepares, under that tool's switches).
	Switch Switch
	// Reserved, when set, says why the name is kept while no tool uses it.
	Reserved string
}

// bareNamespaces are the namespaces without an enabled switch of their own;
// the others come from the switches table.
var bareNamespaces = [...]Namespace{
	{Name: "change"},
	// selftest.run has no switch: it is what a person runs when something
	// is wrong, whatever is turned off, and it only reads.
	{Name: "selftest"},
	{Name: "jobs", Reserved: "kept for a planned jobs namespace, so no upstream takes the name first"},
}

// Switches lists every switch in table order.
func Switches() []Switch {
	all := make([]Switch, 0, numSwitches-1)
	for s := NoSwitch + 1; s < numSwitches; s++ {
		all = append(all, s)
	}
	return all
}

// Namespaces lists the agent's own namespaces by name.
func Namespaces() []Namespace {
	all := slices.Clone(bareNamespaces[:])
	for _, s := range Switches() {
		for _, n := range switches[s].namespaces {
			all = append(all, Namespace{Name: n, Switch: s})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// LocalNamespaces is the names of Namespaces.
func LocalNamespaces() []string {
	var names []string
	for _, n := range Namespaces() {
		names = append(names, n.Name)
	}
	return names
}

// NamespaceSwitch finds a namespace's enabled switch; ok is false for a
// name that is not a local namespace (an upstream's).
// It walks the table rather than Namespaces, since every call the agent
// decides asks it: no allocation.
func NamespaceSwitch(name string) (s Switch, ok bool) {
	for _, n := range bareNamespaces {
		if n.Name == name {
			return n.Switch, true
		}
	}
	for s := NoSwitch + 1; s < numSwitches; s++ {
		if slices.Contains(switches[s].namespaces, name) {
			return s, true
		}
	}
	return NoSwitch, false
}

// Valid reports whether s is a switch of the table (NoSwitch is not).
func (s Switch) Valid() bool { return s > NoSwitch && s < numSwitches }

// def is s's row; NoSwitch and out-of-range values have an empty one.
func (s Switch) def() switchDef {
	if !s.Valid() {
		return switchDef{}
	}
	return switches[s]
}

// Path is the dotted key, "gpio.writes", as config errors name keys.
func (s Switch) Path() string { return s.def().path }

// Key is the key as a person finds it in the file: "[gpio] writes".
func (s Switch) Key() string {
	table, key, ok := strings.Cut(s.def().path, ".")
	if !ok {
		return ""
	}
	return "[" + table + "] " + key
}

func (s Switch) String() string {
	if !s.Valid() {
		return "no switch"
	}
	return s.Key()
}

// Default is the switch's value in a fresh install.
func (s Switch) Default() bool { return s.def().def }

// Doc says what the switch gates.
func (s Switch) Doc() string { return s.def().doc }

// Reserved says why the switch exists while no tool names it ("" when one does).
func (s Switch) Reserved() string { return s.def().reserved }

// Write reports whether turning s on lets a caller change something.
func (s Switch) Write() bool { return s.def().write }

// Namespaces are the namespaces an enabled switch turns on and off.
func (s Switch) Namespaces() []string { return slices.Clone(s.def().namespaces) }

// Within is the enabled switch of s's table ([gpio] enabled for [gpio]
// writes): a write switch counts only while it is on too. NoSwitch for an
// enabled switch itself.
func (s Switch) Within() Switch {
	d := s.def()
	if d.namespaces != nil {
		return NoSwitch
	}
	table, _, _ := strings.Cut(d.path, ".")
	for _, o := range Switches() {
		if od := switches[o]; od.namespaces != nil && od.path == table+".enabled" {
			return o
		}
	}
	return NoSwitch
}

// On reports the switch's own key in c (not its table's enabled switch).
// NoSwitch is always on.
func (s Switch) On(c *Config) bool {
	if !s.Valid() {
		return true
	}
	return *switches[s].ptr(c)
}

// Effective reports whether s lets its tools run in c: its own key and, for
// a write switch, its table's enabled switch.
func (s Switch) Effective(c *Config) bool { return s.On(c) && s.Within().On(c) }

// Set turns the switch on or off in c; it does nothing for NoSwitch.
func (s Switch) Set(c *Config, on bool) {
	if s.Valid() {
		*switches[s].ptr(c) = on
	}
}

// WritesOn names the switches that let a caller change something, for a
// person checking a file: "[gpio] writes", "[system] reboot", ... A write
// switch under a namespace that is off does not count.
func (c Config) WritesOn() []string {
	var on []string
	for _, s := range Switches() {
		if s.Write() && s.Effective(&c) {
			on = append(on, s.Key())
		}
	}
	return on
}

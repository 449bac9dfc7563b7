package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// noArgs is the input of tools without parameters.
type noArgs struct{}

// basicInfo is system.get_basic_info: host name, model, CPU, memory, OS,
// kernel and uptime (tool catalog, spec 002 §3.1), plus serial and board revision.
type basicInfo struct {
	Hostname         string `json:"hostname"`
	Model            string `json:"model"`
	CPUArch          string `json:"cpu_arch"`
	CPUCores         int    `json:"cpu_cores"`
	MemoryTotalBytes uint64 `json:"memory_total_bytes"`
	OSName           string `json:"os_name"`
	OSVersion        string `json:"os_version"`
	KernelVersion    string `json:"kernel_version"`
	UptimeSeconds    uint64 `json:"uptime_seconds"`
	Serial           string `json:"serial,omitempty" jsonschema:"absent when the board does not report one (some kernels print only zeros)"`
	Revision         string `json:"revision,omitempty" jsonschema:"Raspberry Pi board revision code; absent when unknown"`
}

// basicLine is the one-line summary of the basics. A part the device does
// not report (no os-release in a minimal image, no kernel version) is left
// out rather than shown as an empty gap.
func basicLine(b basicInfo) string {
	head := b.Model
	if b.Hostname != "" {
		head = b.Hostname + ": " + b.Model
	}
	parts := []string{head}
	if osName := strings.TrimSpace(b.OSName + " " + b.OSVersion); osName != "" {
		parts = append(parts, osName)
	}
	if b.KernelVersion != "" {
		parts = append(parts, "kernel "+b.KernelVersion)
	}
	parts = append(parts, "up "+human(time.Duration(b.UptimeSeconds)*time.Second))
	return strings.Join(parts, ", ")
}

// throttlingFlags are the health snapshot's under-voltage, frequency-capped
// and throttled flags (tool catalog, spec 002 §3.2): what the firmware reports
// right now. Only a source that tells all three fills them in.
type throttlingFlags struct {
	UnderVoltage bool `json:"under_voltage"`
	FreqCapped   bool `json:"freq_capped"`
	Throttled    bool `json:"throttled"`
}

// throttlingHistory adds the since-boot bits, which answer "why did it throttle last night".
type throttlingHistory struct {
	SoftTempLimit         bool   `json:"soft_temp_limit"`
	UnderVoltageOccurred  bool   `json:"under_voltage_occurred"`
	FreqCappedOccurred    bool   `json:"freq_capped_occurred"`
	ThrottledOccurred     bool   `json:"throttled_occurred"`
	SoftTempLimitOccurred bool   `json:"soft_temp_limit_occurred"`
	Raw                   string `json:"raw" jsonschema:"get_throttled bit field, hex"`
	Source                string `json:"source" jsonschema:"firmware or vcgencmd"`
}

// HealthSnapshot is system.get_health_snapshot's one-shot reading of CPU,
// memory, disk, temperature and throttling (the tool catalog's HealthSnapshot,
// spec 002 §3.2), with additive fields.
type HealthSnapshot struct {
	Timestamp             string             `json:"timestamp"`
	CPUUsagePercent       float64            `json:"cpu_usage_percent"`
	MemoryUsedBytes       uint64             `json:"memory_used_bytes"`
	MemoryTotalBytes      uint64             `json:"memory_total_bytes"`
	DiskUsedBytes         uint64             `json:"disk_used_bytes"`
	DiskTotalBytes        uint64             `json:"disk_total_bytes"`
	CPUTemperatureCelsius *float64           `json:"cpu_temperature_celsius,omitempty"`
	ThrottlingFlags       *throttlingFlags   `json:"throttling_flags,omitempty"`
	TemperatureSource     string             `json:"temperature_source,omitempty"`
	CPUFrequencyMHz       *float64           `json:"cpu_frequency_mhz,omitempty"`
	LoadAverage           [3]float64         `json:"load_average" jsonschema:"1, 5 and 15 minute load averages"`
	MemoryAvailableBytes  uint64             `json:"memory_available_bytes"`
	SwapUsedBytes         uint64             `json:"swap_used_bytes"`
	SwapTotalBytes        uint64             `json:"swap_total_bytes"`
	UptimeSeconds         uint64             `json:"uptime_seconds"`
	ThrottlingHistory     *throttlingHistory `json:"throttling_history,omitempty"`
	ThrottlingSource      string             `json:"throttling_source" jsonschema:"where throttling comes from: firmware (get_throttled node), vcgencmd, hwmon rpi_volt (under-voltage now only: see under_voltage_now; throttling and since-boot history unknown), or none (this kernel offers no source: throttling and under-voltage are unknown, not absent)"`
	UnderVoltageNow       *bool              `json:"under_voltage_now,omitempty" jsonschema:"under-voltage right now, from whichever source reports it; absent when unknown"`
	Network               *networkBlock      `json:"network,omitempty" jsonschema:"network rates now, per interface and in total; absent when the counters cannot be read"`
	DiskIO                *diskIOBlock       `json:"disk_io,omitempty" jsonschema:"disk I/O rates now, per disk and in total; absent when the counters cannot be read"`
}

var healthProps = []tool.Prop{
	tool.P("timestamp", tool.Format("date-time")),
	tool.P("cpu_usage_percent", tool.Min(0), tool.Max(100)),
}

// systemRebootIn is the input of system.reboot and system.shutdown: a delay (the tool
// catalog's delay_seconds, spec 002 §3.3) or a time, and the guard arguments.
type systemRebootIn struct {
	DelaySeconds int    `json:"delay_seconds,omitempty"`
	At           string `json:"at,omitempty" jsonschema:"instead of a delay; at most 7 days ahead"`
	tool.GuardArgs
}

// systemShutdownIn is system.shutdown: the reboot's parameters plus the force flag
// the tool catalog foresees for it (spec 002 §3.4).
type systemShutdownIn struct {
	systemRebootIn
	Force bool `json:"force,omitempty" jsonschema:"replace a pending reboot"`
}

// SystemPowerOut is the reboot's result, whether it is scheduled and in how many
// seconds (tool catalog, spec 002 §3.3), with additive fields.
type SystemPowerOut struct {
	Scheduled             bool     `json:"scheduled"`
	EffectiveAfterSeconds int      `json:"effective_after_seconds"`
	Action                string   `json:"action" jsonschema:"reboot or poweroff"`
	ScheduledFor          string   `json:"scheduled_for,omitempty"`
	JobID                 string   `json:"job_id,omitempty" jsonschema:"cancel with system_cancel_scheduled_power_action or manage_cancel_job"`
	Replaces              string   `json:"replaces,omitempty" jsonschema:"an earlier scheduled action this one replaces"`
	DryRun                bool     `json:"dry_run,omitempty"`
	Plan                  []string `json:"plan,omitempty"`
}

// systemCancelPowerOut is system.cancel_scheduled_power_action.
type systemCancelPowerOut struct {
	Cancelled bool     `json:"cancelled"`
	Action    string   `json:"action,omitempty"`
	WasDueAt  string   `json:"was_due_at,omitempty"`
	DryRun    bool     `json:"dry_run,omitempty"`
	Plan      []string `json:"plan,omitempty"`
}

// systemCancelPowerIn is the input of cancelling tools: guard arguments only.
type systemCancelPowerIn struct {
	tool.GuardArgs
}

// systemTools are the system namespace's tools: the board's basics and
// health, what the caller may do on it, and the power actions.
type systemTools struct {
	sys    sysinfo.Source // the board's basics
	health *healthReader
	caps   *capsReader
	power  *powerTools
}

func (a *Agent) registerSystem() {
	(&systemTools{sys: a.sys, health: a.healthReader(), caps: a.capsReader(), power: a.powerTools()}).register(a.tools)
}

func (st *systemTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, basicInfo]{
		ID: "system.get_basic_info", Title: "Device basics",
		Description: "Model, CPU, memory, OS, kernel and uptime.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		OutProps:    []tool.Prop{tool.P("cpu_cores", tool.Min(1))},
		Run:         func(ctx context.Context, _ *tool.Call, _ noArgs) (basicInfo, error) { return st.basicInfo(ctx) },
		Summary:     func(_ noArgs, b basicInfo) string { return basicLine(b) },
	})
	tool.Add(r, st.health.spec("system.get_health_snapshot", "Health snapshot",
		"Right now: CPU, memory, disk, temperature, throttling and under-voltage flags, network and disk I/O rates."))
	tool.Add(r, tool.Spec[noArgs, capabilities]{
		ID: "system.get_capabilities", Title: "Capabilities",
		Description: "What this device has and what you may do: each tool's risk, role and availability.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run:         func(ctx context.Context, c *tool.Call, _ noArgs) (capabilities, error) { return st.caps.read(ctx, c) },
		Summary: func(_ noArgs, cp capabilities) string {
			n := 0
			for _, d := range cp.Domains {
				for _, t := range d.Tools {
					if t.Available {
						n++
					}
				}
			}
			return fmt.Sprintf("%s (%s mode): %d tools available to %s (%s)", cp.Device.Model, cp.Mode, n, cp.Caller.Principal, cp.Caller.Role)
		},
	})
	powerProps := []tool.Prop{tool.P("delay_seconds", tool.Min(0), tool.Max(proto.MaxDelaySeconds), tool.Default(5)), tool.P("at", tool.Format("date-time"), tool.MaxLen(40))}
	tool.Add(r, tool.Spec[systemRebootIn, SystemPowerOut]{
		ID: "system.reboot", Title: "Reboot",
		Description: "Schedule a reboot after delay_seconds or at a time; replaces an earlier schedule.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskHigh, Gate: config.SwitchSystemReboot},
		Destructive: true,
		Props:       powerProps,
		Slow:        true, // asks systemd-logind, through the helper (proto.Systemd)
		Run: func(ctx context.Context, c *tool.Call, in systemRebootIn) (SystemPowerOut, error) {
			return st.power.schedule(ctx, c, proto.ActionReboot, in)
		},
		Summary: powerLine,
	})
	tool.Add(r, tool.Spec[systemShutdownIn, SystemPowerOut]{
		ID: "system.shutdown", Title: "Shut down",
		Description: "Power off after delay_seconds or at a time. Someone must be there to power it on again.",
		Rule:        tool.Rule{MinRole: identity.RoleAdmin, Risk: tool.RiskCritical, Gate: config.SwitchSystemShutdown},
		Destructive: true,
		Props:       append(powerProps, tool.P("force", tool.Default(false))),
		Slow:        true, // asks systemd-logind, through the helper (proto.Systemd)
		Run: func(ctx context.Context, c *tool.Call, in systemShutdownIn) (SystemPowerOut, error) {
			if err := st.power.pendingReboot(ctx, in.Force); err != nil {
				return SystemPowerOut{}, err
			}
			return st.power.schedule(ctx, c, proto.ActionPoweroff, in.systemRebootIn)
		},
		Summary: func(in systemShutdownIn, o SystemPowerOut) string { return powerLine(in.systemRebootIn, o) },
	})
	tool.Add(r, tool.Spec[systemCancelPowerIn, systemCancelPowerOut]{
		ID: "system.cancel_scheduled_power_action", Title: "Cancel a scheduled reboot or shutdown",
		Description: "Cancel the pending reboot or power-off, whoever scheduled it.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow},
		Idempotent:  true,
		Slow:        true, // asks systemd-logind, through the helper (proto.Systemd)
		Run: func(ctx context.Context, c *tool.Call, _ systemCancelPowerIn) (systemCancelPowerOut, error) {
			return st.power.cancel(ctx, c)
		},
		Summary: func(_ systemCancelPowerIn, o systemCancelPowerOut) string {
			switch {
			case o.DryRun && o.Action != "":
				return fmt.Sprintf("would cancel the %s due at %s", o.Action, o.WasDueAt)
			case o.Cancelled:
				return fmt.Sprintf("cancelled the %s due at %s", o.Action, o.WasDueAt)
			}
			return "nothing was scheduled"
		},
	})
}

// healthReader is the health snapshot: the board's readings, the network
// and disk rates since the previous reading, and the interfaces' speeds.
type healthReader struct {
	sys sysinfo.Source
	io  *ioMeter // the agent's one meter, so a rate spans the calls of every namespace
	net network  // interface speeds
	log *slog.Logger
}

func (a *Agent) healthReader() *healthReader {
	return &healthReader{sys: a.sys, io: &a.io, net: a.net, log: a.log}
}

// spec is the snapshot tool; system and metrics both expose it, since the
// tool catalog gives metrics.get_realtime_metrics the same result (spec 002 §3.2, §4.1).
func (hr *healthReader) spec(id, title, desc string) tool.Spec[noArgs, HealthSnapshot] {
	return tool.Spec[noArgs, HealthSnapshot]{
		ID: id, Title: title, Description: desc,
		Rule:     tool.Rule{MinRole: identity.RoleRead},
		OutProps: healthProps,
		Run:      func(ctx context.Context, _ *tool.Call, _ noArgs) (HealthSnapshot, error) { return hr.read(ctx) },
		Summary:  func(_ noArgs, h HealthSnapshot) string { return healthLine(h) },
	}
}

func (st *systemTools) basicInfo(ctx context.Context) (basicInfo, error) {
	b, err := st.sys.Basic(ctx)
	if err != nil {
		return basicInfo{}, err
	}
	cores := b.CPUCores
	if cores < 1 {
		cores = 1
	}
	return basicInfo{Hostname: b.Hostname, Model: b.Model, CPUArch: b.CPUArch, CPUCores: cores, MemoryTotalBytes: b.MemoryTotalBytes,
		OSName: b.OSName, OSVersion: b.OSVersion, KernelVersion: b.KernelVersion, UptimeSeconds: b.UptimeSeconds,
		Serial: b.Serial, Revision: b.Revision}, nil
}

func (hr *healthReader) read(ctx context.Context) (HealthSnapshot, error) {
	h, err := hr.sys.Health(ctx)
	if err != nil {
		return HealthSnapshot{}, err
	}
	s := snapshotOf(h)
	net, disk, secs, ok, err := hr.io.rates(ctx, hr.sys)
	if err != nil {
		hr.log.Warn("network and disk rates unavailable", "err", err)
	}
	if ok {
		speeds := map[string]int{}
		if ifs, err := hr.net.Interfaces(ctx); err == nil {
			for _, i := range ifs {
				speeds[i.Name] = i.SpeedMbps
			}
		}
		s.Network, s.DiskIO = ioBlocks(net, disk, speeds, secs)
	}
	return s, nil
}

func snapshotOf(h sysinfo.Health) HealthSnapshot {
	s := HealthSnapshot{
		Timestamp: h.Time.UTC().Format(time.RFC3339), CPUUsagePercent: round2(clamp(h.CPUUsagePercent, 0, 100)),
		MemoryUsedBytes: h.MemoryUsedBytes, MemoryTotalBytes: h.MemoryTotalBytes, MemoryAvailableBytes: h.MemoryAvailableBytes,
		DiskUsedBytes: h.DiskUsedBytes, DiskTotalBytes: h.DiskTotalBytes, CPUTemperatureCelsius: round1p(h.TemperatureCelsius),
		TemperatureSource: h.TemperatureSource, CPUFrequencyMHz: round1p(h.CPUFreqMHz), LoadAverage: [3]float64{round2(h.Load1), round2(h.Load5), round2(h.Load15)},
		SwapUsedBytes: h.SwapUsedBytes, SwapTotalBytes: h.SwapTotalBytes, UptimeSeconds: h.UptimeSeconds,
	}
	s.ThrottlingSource = sysinfo.ThrottleNone
	if t := h.Throttle; t != nil {
		uv := t.UnderVoltage
		s.ThrottlingSource, s.UnderVoltageNow = t.Source, &uv
	}
	if t := h.Throttle; t != nil && !t.UnderVoltageOnly {
		s.ThrottlingFlags = &throttlingFlags{UnderVoltage: t.UnderVoltage, FreqCapped: t.FreqCapped, Throttled: t.Throttled}
		s.ThrottlingHistory = &throttlingHistory{SoftTempLimit: t.SoftTempLimit, UnderVoltageOccurred: t.UnderVoltageOccurred,
			FreqCappedOccurred: t.FreqCappedOccurred, ThrottledOccurred: t.ThrottledOccurred, SoftTempLimitOccurred: t.SoftTempLimitOccurred,
			Raw: fmt.Sprintf("0x%x", t.Raw), Source: t.Source}
	}
	return s
}

func healthLine(h HealthSnapshot) string {
	temp := "no temperature sensor"
	if h.CPUTemperatureCelsius != nil {
		temp = fmt.Sprintf("%.1f°C", *h.CPUTemperatureCelsius)
	}
	thr := "throttling unknown (no source on this kernel)"
	if uv := h.UnderVoltageNow; uv != nil && h.ThrottlingFlags == nil {
		thr = "no under-voltage now (" + h.ThrottlingSource + "; throttling unknown)"
		if *uv {
			thr = "UNDER-VOLTAGE now (" + h.ThrottlingSource + ")"
		}
	}
	if f := h.ThrottlingFlags; f != nil {
		thr = "not throttled"
		switch {
		case f.UnderVoltage:
			thr = "UNDER-VOLTAGE now"
		case f.Throttled || f.FreqCapped:
			thr = "THROTTLED now"
		case h.ThrottlingHistory != nil && (h.ThrottlingHistory.UnderVoltageOccurred || h.ThrottlingHistory.ThrottledOccurred):
			thr = "ok now, but under-voltage or throttling occurred since boot"
		}
	}
	return fmt.Sprintf("cpu %.0f%%, mem %s/%s, disk %s/%s, %s, %s", h.CPUUsagePercent, bytesH(h.MemoryUsedBytes), bytesH(h.MemoryTotalBytes),
		bytesH(h.DiskUsedBytes), bytesH(h.DiskTotalBytes), temp, thr)
}

// powerTools are reboot, shutdown and their cancelling: the helper that asks
// logind, the queue that outlives a restart, and the rate limit's setting.
// manage.cancel_job cancels a power job through them too.
type powerTools struct {
	conf   func() *config.Config // [system] min_power_interval
	helper *client.Client
	store  *store.DB    // the queued action and when the last one took effect
	flush  func() error // writes the sampler's buffered samples, at risk from a scheduled action on
	wake   func()       // tells the power watch an action was queued
	log    *slog.Logger
	wire   func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) powerTools() *powerTools {
	return &powerTools{conf: a.conf, helper: a.helper, store: a.store, flush: a.sampler.Flush, wake: a.powerJobs.wake, log: a.log, wire: a.wire}
}

// noLogind says what a helper's not_found for a power method means: it found
// no systemd-logind when it started and serves no power methods, which
// would otherwise read as an unknown method.
func noLogind(err error) error {
	if proto.CodeOf(err) != proto.CodeNotFound {
		return err
	}
	return tool.Errf(CodeFailedPrecondition, "reboot and shutdown are unavailable here: the helper found no systemd-logind when it started").
		With("needs", "systemd-logind").
		Hint("start systemd-logind, then restart the helper (systemctl restart raspi-mcp-helper); on an image without systemd, set [system] reboot = false and shutdown = false")
}

// state asks the helper what is scheduled; every power tool asks first.
func (p *powerTools) state(ctx context.Context) (proto.PowerStateResp, error) {
	st, err := client.Call(ctx, p.helper, proto.PowerState, proto.PowerStateReq{})
	return st, noLogind(err)
}

// schedule schedules (or plans) a reboot or poweroff through the root helper,
// keeps it in the jobs queue and enforces the minimum interval between two
// power actions. A dry run asks the helper what is scheduled now, so a
// passing dry run also proves the helper is reachable.
func (p *powerTools) schedule(ctx context.Context, c *tool.Call, action string, in systemRebootIn) (SystemPowerOut, error) {
	now := time.Now()
	req := proto.PowerScheduleReq{Action: action, DelaySeconds: in.DelaySeconds, Reason: c.Reason}
	when := now.Add(time.Duration(in.DelaySeconds) * time.Second)
	if in.At != "" {
		at, err := parseTime("at", in.At)
		if err != nil {
			return SystemPowerOut{}, err
		}
		if at.Before(now) || at.After(now.Add(proto.MaxAhead)) {
			return SystemPowerOut{}, tool.Errf(CodeInvalidArgument, "at %s is not between now and 7 days ahead", in.At).With("parameter", "at")
		}
		req.DelaySeconds, req.At, when = 0, at, at
	}
	if err := req.Validate(); err != nil {
		return SystemPowerOut{}, tool.Errf(CodeInvalidArgument, "%v", err)
	}
	if err := p.rateLimit(when); err != nil {
		return SystemPowerOut{}, err
	}
	state, err := p.state(ctx)
	if err != nil {
		return SystemPowerOut{}, err
	}
	out := SystemPowerOut{Action: action, EffectiveAfterSeconds: max(0, int(when.Sub(now).Round(time.Second).Seconds()))}
	if state.Scheduled {
		out.Replaces = fmt.Sprintf("%s at %s", state.Action, state.At.UTC().Format(time.RFC3339))
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{fmt.Sprintf("ask systemd-logind to %s at %s", action, when.UTC().Format(time.RFC3339))}
		if out.Replaces != "" {
			out.Plan = append(out.Plan, "replace the pending "+out.Replaces)
		}
		return out, nil
	}
	resp, err := client.Call(ctx, p.helper, proto.PowerSchedule, req)
	if err != nil {
		return SystemPowerOut{}, noLogind(err)
	}
	id, err := store.NewJobID()
	if err != nil {
		return SystemPowerOut{}, err
	}
	job := store.PowerJob{ID: id, Action: action, At: resp.At, Created: now, Principal: c.Principal.Name, CorrelationID: c.CorrelationID, Reason: c.Reason}
	if err := p.store.PutPowerJob(job); err != nil {
		return SystemPowerOut{}, tool.Errf(CodeInternal, "the %s is scheduled for %s but could not be queued: %v", action, resp.At.UTC().Format(time.RFC3339), err)
	}
	p.wake()
	// The buffered samples are at risk from here on: write them now (the
	// power watch flushes again just before the action is due).
	if err := p.flush(); err != nil {
		p.log.Error("flushing samples after scheduling a "+action, "err", err)
	}
	out.Scheduled, out.JobID = true, id
	out.ScheduledFor = resp.At.UTC().Format(time.RFC3339)
	return out, nil
}

// pendingReboot refuses, without force, to turn a scheduled reboot into a
// power-off: the device would not come back, and whoever asked for the
// reboot expects it to.
func (p *powerTools) pendingReboot(ctx context.Context, force bool) error {
	if force {
		return nil
	}
	state, err := p.state(ctx)
	if err != nil {
		return err
	}
	if state.Scheduled && state.Action == proto.ActionReboot {
		return tool.Errf(CodeFailedPrecondition, "a reboot is scheduled for %s; a power-off would replace it", state.At.UTC().Format(time.RFC3339)).
			With("pending_action", state.Action).With("pending_at", state.At.UTC().Format(time.RFC3339)).With("parameter", "force").
			Hint("set force to true to replace the reboot with the power-off, or cancel the reboot first").
			Suggest(tool.SuggestedCall{Tool: p.wire("system.cancel_scheduled_power_action"), Why: "cancel the pending reboot"})
	}
	return nil
}

// powerRateLimit refuses a power action taking effect sooner than
// [system] min_power_interval after the last one raspi-mcp scheduled: a
// model that reboots after every boot cannot loop the device. Replacing a
// pending action is not limited, as it has not happened yet.
func (p *powerTools) rateLimit(when time.Time) error {
	iv := p.conf().System.MinPowerInterval.D()
	last, err := p.store.LastPower()
	if err != nil || iv <= 0 || last.IsZero() {
		return err
	}
	if earliest := last.Add(iv); when.Before(earliest) {
		wait := int(math.Ceil(time.Until(earliest).Seconds()))
		return tool.Errf(CodeResourceExhausted, "one power action per %s: the last took effect at %s; the next may take effect from %s",
			iv, last.UTC().Format(time.RFC3339), earliest.UTC().Format(time.RFC3339)).
			With("last_power_action", last.UTC().Format(time.RFC3339)).With("earliest", earliest.UTC().Format(time.RFC3339)).
			With("retry_after_seconds", max(wait, 1)).With("config_key", "[system] min_power_interval").Retry().
			Hint(fmt.Sprintf("schedule it for %s or later with at, or wait", earliest.UTC().Format(time.RFC3339)))
	}
	return nil
}

func (p *powerTools) cancel(ctx context.Context, c *tool.Call) (systemCancelPowerOut, error) {
	state, err := p.state(ctx)
	if err != nil {
		return systemCancelPowerOut{}, err
	}
	out := systemCancelPowerOut{}
	if state.Scheduled {
		out.Action, out.WasDueAt = state.Action, state.At.UTC().Format(time.RFC3339)
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{"nothing is scheduled"}
		if state.Scheduled {
			out.Plan = []string{fmt.Sprintf("ask systemd-logind to cancel the %s due at %s", state.Action, out.WasDueAt)}
		}
		return out, nil
	}
	resp, err := client.Call(ctx, p.helper, proto.PowerCancel, proto.PowerCancelReq{})
	if err != nil {
		return systemCancelPowerOut{}, noLogind(err)
	}
	if err := p.store.FinishPower(false, time.Time{}); err != nil {
		return systemCancelPowerOut{}, err
	}
	out.Cancelled = resp.Cancelled
	if resp.Action != "" {
		out.Action = resp.Action
	}
	return out, nil
}

func powerLine(_ systemRebootIn, o SystemPowerOut) string {
	if o.DryRun {
		return fmt.Sprintf("would %s in %d s", o.Action, o.EffectiveAfterSeconds)
	}
	return fmt.Sprintf("%s scheduled in %d s (at %s), job %s", o.Action, o.EffectiveAfterSeconds, o.ScheduledFor, o.JobID)
}

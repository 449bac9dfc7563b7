package agent

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// serviceSummary is one systemd service as service.list_services lists it:
// name, state, sub-state, enablement, main pid and resource use (spec 002
// addendum §2.1), plus whether this device lets the caller change the unit.
type serviceSummary struct {
	Name          string   `json:"name"`
	DisplayName   string   `json:"display_name,omitempty"`
	Status        string   `json:"status"`
	SubStatus     string   `json:"sub_status,omitempty" jsonschema:"systemd's sub-state: running, exited, dead, failed, waiting, auto-restart, ..."`
	Enabled       bool     `json:"enabled" jsonschema:"starts at boot"`
	Preset        string   `json:"preset,omitempty"`
	PID           int      `json:"pid,omitempty"`
	MemoryBytes   uint64   `json:"memory_bytes,omitempty"`
	CPUPercent    *float64 `json:"cpu_percent,omitempty" jsonschema:"between this and the previous listing (100 = one core); absent on the first"`
	UptimeSeconds int64    `json:"uptime_seconds,omitempty"`
	RestartCount  int      `json:"restart_count"`
	UnitFileState string   `json:"unit_file_state,omitempty"`
	Description   string   `json:"description,omitempty"`
	CanStart      bool     `json:"can_start"`
	CanStop       bool     `json:"can_stop"`
	CanReload     bool     `json:"can_reload"`
	Changeable    bool     `json:"changeable" jsonschema:"in this device's [service] allow list"`
}

var serviceStatuses = []any{"active", "inactive", "activating", "deactivating", "failed"}

// serviceListIn filters service.list_services.
type serviceListIn struct {
	State   string `json:"state,omitempty"`
	Pattern string `json:"pattern,omitempty" jsonschema:"glob, e.g. nginx*"`
	Enabled *bool  `json:"enabled,omitempty" jsonschema:"starts at boot"`
	Limit   int    `json:"limit,omitempty"`
	Offset  int    `json:"offset,omitempty"`
}

// serviceListOut is one page of services.
type serviceListOut struct {
	Services      []serviceSummary `json:"services"`
	TotalCount    int              `json:"total_count"`
	ReturnedCount int              `json:"returned_count"`
	HasMore       bool             `json:"has_more"`
	NextOffset    int              `json:"next_offset,omitempty" jsonschema:"offset of the next page, when has_more"`
	Failed        []string         `json:"failed" jsonschema:"every failed unit, whatever the filter"`
}

// serviceValidateIn names one unit.
type serviceValidateIn struct {
	ServiceName string `json:"service_name" jsonschema:"e.g. nginx"`
}

// serviceStatusIn is service.get_status.
type serviceStatusIn struct {
	ServiceName string `json:"service_name" jsonschema:"e.g. nginx"`
	LogLines    int    `json:"log_lines,omitempty" jsonschema:"journal lines to include"`
}

// dependencies of a unit: what it requires, wants and orders itself against,
// and what requires or wants it (service.get_status, spec 002 addendum §2.2).
type dependencies struct {
	Requires   []string `json:"requires"`
	Wants      []string `json:"wants"`
	RequiredBy []string `json:"required_by"`
	WantedBy   []string `json:"wanted_by"`
	After      []string `json:"after"`
	Before     []string `json:"before"`
}

// logLine is one journal line of a unit.
type logLine struct {
	Timestamp string `json:"timestamp"`
	Level     string `json:"level"`
	Message   string `json:"message"`
}

// serviceDetail is service.get_status: the summary plus the unit file,
// commands, user, environment, restart policy, dependencies and recent logs
// (spec 002 addendum §2.2).
type serviceDetail struct {
	serviceSummary
	UnitFilePath     string            `json:"unit_file_path,omitempty"`
	FragmentPath     string            `json:"fragment_path,omitempty"`
	ExecStart        []string          `json:"exec_start"`
	ExecStop         []string          `json:"exec_stop"`
	WorkingDirectory string            `json:"working_directory,omitempty"`
	User             string            `json:"user,omitempty"`
	Group            string            `json:"group,omitempty"`
	Environment      map[string]string `json:"environment" jsonschema:"values of secret-looking keys are redacted"`
	RestartPolicy    string            `json:"restart_policy,omitempty"`
	Dependencies     dependencies      `json:"dependencies"`
	ActiveDependents []string          `json:"active_dependents" jsonschema:"active units that need this one: stopping it affects them"`
	RecentLogs       []logLine         `json:"recent_logs"`
	LogsNote         string            `json:"logs_note,omitempty"`
}

// serviceControlIn is service.control_service: a unit and an action (the tool
// catalog's start example, spec 002 §2.6.4), and force to stop a unit that
// active units depend on (spec 002 addendum §6.1).
type serviceControlIn struct {
	ServiceName                 string `json:"service_name" jsonschema:"e.g. nginx"`
	Action                      string `json:"action"`
	Force                       bool   `json:"force,omitempty" jsonschema:"stop despite dependents (admin)"`
	ConfirmBreakingDependencies bool   `json:"confirm_breaking_dependencies,omitempty" jsonschema:"required with force"`
	tool.GuardArgs
}

// serviceControlOut is the unit's state after the action and before it (the
// tool catalog's example answer, spec 002 §2.6.4), with sub-states and
// systemd's job result.
type serviceControlOut struct {
	ServiceName       string   `json:"service_name"`
	Action            string   `json:"action"`
	Status            string   `json:"status" jsonschema:"after the job; for a dry run, now"`
	PreviousStatus    string   `json:"previous_status"`
	SubStatus         string   `json:"sub_status,omitempty"`
	PreviousSubStatus string   `json:"previous_sub_status,omitempty"`
	MainPID           int      `json:"main_pid,omitempty"`
	JobResult         string   `json:"job_result,omitempty" jsonschema:"systemd's job result: done, failed, timeout, canceled, dependency, skipped"`
	Timestamp         string   `json:"timestamp"`
	DependentsStopped []string `json:"dependents_affected,omitempty"`
	DryRun            bool     `json:"dry_run,omitempty"`
	Plan              []string `json:"plan,omitempty"`
}

// serviceEnableIn is service.set_enabled.
type serviceEnableIn struct {
	ServiceName string `json:"service_name" jsonschema:"e.g. nginx"`
	Enabled     bool   `json:"enabled" jsonschema:"start at boot"`
	tool.GuardArgs
}

// fileChange is one symlink systemd created or removed.
type fileChange struct {
	Type        string `json:"type"`
	File        string `json:"file"`
	Destination string `json:"destination,omitempty"`
}

// serviceEnableOut reports the unit file state around the change.
type serviceEnableOut struct {
	ServiceName           string       `json:"service_name"`
	Enabled               bool         `json:"enabled"`
	UnitFileState         string       `json:"unit_file_state"`
	PreviousUnitFileState string       `json:"previous_unit_file_state"`
	Changes               []fileChange `json:"changes"`
	Warnings              []string     `json:"warnings" jsonschema:"from validating the unit file first"`
	DryRun                bool         `json:"dry_run,omitempty"`
	Plan                  []string     `json:"plan,omitempty"`
}

// serviceValidateOut is service.validate_unit_file: whether the unit file is valid,
// its warnings and errors, and whether it can be enabled (spec 002 addendum §6.2).
type serviceValidateOut struct {
	ServiceName  string   `json:"service_name"`
	Valid        bool     `json:"valid"`
	Warnings     []string `json:"warnings"`
	Errors       []string `json:"errors"`
	CanEnable    bool     `json:"can_enable"`
	FragmentPath string   `json:"fragment_path,omitempty"`
}

// unitCPU remembers each unit's CPU counter from the last listing, so
// cpu_percent is use between two listings (like top), not since start.
type unitCPU struct {
	mu   sync.Mutex
	at   time.Time
	nsec map[string]uint64
}

func (u *unitCPU) percents(now time.Time, list []units.Unit) map[string]float64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]float64{}
	dt := now.Sub(u.at)
	if u.nsec != nil && dt >= 500*time.Millisecond && dt <= 10*time.Minute {
		for _, x := range list {
			if prev, ok := u.nsec[x.Name]; ok && x.CPUNanos >= prev && x.CPUNanos > 0 {
				out[x.Name] = round1(float64(x.CPUNanos-prev) / float64(dt.Nanoseconds()) * 100)
			}
		}
	}
	u.at, u.nsec = now, make(map[string]uint64, len(list))
	for _, x := range list {
		u.nsec[x.Name] = x.CPUNanos
	}
	return out
}

// serviceTools are the service namespace's tools: the units they read,
// the helper that changes them, and the journal lines a status shows.
type serviceTools struct {
	conf    func() *config.Config
	units   units.Units    // systemd, read over D-Bus
	helper  *client.Client // starts, stops, enables
	journal journal.Reader
	wire    func(string) string // a tool's wire name, for suggested calls
	cpu     unitCPU             // each unit's CPU counter at the last listing
}

func (a *Agent) registerService() {
	(&serviceTools{conf: a.conf, units: a.units, helper: a.helper, journal: a.journal, wire: a.wire}).register(a.tools)
}

func (sv *serviceTools) register(r *tool.Registry) {
	gate := config.SwitchServiceControl
	nameProp := tool.P("service_name", tool.MinLen(1), tool.MaxLen(proto.MaxUnitName))
	tool.Add(r, tool.Spec[serviceListIn, serviceListOut]{
		ID: "service.list_services", Title: "Services",
		Description: "systemd services with state, enablement, resources and whether you may change them.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("state", tool.Enum(serviceStatuses...)), tool.P("pattern", tool.MaxLen(256)),
			tool.P("limit", tool.Min(1), tool.Max(1000), tool.Default(100)), tool.P("offset", tool.Min(0), tool.Max(100000), tool.Default(0))},
		OutProps: []tool.Prop{tool.P("services.status", tool.Enum(serviceStatuses...))},
		Run:      sv.list,
		Summary: func(in serviceListIn, o serviceListOut) string {
			s := fmt.Sprintf("%d of %d services", o.ReturnedCount, o.TotalCount)
			if len(o.Failed) > 0 {
				s += fmt.Sprintf("; FAILED: %s", strings.Join(o.Failed, ", "))
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[serviceStatusIn, serviceDetail]{
		ID: "service.get_status", Title: "Service status",
		Description: "One unit in detail: state, process, dependencies and dependents, latest journal lines.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{nameProp, tool.P("log_lines", tool.Min(0), tool.Max(50), tool.Default(10))},
		OutProps:    []tool.Prop{tool.P("status", tool.Enum(serviceStatuses...))},
		Example:     &serviceStatusIn{ServiceName: "nginx.service"},
		Run:         sv.get,
		Summary: func(_ serviceStatusIn, d serviceDetail) string {
			s := fmt.Sprintf("%s is %s (%s)", d.Name, d.Status, d.SubStatus)
			if d.PID > 0 {
				s += fmt.Sprintf(", pid %d", d.PID)
			}
			if d.Enabled {
				s += ", enabled"
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[serviceControlIn, serviceControlOut]{
		ID: "service.control_service", Title: "Start, stop, restart or reload a service",
		Description: "Start, stop, restart or reload an allowed unit and wait for the result. Stopping a unit others need is refused unless an admin passes force and confirm_breaking_dependencies.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskHigh, Gate: gate},
		Destructive: true,
		Props:       []tool.Prop{nameProp, tool.P("action", tool.Enum(proto.ServiceStart, proto.ServiceStop, proto.ServiceRestart, proto.ServiceReload))},
		OutProps:    []tool.Prop{tool.P("timestamp", tool.Format("date-time"))},
		Slow:        true, // waits for systemd's job
		Example:     &serviceControlIn{ServiceName: "nginx.service", Action: "restart"},
		Run:         sv.control,
		Summary: func(in serviceControlIn, o serviceControlOut) string {
			if o.DryRun {
				return fmt.Sprintf("would %s %s (now %s)", o.Action, o.ServiceName, o.Status)
			}
			return fmt.Sprintf("%s %s: %s → %s (job %s)", o.Action, o.ServiceName, o.PreviousStatus, o.Status, o.JobResult)
		},
	})
	tool.Add(r, tool.Spec[serviceEnableIn, serviceEnableOut]{
		ID: "service.set_enabled", Title: "Enable or disable a service at boot",
		Description: "Enable or disable an allowed unit at boot; its unit file is validated first.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskHigh, Gate: gate},
		Idempotent:  true,
		Destructive: true, // disabling stops a service from coming back after a reboot
		Props:       []tool.Prop{nameProp},
		Slow:        true, // validates the unit file and reloads systemd
		Example:     &serviceEnableIn{ServiceName: "nginx.service", Enabled: true},
		Run:         sv.setEnabled,
		Summary: func(in serviceEnableIn, o serviceEnableOut) string {
			if o.DryRun {
				return fmt.Sprintf("would %s %s (now %s)", enableVerb(in.Enabled), o.ServiceName, o.PreviousUnitFileState)
			}
			return fmt.Sprintf("%s %s: %s → %s", enableVerb(in.Enabled), o.ServiceName, o.PreviousUnitFileState, o.UnitFileState)
		},
	})
	tool.Add(r, tool.Spec[serviceValidateIn, serviceValidateOut]{
		ID: "service.validate_unit_file", Title: "Validate a unit file",
		Description: "Check a unit file (systemd-analyze verify and more): can it be enabled?",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{nameProp},
		Example:     &serviceValidateIn{ServiceName: "nginx.service"},
		Run: func(ctx context.Context, _ *tool.Call, in serviceValidateIn) (serviceValidateOut, error) {
			name, err := unitName(in.ServiceName)
			if err != nil {
				return serviceValidateOut{}, err
			}
			v, err := sv.units.Validate(ctx, name)
			if err != nil {
				return serviceValidateOut{}, sv.unitErr(name, err)
			}
			return serviceValidateOut{ServiceName: name, Valid: v.Valid, Warnings: nonNil(v.Warnings), Errors: nonNil(v.Errors), CanEnable: v.CanEnable, FragmentPath: v.FragmentPath}, nil
		},
		Summary: func(_ serviceValidateIn, v serviceValidateOut) string {
			if v.Valid {
				return fmt.Sprintf("%s is valid (%d warnings)", v.ServiceName, len(v.Warnings))
			}
			return fmt.Sprintf("%s is INVALID: %s", v.ServiceName, strings.Join(v.Errors, "; "))
		},
	})
}

func enableVerb(on bool) string {
	if on {
		return "enable"
	}
	return "disable"
}

// unitName normalises "nginx" to "nginx.service" and turns a bad name into
// invalid_argument naming the parameter.
func unitName(s string) (string, error) {
	n, err := units.Normalize(s)
	if err != nil {
		return "", tool.Errf(CodeInvalidArgument, "%v", err).With("parameter", "service_name").With("provided_value", s)
	}
	return n, nil
}

func (sv *serviceTools) unitErr(name string, err error) error {
	if errors.Is(err, units.ErrNotFound) {
		return tool.Errf(CodeNotFound, "service %q not found on this system", name).With("service_name", name).
			Suggest(tool.SuggestedCall{Tool: sv.wire("service.list_services"), Arguments: map[string]any{"pattern": "*" + strings.TrimSuffix(name, ".service") + "*"}, Why: "find the unit's exact name"})
	}
	var te *tool.Error
	if errors.As(err, &te) {
		return te
	}
	return tool.Errf(CodeUnavailable, "systemd: %v", err).Retry()
}

// status maps systemd's ActiveState onto the tool catalog's five values:
// active, inactive, activating, deactivating and failed.
func status(active string) string {
	switch active {
	case "active", "reloading", "refreshing":
		return "active"
	case "activating", "deactivating", "failed":
		return active
	}
	return "inactive"
}

func enabledState(s string) bool {
	return s == "enabled" || s == "enabled-runtime" || s == "alias"
}

func (sv *serviceTools) summaryOf(u units.Unit, cpu map[string]float64, now time.Time) serviceSummary {
	s := serviceSummary{Name: u.Name, Status: status(u.ActiveState), SubStatus: u.SubState, Enabled: enabledState(u.UnitFileState),
		PID: u.MainPID, MemoryBytes: u.MemoryBytes, RestartCount: u.Restarts, UnitFileState: u.UnitFileState, Description: u.Description,
		DisplayName: u.Description, CanStart: u.CanStart, CanStop: u.CanStop, CanReload: u.CanReload,
		Changeable: sv.conf().Service.Control && config.UnitMatches(sv.conf().Service.Allow, u.Name)}
	switch u.UnitFileState {
	case "static", "masked":
		s.Preset = u.UnitFileState
	default:
		if u.Preset == "enabled" || u.Preset == "disabled" {
			s.Preset = u.Preset
		}
	}
	if p, ok := cpu[u.Name]; ok {
		s.CPUPercent = &p
	}
	if !u.ActiveSince.IsZero() && s.Status == "active" {
		s.UptimeSeconds = max(0, int64(now.Sub(u.ActiveSince).Seconds()))
	}
	return s
}

func (sv *serviceTools) list(ctx context.Context, _ *tool.Call, in serviceListIn) (serviceListOut, error) {
	if in.Pattern != "" {
		if _, err := path.Match(in.Pattern, ""); err != nil {
			return serviceListOut{}, tool.Errf(CodeInvalidArgument, "pattern %q is not a valid glob: %v", in.Pattern, err).With("parameter", "pattern")
		}
	}
	list, err := sv.units.List(ctx)
	if err != nil {
		return serviceListOut{}, sv.unitErr("", err)
	}
	now := time.Now()
	cpu := sv.cpu.percents(now, list)
	out := serviceListOut{Services: []serviceSummary{}, Failed: []string{}}
	var match []serviceSummary
	for _, u := range list {
		s := sv.summaryOf(u, cpu, now)
		if s.Status == "failed" {
			out.Failed = append(out.Failed, s.Name)
		}
		if in.State != "" && s.Status != in.State {
			continue
		}
		if in.Enabled != nil && s.Enabled != *in.Enabled {
			continue
		}
		if in.Pattern != "" && !config.UnitMatches([]string{in.Pattern}, s.Name) { // "nginx*" and "nginx" match nginx.service
			continue
		}
		match = append(match, s)
	}
	out.TotalCount = len(match)
	if in.Offset < len(match) {
		end := min(len(match), in.Offset+in.Limit)
		out.Services = match[in.Offset:end]
		if out.HasMore = end < len(match); out.HasMore {
			out.NextOffset = end
		}
	}
	out.ReturnedCount = len(out.Services)
	return out, nil
}

func (sv *serviceTools) get(ctx context.Context, _ *tool.Call, in serviceStatusIn) (serviceDetail, error) {
	name, err := unitName(in.ServiceName)
	if err != nil {
		return serviceDetail{}, err
	}
	d, err := sv.units.Get(ctx, name)
	if err != nil {
		return serviceDetail{}, sv.unitErr(name, err)
	}
	deps, err := sv.units.ActiveDependents(ctx, name)
	if err != nil {
		return serviceDetail{}, sv.unitErr(name, err)
	}
	now := time.Now()
	out := serviceDetail{serviceSummary: sv.summaryOf(d.Unit, nil, now), UnitFilePath: d.FragmentPath, FragmentPath: d.FragmentPath,
		ExecStart: nonNil(d.ExecStart), ExecStop: nonNil(d.ExecStop), WorkingDirectory: d.WorkingDirectory, User: d.User, Group: d.Group,
		Environment: map[string]string{}, RestartPolicy: d.Restart, ActiveDependents: nonNil(deps), RecentLogs: []logLine{},
		Dependencies: dependencies{Requires: nonNil(d.Requires), Wants: nonNil(d.Wants), RequiredBy: nonNil(d.RequiredBy),
			WantedBy: nonNil(d.WantedBy), After: nonNil(d.After), Before: nonNil(d.Before)}}
	for k, v := range d.Environment {
		out.Environment[k] = procs.RedactValue(k, v)
	}
	if in.LogLines > 0 {
		if !config.UnitMatches(sv.conf().Logs.JournalUnits, name) {
			out.LogsNote = "this unit's journal is not in [logs] journal_units"
		} else {
			res, err := sv.journal.Query(ctx, journal.Query{Units: []string{name}, Priority: -1, Limit: in.LogLines, MaxBytes: 8 << 10})
			if err != nil {
				out.LogsNote = "journal: " + err.Error()
			}
			for _, e := range res.Entries {
				out.RecentLogs = append(out.RecentLogs, logLine{Timestamp: e.Time.UTC().Format(time.RFC3339), Level: e.Level, Message: e.Message})
			}
		}
	}
	return out, nil
}

// changeable checks the allow list; the helper checks it again.
func (sv *serviceTools) changeable(name string) error {
	if !config.UnitMatches(sv.conf().Service.Allow, name) {
		allow := sv.conf().Service.Allow
		if allow == nil {
			allow = []string{}
		}
		return tool.Errf(CodePermissionDenied, "%s is not in this device's [service] allow list", name).
			With("service_name", name).With("allowed_units", allow).
			Hint("the owner lists units that may be changed in [service] allow of " + config.DefaultPath)
	}
	return nil
}

func (sv *serviceTools) control(ctx context.Context, c *tool.Call, in serviceControlIn) (serviceControlOut, error) {
	name, err := unitName(in.ServiceName)
	if err != nil {
		return serviceControlOut{}, err
	}
	if err := sv.changeable(name); err != nil {
		return serviceControlOut{}, err
	}
	d, err := sv.units.Get(ctx, name)
	if err != nil {
		return serviceControlOut{}, sv.unitErr(name, err)
	}
	out := serviceControlOut{ServiceName: name, Action: in.Action, PreviousStatus: status(d.ActiveState), PreviousSubStatus: d.SubState,
		Status: status(d.ActiveState), SubStatus: d.SubState, MainPID: d.MainPID, Timestamp: time.Now().UTC().Format(time.RFC3339)}
	if in.Action == proto.ServiceReload && !d.CanReload {
		return out, tool.Errf(CodeFailedPrecondition, "%s cannot reload (it has no ExecReload)", name).With("service_name", name).
			Hint("use action restart instead")
	}
	var deps []string
	if in.Action == proto.ServiceStop {
		if deps, err = sv.units.ActiveDependents(ctx, name); err != nil {
			return out, sv.unitErr(name, err)
		}
	}
	if len(deps) > 0 {
		switch {
		case !in.Force:
			return out, tool.Errf(CodeFailedPrecondition, "cannot stop %s because %d active services depend on it", name, len(deps)).
				With("dependent_services", deps).With("suggestion", "Stop dependent services first, or use force=true to override").
				Hint("stop the dependent services first; an admin may pass force: true and confirm_breaking_dependencies: true")
		case c.Principal.Role < identity.RoleAdmin:
			return out, tool.Errf(CodePermissionDenied, "stopping %s while %d active services depend on it needs role admin; %s has role %s",
				name, len(deps), c.Principal.Name, c.Principal.Role).With("dependent_services", deps).With("required_role", "admin")
		case !in.ConfirmBreakingDependencies:
			return out, tool.Errf(CodeFailedPrecondition, "force needs confirm_breaking_dependencies: true; it will break %s", strings.Join(deps, ", ")).
				With("dependent_services", deps).With("missing", []string{"confirm_breaking_dependencies"})
		}
		out.DependentsStopped = deps
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{fmt.Sprintf("ask systemd (through the root helper) to %s %s, now %s (%s), and wait for the job", in.Action, name, d.ActiveState, d.SubState)}
		if len(deps) > 0 {
			out.Plan = append(out.Plan, "this will also stop or break: "+strings.Join(deps, ", "))
		}
		return out, nil
	}
	resp, err := client.Call(ctx, sv.helper, proto.ServiceControl, proto.ServiceControlReq{Unit: name, Action: in.Action, Force: len(deps) > 0})
	if err != nil {
		return out, err
	}
	out.Status, out.SubStatus, out.MainPID, out.JobResult = status(resp.After.ActiveState), resp.After.SubState, resp.After.MainPID, resp.Job
	out.PreviousStatus, out.PreviousSubStatus = status(resp.Before.ActiveState), resp.Before.SubState
	out.Timestamp = time.Now().UTC().Format(time.RFC3339)
	if resp.Job != "done" {
		return out, tool.Errf(CodeFailedPrecondition, "systemd's %s job for %s ended with %q; %s is now %s (%s)", in.Action, name, resp.Job, name, resp.After.ActiveState, resp.After.SubState).
			With("service_name", name).With("job_result", resp.Job).With("previous_status", out.PreviousStatus).With("status", out.Status).
			Suggest(tool.SuggestedCall{Tool: sv.wire("service.get_status"), Arguments: map[string]any{"service_name": name, "log_lines": 20}, Why: "read the unit's journal lines to see why"})
	}
	return out, nil
}

func (sv *serviceTools) setEnabled(ctx context.Context, c *tool.Call, in serviceEnableIn) (serviceEnableOut, error) {
	name, err := unitName(in.ServiceName)
	if err != nil {
		return serviceEnableOut{}, err
	}
	if err := sv.changeable(name); err != nil {
		return serviceEnableOut{}, err
	}
	d, err := sv.units.Get(ctx, name)
	if err != nil {
		return serviceEnableOut{}, sv.unitErr(name, err)
	}
	out := serviceEnableOut{ServiceName: name, Enabled: in.Enabled, PreviousUnitFileState: d.UnitFileState, UnitFileState: d.UnitFileState,
		Changes: []fileChange{}, Warnings: []string{}}
	if in.Enabled {
		v, err := sv.units.Validate(ctx, name)
		if err != nil {
			return out, sv.unitErr(name, err)
		}
		out.Warnings = nonNil(v.Warnings)
		if !v.CanEnable || !v.Valid {
			return out, tool.Errf(CodeFailedPrecondition, "%s cannot be enabled: %s", name, strings.Join(slices.Concat(v.Errors, v.Warnings), "; ")).
				With("service_name", name).With("errors", nonNil(v.Errors)).With("warnings", nonNil(v.Warnings))
		}
	}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{fmt.Sprintf("ask systemd (through the root helper) to %s %s (now %s)", enableVerb(in.Enabled), name, d.UnitFileState)}
		return out, nil
	}
	resp, err := client.Call(ctx, sv.helper, proto.ServiceEnable, proto.ServiceEnableReq{Unit: name, Enabled: in.Enabled})
	if err != nil {
		return out, err
	}
	out.PreviousUnitFileState, out.UnitFileState = resp.Before, resp.After
	for _, ch := range resp.Changes {
		out.Changes = append(out.Changes, fileChange{Type: ch.Type, File: ch.File, Destination: ch.Destination})
	}
	return out, nil
}

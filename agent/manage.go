package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// ServerStatus is manage.get_server_status (spec 002 §8.1) with what
// `raspi-mcp status` shows a person: helper, audit, database, recent trouble.
type ServerStatus struct {
	Version       string         `json:"version"`
	Build         string         `json:"build,omitempty"`
	StartedAt     string         `json:"started_at"`
	UptimeSeconds int64          `json:"uptime_seconds"`
	Mode          string         `json:"mode"`
	PID           int            `json:"pid"`
	ConfigSummary map[string]any `json:"config_summary"`
	Helper        HelperStatus   `json:"helper"`
	Audit         AuditStatus    `json:"audit"`
	Database      DatabaseStatus `json:"database"`
	Calls         CallStats      `json:"calls"`
	Tools         int            `json:"tools"`
	Caller        Caller         `json:"caller"`
	Device        DeviceCaps     `json:"device"`
	Recent        []AuditEntry   `json:"recent_problems" jsonschema:"the latest denied or failed calls, newest first"`
	Sampling      SamplingStatus `json:"sampling"`
}

// SamplingStatus is the metrics history at a glance.
type SamplingStatus struct {
	Jobs          []JobEntry `json:"jobs"`
	SamplesTaken  int64      `json:"samples_taken" jsonschema:"since the agent started"`
	LastFlush     string     `json:"last_flush,omitempty"`
	FlushError    string     `json:"flush_error,omitempty"`
	FlushInterval string     `json:"flush_interval"`
}

// HelperStatus is the root helper as the agent sees it.
type HelperStatus struct {
	Reachable bool   `json:"reachable"`
	Version   string `json:"version,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Backend   string `json:"backend,omitempty"`
	StartedAt string `json:"started_at,omitempty"`
	Socket    string `json:"socket"`
	Error     string `json:"error,omitempty"`
}

// AuditStatus counts the audit trail.
type AuditStatus struct {
	Records  int    `json:"records"`
	Denied   int    `json:"denied"`
	Errors   int    `json:"errors"`
	LastTime string `json:"last_time,omitempty"`
}

// DatabaseStatus is the bbolt file.
type DatabaseStatus struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
}

// CallStats counts tool calls since start.
type CallStats struct {
	Total  int64 `json:"total"`
	Failed int64 `json:"failed"`
}

func (a *Agent) registerManage() {
	add(a.tools, Spec[NoArgs, ServerStatus]{
		ID: "manage.get_server_status", Title: "Server status",
		Description: "Version, start time, configuration summary, root helper state, audit counts and the latest denied or failed calls.",
		Rule:        Rule{MinRole: RoleRead},
		OutProps:    []Prop{prop("started_at", format("date-time"))},
		Run:         func(ctx context.Context, c *Call, _ NoArgs) (ServerStatus, error) { return a.Status(ctx, c.Principal) },
		Summary: func(_ NoArgs, s ServerStatus) string {
			h := "helper DOWN"
			if s.Helper.Reachable {
				h = "helper up"
			}
			return fmt.Sprintf("raspi-mcp %s (%s), up %s, %s, %d audit records (%d denied, %d errors)", s.Version, s.Mode,
				human(time.Duration(s.UptimeSeconds)*time.Second), h, s.Audit.Records, s.Audit.Denied, s.Audit.Errors)
		},
	})
}

// Status gathers the server status.
func (a *Agent) Status(ctx context.Context, p Principal) (ServerStatus, error) {
	s := ServerStatus{
		Version: a.version, Build: a.build, StartedAt: a.started.UTC().Format(time.RFC3339), Mode: a.mode, PID: pid(),
		UptimeSeconds: int64(time.Since(a.started).Seconds()), Tools: len(a.tools.order),
		Caller: Caller{Principal: p.Name, Role: p.Role.String()},
		ConfigSummary: map[string]any{
			"socket": a.cfg.Agent.Socket, "helper_socket": a.cfg.Helper.Socket, "state": a.cfg.Agent.State,
			"dotted_names": a.cfg.Agent.ExposeDottedNames, "record_reads": a.cfg.Audit.RecordReads,
			"roles_users": len(a.cfg.Roles.Users), "roles_groups": len(a.cfg.Roles.Groups),
			"domains": map[string]bool{"system": a.cfg.System.Enabled, "metrics": a.cfg.Metrics.Enabled, "logs": a.cfg.Logs.Enabled, "manage": a.cfg.Manage.Enabled},
			"writes":  map[string]bool{"system.reboot": a.cfg.System.Reboot, "system.shutdown": a.cfg.System.Shutdown, "metrics.jobs": a.cfg.Metrics.Jobs},
		},
		Helper:   HelperStatus{Socket: a.cfg.Helper.Socket},
		Database: DatabaseStatus{Path: a.store.Path()},
	}
	if st, err := client.Call(ctx, a.helper, proto.Status, proto.StatusReq{}); err != nil {
		s.Helper.Error = err.Error()
	} else {
		s.Helper = HelperStatus{Reachable: true, Version: st.Helper, PID: st.PID, Backend: st.Backend,
			StartedAt: st.StartedAt.UTC().Format(time.RFC3339), Socket: a.cfg.Helper.Socket}
	}
	total, denied, errs, last, err := a.store.AuditCounts()
	if err != nil {
		return s, err
	}
	s.Audit = AuditStatus{Records: total, Denied: denied, Errors: errs}
	if total > 0 {
		s.Audit.LastTime = last.Time.UTC().Format(time.RFC3339)
	}
	if s.Database.SizeBytes, err = a.store.Size(); err != nil {
		return s, err
	}
	for _, t := range a.tools.order {
		s.Calls.Total += t.calls.Load()
		s.Calls.Failed += t.failures.Load()
	}
	recs, _, err := a.store.QueryAudit(store.AuditQuery{OnlyErrors: true, Limit: 5})
	if err != nil {
		return s, err
	}
	s.Recent = entriesOf(recs)
	jobs, err := a.listJobs()
	if err != nil {
		return s, err
	}
	taken, flushed, ferr := a.sampler.Stats()
	s.Sampling = SamplingStatus{Jobs: jobs.Jobs, SamplesTaken: taken, FlushInterval: a.cfg.Metrics.FlushInterval.D().String()}
	if !flushed.IsZero() {
		s.Sampling.LastFlush = flushed.UTC().Format(time.RFC3339)
	}
	if ferr != nil {
		s.Sampling.FlushError = ferr.Error()
	}
	if b, err := a.sys.Basic(ctx); err == nil {
		s.Device = DeviceCaps{Model: b.Model}
	}
	return s, nil
}

package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// ServerStatus is manage.get_server_status: version, build and start time
// (tool catalog, spec 002 §8.1), with what
// `raspi-mcp status` shows a person: helper, audit, database, recent trouble.
type ServerStatus struct {
	Version       string            `json:"version"`
	Build         string            `json:"build,omitempty"`
	StartedAt     string            `json:"started_at"`
	UptimeSeconds int64             `json:"uptime_seconds"`
	Mode          string            `json:"mode"`
	PID           int               `json:"pid"`
	ConfigSummary map[string]any    `json:"config_summary"`
	Helper        helperStatus      `json:"helper"`
	Audit         auditStatus       `json:"audit"`
	Database      databaseStatus    `json:"database"`
	Calls         callStats         `json:"calls"`
	Tools         int               `json:"tools"`
	Caller        caller            `json:"caller"`
	Device        deviceCaps        `json:"device"`
	Recent        []AuditEntry      `json:"recent_problems" jsonschema:"the latest denied or failed calls, newest first; empty unless you may read the audit trail (problems says why)"`
	Problems      problemCounts     `json:"problems" jsonschema:"denied or failed calls lately, counted for every caller"`
	Sampling      samplingStatus    `json:"sampling"`
	Upstreams     []upstreamStatus  `json:"upstreams" jsonschema:"the LAN's MCP servers mounted here ([[upstream]])"`
	LastUpdate    *lastUpdateStatus `json:"last_update,omitempty" jsonschema:"the self-update under way or the latest one (manage_update_server)"`
	HTTP          *httpStatus       `json:"http,omitempty" jsonschema:"the Streamable HTTP endpoint, when it serves"`
}

// problemCounts counts the denied or failed calls of the last hour and day.
// Who made them, from where and why is the audit trail's: a caller who may
// not read logs_get_recent_audit_logs gets the counts and, in Withheld, why
// recent_problems is empty and who may read it.
type problemCounts struct {
	LastHour int    `json:"last_hour"`
	LastDay  int    `json:"last_day"`
	Withheld string `json:"withheld,omitempty" jsonschema:"why recent_problems is empty for you, and which tool and role show the records"`
}

// samplingStatus is the metrics history at a glance.
type samplingStatus struct {
	Jobs          []jobEntry `json:"jobs"`
	SamplesTaken  int64      `json:"samples_taken" jsonschema:"since the agent started"`
	LastFlush     string     `json:"last_flush,omitempty"`
	FlushError    string     `json:"flush_error,omitempty"`
	FlushInterval string     `json:"flush_interval"`
}

// helperStatus is the root helper as the agent sees it.
type helperStatus struct {
	Reachable bool   `json:"reachable"`
	Version   string `json:"version,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Backend   string `json:"backend,omitempty"`
	StartedAt string `json:"started_at,omitempty"`
	Socket    string `json:"socket"`
	Error     string `json:"error,omitempty"`
}

// auditStatus counts the audit trail and says whether it still holds.
type auditStatus struct {
	Records  int    `json:"records"`
	Denied   int    `json:"denied"`
	Errors   int    `json:"errors"`
	LastTime string `json:"last_time,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	// Tampered is set when the agent found the trail cut, rewritten or
	// wiped (at start, or when the helper's witness refused a head).
	// Findings say what is missing; they stay until the trail is repaired
	// and the agent restarted. `raspi-mcp audit verify` has the details.
	Tampered bool     `json:"tampered"`
	Findings []string `json:"findings,omitempty" jsonschema:"what does not hold: records missing or rewritten compared with the root helper's witness"`
	// WitnessSeq is the last head the root helper confirmed; Unwitnessed
	// counts newer records it has not (yet) confirmed; WitnessError says
	// why, when the last attempt failed.
	WitnessSeq   uint64 `json:"witness_seq,omitempty"`
	Unwitnessed  int    `json:"unwitnessed,omitempty"`
	WitnessError string `json:"witness_error,omitempty"`
}

// databaseStatus is the bbolt file.
type databaseStatus struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
}

// callStats counts tool calls since start.
type callStats struct {
	Total  int64 `json:"total"`
	Failed int64 `json:"failed"`
}

// manageTools are the server-status tool's: what the status reports and
// where each part is read. The doors and the LAN upstreams are built after
// the catalog (from the server it fills), so they are read through funcs.
type manageTools struct {
	loaded               func() *loadedConfig // the configuration in force and its generation
	version, build, mode string
	started              time.Time
	store                *store.DB // audit counts, the database's size, the last self-update
	helper               *client.Client
	witness              *witnesser
	tools                *tool.Registry // the tool count and call counters
	sampler              *sampler
	mayReadAudit         auditReader
	device               func(context.Context) (deviceCaps, error)
	upstreams            func() []upstreamStatus
	http                 func() *httpStatus
	wire                 func(string) string
}

// newManageTools is the status tool's view of the agent; the tests read
// the status through it without a call that would add an audit record.
func (a *Agent) newManageTools() *manageTools {
	return &manageTools{loaded: a.cfg.Load, version: a.version, build: a.build, mode: a.mode, started: a.started,
		store: a.store, helper: a.helper, witness: a.witness, tools: a.tools, sampler: a.sampler, mayReadAudit: a.mayReadAudit,
		device: func(ctx context.Context) (deviceCaps, error) { return deviceOf(ctx, a.sys) }, upstreams: a.lanStatus, http: func() *httpStatus { return a.doors.HTTPStatus() }, wire: a.wire}
}

func (a *Agent) registerManage() { a.newManageTools().register(a.tools) }

func (m *manageTools) conf() *config.Config { return m.loaded().cfg }

func (m *manageTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, ServerStatus]{
		ID: "manage.get_server_status", Title: "Server status",
		Description: "raspi-mcp's version, uptime, helper state, audit counts and latest denials.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		OutProps:    []tool.Prop{tool.P("started_at", tool.Format("date-time"))},
		Run: func(ctx context.Context, c *tool.Call, _ noArgs) (ServerStatus, error) {
			return m.status(ctx, c.Principal)
		},
		Summary: func(_ noArgs, s ServerStatus) string {
			h := "helper DOWN"
			if s.Helper.Reachable {
				h = "helper up"
			}
			audit := ""
			if s.Audit.Tampered {
				audit = "; AUDIT TRAIL TAMPERED: " + s.Audit.Findings[0]
			}
			return fmt.Sprintf("raspi-mcp %s (%s), up %s, %s, %d audit records (%d denied, %d errors)%s", s.Version, s.Mode,
				human(time.Duration(s.UptimeSeconds)*time.Second), h, s.Audit.Records, s.Audit.Denied, s.Audit.Errors, audit)
		},
	})
}

// status gathers the server status.
func (m *manageTools) status(ctx context.Context, p identity.Principal) (ServerStatus, error) {
	l := m.loaded()
	cfg := l.cfg
	s := ServerStatus{
		Version: m.version, Build: m.build, StartedAt: m.started.UTC().Format(time.RFC3339), Mode: m.mode, PID: pid(),
		UptimeSeconds: int64(time.Since(m.started).Seconds()),
		Caller:        caller{Principal: p.Name, Role: p.Role.String()},
		ConfigSummary: map[string]any{
			"socket": cfg.Agent.Socket, "helper_socket": cfg.Helper.Socket, "state": cfg.Agent.State,
			"dotted_names": cfg.Agent.ExposeDottedNames, "record_reads": cfg.Audit.RecordReads,
			"roles_users": len(cfg.Roles.Users), "roles_groups": len(cfg.Roles.Groups),
			"domains": map[string]bool{"system": cfg.System.Enabled, "metrics": cfg.Metrics.Enabled, "logs": cfg.Logs.Enabled, "manage": cfg.Manage.Enabled},
			"writes":  writesOn(cfg),
			// Which reading of the files is in force: 1 at start, one
			// more per reload (SIGHUP, manage_config_apply).
			"generation": l.gen, "loaded_at": l.at.UTC().Format(time.RFC3339),
		},
		Helper:   helperStatus{Socket: cfg.Helper.Socket},
		Database: databaseStatus{Path: m.store.Path()},
		HTTP:     m.http(),
	}
	if st, err := client.Call(ctx, m.helper, proto.Status, proto.StatusReq{}); err != nil {
		s.Helper.Error = err.Error()
	} else {
		s.Helper = helperStatus{Reachable: true, Version: st.Helper, PID: st.PID, Backend: st.Backend,
			StartedAt: st.StartedAt.UTC().Format(time.RFC3339), Socket: m.conf().Helper.Socket}
	}
	total, denied, errs, last, err := m.store.AuditCounts()
	if err != nil {
		return s, err
	}
	s.Audit = auditStatus{Records: total, Denied: denied, Errors: errs}
	if total > 0 {
		s.Audit.LastTime = last.Time.UTC().Format(time.RFC3339)
		s.Audit.LastSeq = last.Seq
	}
	acked, werr, findings := m.witness.status()
	s.Audit.Tampered, s.Audit.Findings = len(findings) > 0, findings
	s.Audit.WitnessSeq, s.Audit.WitnessError = acked.Seq, werr
	if last.Seq > acked.Seq {
		s.Audit.Unwitnessed = int(min(last.Seq-acked.Seq, uint64(total)))
	}
	if s.Database.SizeBytes, err = m.store.Size(); err != nil {
		return s, err
	}
	tools := m.tools.All()
	s.Tools = len(tools)
	for _, t := range tools {
		st := t.Stats()
		s.Calls.Total += st.Calls
		s.Calls.Failed += st.Failures
	}
	if s.Recent, s.Problems, err = m.recentProblems(p); err != nil {
		return s, err
	}
	s.Upstreams = m.upstreams()
	jobs, err := jobsFor(m.sampler, m.mayReadAudit, p)
	if err != nil {
		return s, err
	}
	taken, flushed, ferr := m.sampler.Stats()
	s.Sampling = samplingStatus{Jobs: jobs.Jobs, SamplesTaken: taken, FlushInterval: m.conf().Metrics.FlushInterval.D().String()}
	if !flushed.IsZero() {
		s.Sampling.LastFlush = flushed.UTC().Format(time.RFC3339)
	}
	if ferr != nil {
		s.Sampling.FlushError = ferr.Error()
	}
	if d, err := m.device(ctx); err == nil {
		s.Device = d
	}
	if s.LastUpdate, err = lastUpdate(m.store); err != nil {
		return s, err
	}
	return s, nil
}

// auditTool is the tool whose rule says who reads the audit trail's
// records: whoever it refuses reads none of them through another tool or
// resource either (raspi://audit/recent is that tool; the server status and
// raspi://state/summary show records only to whom it allows).
const auditTool = "logs.get_recent_audit_logs"

// mayReadAudit is nil when p may read the audit trail's records, else the
// refusal logs_get_recent_audit_logs would give p now.
func (a *Agent) mayReadAudit(p identity.Principal) *tool.Error {
	return a.pipe.May(p, auditTool)
}

// auditRole is the role the audit trail's tool asks for, as the status
// names it to a caller it withholds the records from.
func auditRole(r *tool.Registry) identity.Role {
	t, _ := r.Get(auditTool)
	return t.Rule().MinRole
}

// withheldName stands in for another principal's name a caller may not read.
const withheldName = "[withheld]"

// auditReader is mayReadAudit as the tools that show principals' names
// hold it: a namespace gets this one question, not the pipeline.
type auditReader func(identity.Principal) *tool.Error

// nameFor is principal name as p may see it: its own, or anyone's to an
// audit reader; withheldName otherwise. Who queued a job is the audit
// trail's to say.
func (may auditReader) nameFor(p identity.Principal, name string) string {
	if name == "" || name == p.Name || may(p) == nil {
		return name
	}
	return withheldName
}

// jobsFor is the sampling jobs of s as p may see them.
func jobsFor(s *sampler, may auditReader, p identity.Principal) (jobList, error) {
	l, err := listJobs(s)
	for i := range l.Jobs {
		if !l.Jobs[i].Default { // the default job's is "config", no principal
			l.Jobs[i].CreatedBy = may.nameFor(p, l.Jobs[i].CreatedBy)
		}
	}
	return l, err
}

// recentProblems is the status's view of the latest denied or failed
// calls: counts of the last hour and day for every caller, the records
// themselves (who, from where, why) only for a caller who may read the
// audit trail.
func (m *manageTools) recentProblems(p identity.Principal) ([]AuditEntry, problemCounts, error) {
	var pc problemCounts
	now := time.Now()
	for _, w := range []struct {
		n    *int
		back time.Duration
	}{{&pc.LastHour, time.Hour}, {&pc.LastDay, 24 * time.Hour}} {
		_, n, err := m.store.QueryAudit(store.AuditQuery{OnlyErrors: true, Since: now.Add(-w.back), Limit: 1})
		if err != nil {
			return nil, pc, err
		}
		*w.n = n
	}
	if derr := m.mayReadAudit(p); derr != nil {
		pc.Withheld = fmt.Sprintf("who called, from where and why is the audit trail's, which %s shows to role %s and above: %s",
			m.wire(auditTool), auditRole(m.tools), derr.Message)
		return []AuditEntry{}, pc, nil
	}
	recs, _, err := m.store.QueryAudit(store.AuditQuery{OnlyErrors: true, Limit: 5})
	if err != nil {
		return nil, pc, err
	}
	return entriesOf(recs), pc, nil
}

// queuedJob is one entry of the jobs queue, whatever its kind.
type queuedJob struct {
	JobID     string `json:"job_id"`
	Kind      string `json:"kind" jsonschema:"sampling, gpio_revert, power, os_update or self_update"`
	Status    string `json:"status"`
	Summary   string `json:"summary"`
	Due       string `json:"due,omitempty" jsonschema:"when it acts next (gpio_revert, power)"`
	CreatedBy string `json:"created_by,omitempty" jsonschema:"who queued it; [withheld] unless it is you or you may read the audit trail"`
	Cancel    string `json:"cancel_effect" jsonschema:"what manage_cancel_job does to it"`
}

// jobsListOut is manage.list_jobs.
type jobsListOut struct {
	Jobs       []queuedJob `json:"jobs"`
	TotalCount int         `json:"total_count"`
}

// jobsCancelIn is manage.cancel_job.
type jobsCancelIn struct {
	JobID string `json:"job_id" jsonschema:"from manage_list_jobs"`
	tool.GuardArgs
}

// jobsCancelOut says what cancelling did.
type jobsCancelOut struct {
	JobID     string   `json:"job_id"`
	Kind      string   `json:"kind"`
	Cancelled bool     `json:"cancelled"`
	Effect    string   `json:"effect"`
	DryRun    bool     `json:"dry_run,omitempty"`
	Plan      []string `json:"plan,omitempty"`
}

const gpioJobPrefix = "gpio-revert-"

// jobQueue is everything queued on the device that survives a restart,
// each kind read where it is kept.
type jobQueue struct {
	store   *store.DB      // a scheduled power action, a self-update, GPIO reverts
	sampler *sampler       // sampling jobs
	helper  *client.Client // runs of apt
}

func (a *Agent) jobQueue() jobQueue {
	return jobQueue{store: a.store, sampler: a.sampler, helper: a.helper}
}

// jobsTools are manage.list_jobs and manage.cancel_job: the queue, and for
// cancelling, what stops each kind of job. Cancelling asks the pipeline
// whether the caller may call the job's own tool, so that namespace's
// switch applies.
type jobsTools struct {
	queue        jobQueue
	may          func(identity.Principal, string) *tool.Error // the pipeline's May
	mayReadAudit auditReader
	cancelPower  func(context.Context, *tool.Call) (systemCancelPowerOut, error)
	revert       func(context.Context, store.GPIORevert) error // reverts a timed GPIO write now
	wire         func(string) string
}

func (a *Agent) registerJobs() {
	(&jobsTools{queue: a.jobQueue(), may: a.pipe.May, mayReadAudit: a.mayReadAudit, cancelPower: a.powerTools().cancel,
		revert: a.reverter.revert, wire: a.wire}).register(a.tools)
}

func (jt *jobsTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, jobsListOut]{
		ID: "manage.list_jobs", Title: "Queued jobs",
		Description: "Pending jobs: sampling jobs, timed GPIO writes, a scheduled reboot or shutdown.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run: func(ctx context.Context, c *tool.Call, _ noArgs) (jobsListOut, error) {
			out, err := jt.queue.list()
			for i := range out.Jobs {
				out.Jobs[i].CreatedBy = jt.mayReadAudit.nameFor(c.Principal, out.Jobs[i].CreatedBy)
			}
			return out, err
		},
		Summary: func(_ noArgs, o jobsListOut) string {
			s := fmt.Sprintf("%d jobs", o.TotalCount)
			for _, j := range o.Jobs {
				if j.Kind == "power" {
					s += "; " + j.Summary
				}
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[jobsCancelIn, jobsCancelOut]{
		ID: "manage.cancel_job", Title: "Cancel a queued job",
		Description: "Cancel a job from manage_list_jobs; a timed GPIO write reverts now.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow},
		Props:       []tool.Prop{tool.P("job_id", tool.MinLen(1), tool.MaxLen(64))},
		Example:     &jobsCancelIn{JobID: "job-nope"}, // no such job: cancels nothing
		Run:         jt.cancel,
		Summary: func(_ jobsCancelIn, o jobsCancelOut) string {
			if o.DryRun {
				return fmt.Sprintf("would cancel %s (%s): %s", o.JobID, o.Kind, o.Effect)
			}
			return fmt.Sprintf("cancelled %s (%s): %s", o.JobID, o.Kind, o.Effect)
		},
	})
}

// list is the queue as stored: who queued each job by name, withheld by the caller.
func (q jobQueue) list() (jobsListOut, error) {
	out := jobsListOut{Jobs: []queuedJob{}}
	if pj, ok, err := q.store.PendingPower(); err != nil {
		return out, err
	} else if ok {
		out.Jobs = append(out.Jobs, queuedJob{JobID: pj.ID, Kind: "power", Status: "scheduled", Due: pj.At.UTC().Format(time.RFC3339),
			Summary: fmt.Sprintf("%s at %s", pj.Action, pj.At.UTC().Format(time.RFC3339)), CreatedBy: pj.Principal, Cancel: "the " + pj.Action + " is called off"})
	}
	if uj, ok, err := q.store.PendingUpdate(); err != nil {
		return out, err
	} else if ok {
		out.Jobs = append(out.Jobs, queuedJob{JobID: uj.ID, Kind: "self_update", Status: "running",
			Summary: fmt.Sprintf("raspi-mcp %s to %s from %s", uj.From, uj.To, uj.Channel), CreatedBy: uj.Principal,
			Cancel: "cannot be cancelled: it ends by itself, and rolls back if the new version is not healthy"})
	}
	reverts, err := q.store.ListGPIOReverts()
	if err != nil {
		return out, err
	}
	for _, r := range reverts {
		out.Jobs = append(out.Jobs, queuedJob{JobID: fmt.Sprintf("%s%d", gpioJobPrefix, r.Pin), Kind: "gpio_revert", Status: "waiting",
			Due: r.Due.UTC().Format(time.RFC3339), Summary: fmt.Sprintf("GPIO%d back to %s", r.Pin, level(&r.Value)), CreatedBy: r.Principal,
			Cancel: "the pin reverts now"})
	}
	sampling, err := listJobs(q.sampler)
	if err != nil {
		return out, err
	}
	for _, j := range sampling.Jobs {
		out.Jobs = append(out.Jobs, queuedJob{JobID: j.JobID, Kind: "sampling", Status: j.Status, CreatedBy: j.CreatedBy,
			Summary: fmt.Sprintf("every %d s, kept %d h, %d samples", j.IntervalSeconds, j.RetentionHours, j.Samples), Cancel: "sampling stops; samples stay"})
	}
	out.Jobs = append(out.Jobs, osJobs(q.helper)...)
	out.TotalCount = len(out.Jobs)
	return out, nil
}

func (jt *jobsTools) cancel(ctx context.Context, c *tool.Call, in jobsCancelIn) (jobsCancelOut, error) {
	list, err := jt.queue.list()
	if err != nil {
		return jobsCancelOut{}, err
	}
	i := slices.IndexFunc(list.Jobs, func(j queuedJob) bool { return j.JobID == in.JobID })
	if i < 0 {
		return jobsCancelOut{}, tool.Errf(CodeNotFound, "no queued job %q", in.JobID).With("parameter", "job_id").
			Suggest(tool.SuggestedCall{Tool: jt.wire("manage.list_jobs"), Why: "see the queued jobs and their ids"})
	}
	j := list.Jobs[i]
	out := jobsCancelOut{JobID: j.JobID, Kind: j.Kind, Effect: j.Cancel}
	if j.Kind == "self_update" {
		// Stopping apt half-way would leave neither version whole; the
		// updater's own deadline and rollback are the way out.
		return out, tool.Errf(CodeFailedPrecondition, "self-update %s %s", j.JobID, j.Cancel).With("job_id", j.JobID)
	}
	// The job's own namespace switch applies, as if its own tool were called.
	gates := map[string]string{
		"sampling":    "metrics.stop_sampling_job",
		"gpio_revert": "gpio.write_pin",
		"power":       "system.cancel_scheduled_power_action",
		osJobKind:     "manage.preview_os_updates",
	}
	if err := jt.may(c.Principal, gates[j.Kind]); err != nil {
		return out, err
	}
	if c.DryRun {
		out.DryRun, out.Plan = true, []string{fmt.Sprintf("cancel %s (%s): %s", j.JobID, j.Summary, j.Cancel)}
		return out, nil
	}
	switch j.Kind {
	case osJobKind:
		if err := cancelOSJob(ctx, jt.queue.helper, j.JobID); err != nil {
			return out, err
		}
	case "power":
		if _, err := jt.cancelPower(ctx, c); err != nil {
			return out, err
		}
	case "gpio_revert":
		var pin int
		fmt.Sscanf(strings.TrimPrefix(j.JobID, gpioJobPrefix), "%d", &pin)
		rv, ok, err := jt.queue.store.GPIORevertOf(pin)
		if err != nil {
			return out, err
		}
		if ok {
			if err := jt.revert(ctx, rv); err != nil {
				return out, err
			}
		}
	case "sampling":
		if j.Status == "stopped" {
			out.Effect = "already stopped"
			return out, nil
		}
		if _, err := jt.queue.sampler.StopJob(j.JobID); err != nil {
			return out, err
		}
	}
	out.Cancelled = true
	return out, nil
}

// writesOn is every write switch that is on, as config check names them.
func writesOn(c *config.Config) map[string]bool {
	on := map[string]bool{}
	for _, w := range c.WritesOn() {
		on[w] = true
	}
	return on
}

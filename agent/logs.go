package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// AuditEntry is one audit record as clients see it.
type AuditEntry struct {
	Seq           uint64 `json:"seq"`
	Time          string `json:"time"`
	CorrelationID string `json:"correlation_id"`
	Principal     string `json:"principal"`
	Remote        string `json:"remote,omitempty" jsonschema:"an HTTP caller's address (host:port)"`
	Role          string `json:"role"`
	Tool          string `json:"tool"`
	Decision      string `json:"decision" jsonschema:"allow, deny or declined_by_user (the person at the client said no)"`
	DryRun        bool   `json:"dry_run"`
	Reason        string `json:"reason,omitempty"`
	Intent        string `json:"intent,omitempty"`
	Elicitation   string `json:"elicitation,omitempty" jsonschema:"the person's answer when the client asked them to confirm"`
	Channel       string `json:"channel,omitempty" jsonschema:"what approved or refused a high or critical call: button, console:USER, client:elicitation, client:change_token or client:confirm"`
	Approver      string `json:"approver,omitempty" jsonschema:"who answered on the device"`
	WaitedMS      int64  `json:"waited_ms,omitempty" jsonschema:"how long the call waited for the device"`
	Traceparent   string `json:"traceparent,omitempty" jsonschema:"the W3C traceparent the client sent with the call"`
	Profile       string `json:"profile,omitempty" jsonschema:"the profile that narrowed the caller's role"`
	ErrorCode     string `json:"error_code,omitempty"`
	Message       string `json:"message,omitempty"`
	DurationMS    int64  `json:"duration_ms"`
	InHash        string `json:"in_hash"`
	OutHash       string `json:"out_hash,omitempty"`
	Hash          string `json:"hash"`
}

func entriesOf(recs []store.AuditRecord) []AuditEntry {
	out := make([]AuditEntry, 0, len(recs))
	for _, r := range recs {
		out = append(out, AuditEntry{Seq: r.Seq, Time: r.Time.UTC().Format(time.RFC3339Nano), CorrelationID: r.CorrelationID,
			Principal: r.Principal, Remote: r.Remote, Role: r.Role, Tool: r.Tool, Decision: r.Decision, DryRun: r.DryRun, Reason: r.Reason, Intent: r.Intent,
			Elicitation: r.Elicitation, Channel: r.Channel, Approver: r.Approver, WaitedMS: r.WaitedMS, Traceparent: r.Traceparent, Profile: r.Profile, ErrorCode: r.ErrorCode, Message: r.Message, DurationMS: r.DurationMS, InHash: r.InHash, OutHash: r.OutHash, Hash: r.Hash})
	}
	return out
}

// auditLogsIn filters and pages the audit trail.
type auditLogsIn struct {
	Limit      int    `json:"limit,omitempty"`
	Offset     int    `json:"offset,omitempty"`
	Since      string `json:"since,omitempty"`
	Until      string `json:"until,omitempty"`
	Principal  string `json:"principal,omitempty"`
	Tool       string `json:"tool,omitempty" jsonschema:"tool name; system.* matches a prefix"`
	Decision   string `json:"decision,omitempty"`
	OnlyErrors bool   `json:"only_errors,omitempty"`
	Oldest     bool   `json:"oldest_first,omitempty"`
}

// AuditLogsOut is one page.
type AuditLogsOut struct {
	Entries       []AuditEntry `json:"entries"`
	TotalCount    int          `json:"total_count"`
	ReturnedCount int          `json:"returned_count"`
	HasMore       bool         `json:"has_more"`
	NextOffset    int          `json:"next_offset,omitempty" jsonschema:"offset of the next page, when has_more"`
}

// AuditVerifyOut is the result of checking the hash chain.
type AuditVerifyOut struct {
	OK            bool             `json:"ok"`
	Records       int              `json:"records"`
	FirstSeq      uint64           `json:"first_seq"`
	LastSeq       uint64           `json:"last_seq"`
	StoredCount   int              `json:"stored_count" jsonschema:"the record count kept beside the chain; -1 when absent"`
	CheckpointSeq uint64           `json:"checkpoint_seq,omitempty" jsonschema:"the last record retention pruned"`
	Witness       *AuditWitnessOut `json:"witness,omitempty" jsonschema:"the root helper's witness of the chain's head"`
	Problems      []auditProblem   `json:"problems"`
}

// AuditWitnessOut is the root helper's witness as verification used it.
type AuditWitnessOut struct {
	Path          string `json:"path"`
	Seq           uint64 `json:"seq,omitempty" jsonschema:"the last head the helper witnessed"`
	Hash          string `json:"hash,omitempty"`
	CheckpointSeq uint64 `json:"checkpoint_seq,omitempty" jsonschema:"the last prune the helper witnessed"`
	Unwitnessed   int    `json:"unwitnessed,omitempty" jsonschema:"records after the witnessed head: not yet witnessed (helper down, or a line lost on power loss); not tampering"`
	BadLines      int    `json:"bad_lines,omitempty"`
	Error         string `json:"error,omitempty" jsonschema:"why the chain was checked without the witness"`
}

// auditProblem is one break in the chain.
type auditProblem struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// logsTools are the logs namespace's tools: the audit trail, the journal
// and raspi-mcp's own log they read, and who may read the audit trail.
type logsTools struct {
	conf         func() *config.Config
	mode         string    // "device" reads its own logs from the journal
	store        *store.DB // the audit trail
	witnessPath  string    // the helper's witness of the trail
	journal      journal.Reader
	appLog       *applog.Ring // the latest records in memory; may be nil
	mayReadAudit func(identity.Principal) *tool.Error
	tools        *tool.Registry // reads a wire name in the audit query's tool filter
}

func (a *Agent) registerLogs() {
	(&logsTools{conf: a.conf, mode: a.mode, store: a.store, witnessPath: a.witness.path, journal: a.journal, appLog: a.appLog,
		mayReadAudit: a.mayReadAudit, tools: a.tools}).register(a.tools)
}

func (l *logsTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[auditLogsIn, AuditLogsOut]{
		ID: "logs.get_recent_audit_logs", Title: "Audit trail",
		Description: "The audit trail: every change, denial and failure, newest first.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate},
		Props: []tool.Prop{
			tool.P("limit", tool.Min(1), tool.Max(1000), tool.Default(50)), tool.P("offset", tool.Min(0)),
			tool.P("since", tool.Format("date-time")), tool.P("until", tool.Format("date-time")),
			tool.P("decision", tool.Enum("allow", "deny", store.DecisionDeclined)), tool.P("tool", tool.MaxLen(100)), tool.P("principal", tool.MaxLen(100)),
		},
		Run: l.auditLogs,
		Summary: func(_ auditLogsIn, o AuditLogsOut) string {
			return fmt.Sprintf("%d of %d audit records", o.ReturnedCount, o.TotalCount)
		},
	})
	tool.Add(r, tool.Spec[noArgs, AuditVerifyOut]{
		ID: "logs.verify_audit_chain", Title: "Verify the audit trail",
		Description: "Verify the audit trail's hash chain: finds edited, deleted or reordered records.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run:         func(context.Context, *tool.Call, noArgs) (AuditVerifyOut, error) { return l.verify() },
		Summary: func(_ noArgs, o AuditVerifyOut) string {
			if o.OK {
				return fmt.Sprintf("audit chain intact: %d records (seq %d..%d)", o.Records, o.FirstSeq, o.LastSeq)
			}
			return fmt.Sprintf("AUDIT CHAIN BROKEN: %d problems in %d records", len(o.Problems), o.Records)
		},
	})
	tool.Add(r, tool.Spec[appLogsIn, appLogsOut]{
		ID: "logs.get_recent_app_logs", Title: "raspi-mcp's own logs",
		Description: "raspi-mcp's own latest log lines (agent and helper).",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("limit", tool.Min(1), tool.Max(500), tool.Default(50)), tool.P("offset", tool.Min(0), tool.Max(100000), tool.Default(0)),
			tool.P("since", tool.Format("date-time")), tool.P("until", tool.Format("date-time")),
			tool.P("min_level", tool.Enum("debug", "info", "warn", "error"), tool.Default("info")), tool.P("source", tool.Enum("all", "agent", "helper"), tool.Default("all"))},
		Run: l.appLogs,
		Summary: func(_ appLogsIn, o appLogsOut) string {
			return fmt.Sprintf("%d log lines from %s", len(o.Entries), o.From)
		},
	})
	tool.Add(r, tool.Spec[journalQueryIn, journalQueryOut]{
		ID: "logs.query_journal", Title: "Query the systemd journal",
		Description: "Journal entries of allowed units: the newest matches, oldest first.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("units", tool.MaxItems(16)), tool.P("unit", tool.MaxLen(proto.MaxUnitName)),
			tool.P("priority", tool.Enum("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")),
			tool.P("since", tool.MaxLen(40)), tool.P("until", tool.MaxLen(40)), tool.P("grep", tool.MaxLen(200)),
			tool.P("limit", tool.Min(1), tool.Max(1000), tool.Default(100)), tool.P("max_bytes", tool.Min(1024), tool.Max(65536), tool.Default(32768))},
		Slow: true,
		Run:  l.queryJournal,
		Summary: func(in journalQueryIn, o journalQueryOut) string {
			s := fmt.Sprintf("%d journal entries", o.ReturnedCount)
			if o.Truncated {
				s += " (cut at max_bytes)"
			}
			return s
		},
	})
}

// appLogsIn is logs.get_recent_app_logs.
type appLogsIn struct {
	Limit    int    `json:"limit,omitempty"`
	Offset   int    `json:"offset,omitempty"`
	Since    string `json:"since,omitempty"`
	Until    string `json:"until,omitempty"`
	MinLevel string `json:"min_level,omitempty"`
	Source   string `json:"source,omitempty"`
}

// appLogEntry is one line of raspi-mcp's own log.
type appLogEntry struct {
	Timestamp string `json:"timestamp"`
	Source    string `json:"source"`
	Level     string `json:"level"`
	Message   string `json:"message"`
	Attrs     string `json:"attrs,omitempty"`
}

// appLogsOut is the latest lines, oldest first.
type appLogsOut struct {
	Entries       []appLogEntry `json:"entries"`
	ReturnedCount int           `json:"returned_count"`
	HasMore       bool          `json:"has_more" jsonschema:"older matching lines exist: ask again with next_offset"`
	NextOffset    int           `json:"next_offset,omitempty"`
	From          string        `json:"from" jsonschema:"journal (device) or memory (the agent's ring of its latest records)"`
	Note          string        `json:"note,omitempty"`
}

// journalQueryIn is logs.query_journal.
type journalQueryIn struct {
	Unit     string   `json:"unit,omitempty" jsonschema:"e.g. nginx"`
	Units    []string `json:"units,omitempty" jsonschema:"globs allowed"`
	Priority string   `json:"priority,omitempty" jsonschema:"and more severe"`
	Since    string   `json:"since,omitempty" jsonschema:"RFC 3339 or a duration back (15m, 2h)"`
	Until    string   `json:"until,omitempty" jsonschema:"like since"`
	Grep     string   `json:"grep,omitempty" jsonschema:"case-insensitive substring"`
	Limit    int      `json:"limit,omitempty"`
	MaxBytes int      `json:"max_bytes,omitempty"`
}

// journalEntry is one journal record.
type journalEntry struct {
	Timestamp  string `json:"timestamp"`
	Unit       string `json:"unit,omitempty"`
	Identifier string `json:"identifier,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Priority   int    `json:"priority"`
	Level      string `json:"level"`
	Message    string `json:"message"`
}

// journalQueryOut is the matching entries, oldest first.
type journalQueryOut struct {
	Entries       []journalEntry `json:"entries"`
	ReturnedCount int            `json:"returned_count"`
	Truncated     bool           `json:"truncated" jsonschema:"max_bytes or the scan limit stopped the read; narrow the query"`
	Scanned       int            `json:"scanned" jsonschema:"journal entries read to answer"`
	Units         []string       `json:"units" jsonschema:"the unit filter applied"`
}

var priorities = []string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// The agent's own systemd units: where its and the helper's logs are on a device.
const (
	agentUnit  = "raspi-mcp.service"
	helperUnit = "raspi-mcp-helper.service"
)

func (l *logsTools) appLogs(ctx context.Context, c *tool.Call, in appLogsIn) (appLogsOut, error) {
	var min slog.Level
	_ = min.UnmarshalText([]byte(in.MinLevel))
	since, err := parseTime("since", in.Since)
	if err != nil {
		return appLogsOut{}, err
	}
	until, err := parseTime("until", in.Until)
	if err != nil {
		return appLogsOut{}, err
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return appLogsOut{}, tool.Errf(CodeInvalidArgument, "since (%s) must be before until (%s)", in.Since, in.Until).With("parameter", "since")
	}
	// Both sources give the newest offset+limit+1 matching lines, oldest
	// first; the page is the limit lines before the newest offset ones.
	want := in.Offset + in.Limit + 1
	var lines []appLogEntry
	from, note := "memory", ""
	if l.mode == "device" {
		var us []string
		if in.Source != "helper" {
			us = append(us, agentUnit)
		}
		if in.Source != "agent" {
			us = append(us, helperUnit)
		}
		res, err := l.journal.Query(ctx, journal.Query{Units: us, Priority: journalPriority(min), Since: since, Until: until, Limit: want, MaxBytes: 48 << 10})
		if err == nil {
			from = "journal"
			for _, e := range res.Entries {
				src := "agent"
				if e.Unit == helperUnit {
					src = "helper"
				}
				lines = append(lines, appLogEntry{Timestamp: e.Time.UTC().Format(time.RFC3339Nano), Source: src, Level: e.Level, Message: e.Message})
			}
		} else {
			note = "journal not readable (" + err.Error() + "); showing the agent's records since it started"
		}
	}
	if from == "memory" {
		src := in.Source
		if src == "all" {
			src = ""
		}
		if l.appLog == nil {
			note = "no in-memory log on this agent"
		} else {
			for _, e := range l.appLog.Entries(min, src, math.MaxInt) {
				if (!since.IsZero() && e.Time.Before(since)) || (!until.IsZero() && !e.Time.Before(until)) {
					continue
				}
				lines = append(lines, appLogEntry{Timestamp: e.Time.UTC().Format(time.RFC3339Nano), Source: e.Source,
					Level: strings.ToLower(e.Level.String()), Message: e.Message, Attrs: e.Attrs})
			}
			lines = lines[max(0, len(lines)-want):]
		}
	}
	end := max(0, len(lines)-in.Offset)
	out := appLogsOut{Entries: append([]appLogEntry{}, lines[max(0, end-in.Limit):end]...), From: from, Note: note}
	if l.mayReadAudit(c.Principal) != nil {
		// Who connected, from where, is the audit trail's: a caller who
		// may not read it gets the lines without it.
		for i := range out.Entries {
			out.Entries[i].Message = withholdWho(out.Entries[i].Message)
			out.Entries[i].Attrs = withholdWho(out.Entries[i].Attrs)
		}
	}
	out.ReturnedCount = len(out.Entries)
	if out.HasMore = len(lines) > in.Offset+in.Limit; out.HasMore {
		out.NextOffset = in.Offset + in.Limit
	}
	return out, nil
}

// whoAttrs are the log attributes that say who called or connected, as
// slog's text handler writes them (key=value, the value quoted when it has
// spaces); the agent's and the helper's logs name callers only so.
var whoAttrs = regexp.MustCompile(`\b(principal|user|uid|pid|remote|peer|addr|remote_addr)=("(?:[^"\\]|\\.)*"|[^ ]*)`)

// withheldWho stands in for a withheld value.
const withheldWho = "[withheld]"

// withholdWho blanks the values of whoAttrs in a log line.
func withholdWho(s string) string {
	return whoAttrs.ReplaceAllString(s, "${1}="+withheldWho)
}

// journalPriority maps a slog level onto syslog priorities.
func journalPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// relTime reads an RFC 3339 time or a duration back from now ("15m", "2h", "1d").
func relTime(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if n, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		var days int
		if _, e := fmt.Sscanf(n, "%d", &days); e == nil && fmt.Sprint(days) == n {
			d, err = time.Duration(days)*24*time.Hour, nil
		}
	}
	if err != nil || d < 0 {
		return time.Time{}, tool.Errf(CodeInvalidArgument, "%s: want an RFC 3339 time or a duration back from now such as 15m, 2h or 1d, got %q", name, s).
			With("parameter", name)
	}
	return now.Add(-d), nil
}

func (l *logsTools) queryJournal(ctx context.Context, _ *tool.Call, in journalQueryIn) (journalQueryOut, error) {
	now := time.Now()
	q := journal.Query{Priority: -1, Grep: in.Grep, Limit: in.Limit, MaxBytes: in.MaxBytes}
	var err error
	if q.Since, err = relTime("since", in.Since, now); err != nil {
		return journalQueryOut{}, err
	}
	if q.Until, err = relTime("until", in.Until, now); err != nil {
		return journalQueryOut{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return journalQueryOut{}, tool.Errf(CodeInvalidArgument, "since must be before until").With("parameter", "since")
	}
	if in.Priority != "" {
		q.Priority = slices.Index(priorities, in.Priority)
	}
	asked := slices.Clone(in.Units)
	if in.Unit != "" {
		asked = append(asked, in.Unit)
	}
	for _, u := range asked {
		n := u
		if !strings.ContainsAny(u, ".*?[") {
			n = u + ".service"
		}
		if err := (journal.Query{Units: []string{n}}).Validate(); err != nil {
			return journalQueryOut{}, tool.Errf(CodeInvalidArgument, "unit %q is not a unit name or glob: %v", u, err).With("parameter", "units")
		}
		if !config.UnitMatches(l.conf().Logs.JournalUnits, n) {
			return journalQueryOut{}, tool.Errf(CodePermissionDenied, "the journal of %s is not readable on this device", n).
				With("unit", n).With("journal_units", l.conf().Logs.JournalUnits).
				Hint("the owner lists readable units in [logs] journal_units of " + config.DefaultPath)
		}
		q.Units = append(q.Units, n)
	}
	if len(q.Units) == 0 && !slices.Contains(l.conf().Logs.JournalUnits, "*") {
		q.Units = slices.Clone(l.conf().Logs.JournalUnits) // journalctl -u takes globs
	}
	if err := q.Validate(); err != nil {
		return journalQueryOut{}, tool.Errf(CodeInvalidArgument, "%v", err)
	}
	res, err := l.journal.Query(ctx, q)
	if err != nil {
		return journalQueryOut{}, tool.Errf(CodeUnavailable, "%v", err).
			Hint("on a device the agent's user must be in group systemd-journal (the package does this)")
	}
	out := journalQueryOut{Entries: []journalEntry{}, Truncated: res.Truncated, Scanned: res.Scanned, Units: nonNil(q.Units)}
	for _, e := range res.Entries {
		out.Entries = append(out.Entries, journalEntry{Timestamp: e.Time.UTC().Format(time.RFC3339Nano), Unit: e.Unit, Identifier: e.Identifier,
			PID: e.PID, Priority: e.Priority, Level: e.Level, Message: e.Message})
	}
	out.ReturnedCount = len(out.Entries)
	return out, nil
}

func (l *logsTools) auditLogs(_ context.Context, _ *tool.Call, in auditLogsIn) (AuditLogsOut, error) {
	q := store.AuditQuery{Principal: in.Principal, Decision: in.Decision, OnlyErrors: in.OnlyErrors, Limit: in.Limit, Offset: in.Offset, Oldest: in.Oldest}
	var err error
	if q.Since, err = parseTime("since", in.Since); err != nil {
		return AuditLogsOut{}, err
	}
	if q.Until, err = parseTime("until", in.Until); err != nil {
		return AuditLogsOut{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return AuditLogsOut{}, tool.Errf(CodeInvalidArgument, "since (%s) must be before until (%s)", in.Since, in.Until).
			With("parameter", "since")
	}
	q.Tool = in.Tool
	if t, ok := l.tools.Lookup(strings.TrimSuffix(in.Tool, "*")); ok && !strings.HasSuffix(in.Tool, "*") {
		q.Tool = t.ID()
	} else if strings.HasSuffix(in.Tool, "*") {
		q.Tool = strings.ReplaceAll(strings.TrimSuffix(in.Tool, "*"), "_", ".") + "*"
	}
	recs, total, err := l.store.QueryAudit(q)
	if err != nil {
		return AuditLogsOut{}, err
	}
	out := AuditLogsOut{Entries: entriesOf(recs), TotalCount: total, ReturnedCount: len(recs), HasMore: in.Offset+len(recs) < total}
	if out.HasMore {
		out.NextOffset = in.Offset + len(recs)
	}
	return out, nil
}

// verify checks the agent's own chain against the helper's witness.
func (l *logsTools) verify() (AuditVerifyOut, error) { return VerifyFile(l.store, l.witnessPath) }

// VerifyFile checks the audit chain of a database, and compares it with the
// helper's witness file at witnessPath (read directly: it is world-readable,
// so this works for the CLI when the agent is stopped and for users the
// helper would not talk to). A missing witness file is reported in Witness,
// not as a problem: a new install has none yet.
func VerifyFile(db *store.DB, witnessPath string) (AuditVerifyOut, error) {
	w, info, _ := readWitness(witnessPath)
	v, err := db.VerifyAuditWitness(w)
	if err != nil {
		return AuditVerifyOut{}, err
	}
	o := AuditVerifyOut{OK: v.OK, Records: v.Records, FirstSeq: v.FirstSeq, LastSeq: v.LastSeq, StoredCount: v.StoredCount,
		CheckpointSeq: v.CheckpointSeq, Witness: info, Problems: []auditProblem{}}
	if v.Witnessed {
		info.Seq, info.Hash, info.CheckpointSeq, info.Unwitnessed = v.WitnessSeq, v.WitnessHash, v.WitnessCheckpointSeq, v.Unwitnessed
	}
	for _, p := range v.Problems {
		o.Problems = append(o.Problems, auditProblem{Seq: p.Seq, Kind: p.Kind, Detail: p.Detail})
	}
	return o, nil
}

// TailFile returns the newest n audit records of a database file.
func TailFile(db *store.DB, n int) ([]AuditEntry, error) {
	recs, _, err := db.QueryAudit(store.AuditQuery{Limit: n})
	return entriesOf(recs), err
}

func parseTime(name, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, tool.Errf(CodeInvalidArgument, "%s: want an RFC 3339 time such as 2026-11-22T03:00:00Z, got %q", name, s).
			With("parameter", name)
	}
	return t, nil
}

func pid() int { return os.Getpid() }

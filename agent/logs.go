package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// AuditEntry is one audit record as clients see it.
type AuditEntry struct {
	Seq           uint64 `json:"seq"`
	Time          string `json:"time"`
	CorrelationID string `json:"correlation_id"`
	Principal     string `json:"principal"`
	Role          string `json:"role"`
	Tool          string `json:"tool"`
	Decision      string `json:"decision" jsonschema:"allow or deny"`
	DryRun        bool   `json:"dry_run"`
	Reason        string `json:"reason,omitempty"`
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
			Principal: r.Principal, Role: r.Role, Tool: r.Tool, Decision: r.Decision, DryRun: r.DryRun, Reason: r.Reason,
			ErrorCode: r.ErrorCode, Message: r.Message, DurationMS: r.DurationMS, InHash: r.InHash, OutHash: r.OutHash, Hash: r.Hash})
	}
	return out
}

// AuditLogsIn filters and pages the audit trail.
type AuditLogsIn struct {
	Limit      int    `json:"limit,omitempty" jsonschema:"entries per page"`
	Offset     int    `json:"offset,omitempty"`
	Since      string `json:"since,omitempty" jsonschema:"RFC 3339 time, inclusive"`
	Until      string `json:"until,omitempty" jsonschema:"RFC 3339 time, exclusive"`
	Principal  string `json:"principal,omitempty"`
	Tool       string `json:"tool,omitempty" jsonschema:"canonical id or wire name; a trailing * matches a prefix (system.*)"`
	Decision   string `json:"decision,omitempty"`
	OnlyErrors bool   `json:"only_errors,omitempty" jsonschema:"only denied or failed calls"`
	Oldest     bool   `json:"oldest_first,omitempty"`
}

// AuditLogsOut is one page.
type AuditLogsOut struct {
	Entries       []AuditEntry `json:"entries"`
	TotalCount    int          `json:"total_count"`
	ReturnedCount int          `json:"returned_count"`
	HasMore       bool         `json:"has_more"`
}

// AuditVerifyOut is the result of checking the hash chain.
type AuditVerifyOut struct {
	OK       bool           `json:"ok"`
	Records  int            `json:"records"`
	FirstSeq uint64         `json:"first_seq"`
	LastSeq  uint64         `json:"last_seq"`
	Problems []AuditProblem `json:"problems"`
}

// AuditProblem is one break in the chain.
type AuditProblem struct {
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (a *Agent) registerLogs() {
	add(a.tools, Spec[AuditLogsIn, AuditLogsOut]{
		ID: "logs.get_recent_audit_logs", Title: "Audit trail",
		Description: "The hash-chained audit trail of this device: every change, denial and failure, newest first, filtered and paginated.",
		Rule:        Rule{MinRole: RoleOperate},
		Props: []Prop{
			prop("limit", minimum(1), maximum(1000), def(50)), prop("offset", minimum(0)),
			prop("since", format("date-time")), prop("until", format("date-time")),
			prop("decision", enum("allow", "deny")), prop("tool", maxLen(100)), prop("principal", maxLen(100)),
		},
		Run: a.auditLogs,
		Summary: func(_ AuditLogsIn, o AuditLogsOut) string {
			return fmt.Sprintf("%d of %d audit records", o.ReturnedCount, o.TotalCount)
		},
	})
	add(a.tools, Spec[NoArgs, AuditVerifyOut]{
		ID: "logs.verify_audit_chain", Title: "Verify the audit trail",
		Description: "Recompute the audit trail's hash chain and report any edited, deleted or reordered record.",
		Rule:        Rule{MinRole: RoleRead},
		Run:         func(context.Context, *Call, NoArgs) (AuditVerifyOut, error) { return a.VerifyAudit() },
		Summary: func(_ NoArgs, o AuditVerifyOut) string {
			if o.OK {
				return fmt.Sprintf("audit chain intact: %d records (seq %d..%d)", o.Records, o.FirstSeq, o.LastSeq)
			}
			return fmt.Sprintf("AUDIT CHAIN BROKEN: %d problems in %d records", len(o.Problems), o.Records)
		},
	})
}

func (a *Agent) auditLogs(_ context.Context, _ *Call, in AuditLogsIn) (AuditLogsOut, error) {
	q := store.AuditQuery{Principal: in.Principal, Decision: in.Decision, OnlyErrors: in.OnlyErrors, Limit: in.Limit, Offset: in.Offset, Oldest: in.Oldest}
	var err error
	if q.Since, err = parseTime("since", in.Since); err != nil {
		return AuditLogsOut{}, err
	}
	if q.Until, err = parseTime("until", in.Until); err != nil {
		return AuditLogsOut{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return AuditLogsOut{}, errf(CodeInvalidArgument, "since (%s) must be before until (%s)", in.Since, in.Until).
			with("parameter", "since")
	}
	q.Tool = in.Tool
	if t, ok := a.tools.lookup(strings.TrimSuffix(in.Tool, "*")); ok && !strings.HasSuffix(in.Tool, "*") {
		q.Tool = t.id
	} else if strings.HasSuffix(in.Tool, "*") {
		q.Tool = strings.ReplaceAll(strings.TrimSuffix(in.Tool, "*"), "_", ".") + "*"
	}
	recs, total, err := a.store.QueryAudit(q)
	if err != nil {
		return AuditLogsOut{}, err
	}
	return AuditLogsOut{Entries: entriesOf(recs), TotalCount: total, ReturnedCount: len(recs), HasMore: in.Offset+len(recs) < total}, nil
}

// VerifyAudit checks the agent's own chain.
func (a *Agent) VerifyAudit() (AuditVerifyOut, error) { return VerifyFile(a.store) }

// VerifyFile checks the audit chain of a database, also for the CLI when the
// agent is stopped.
func VerifyFile(db *store.DB) (AuditVerifyOut, error) {
	v, err := db.VerifyAudit()
	if err != nil {
		return AuditVerifyOut{}, err
	}
	o := AuditVerifyOut{OK: v.OK, Records: v.Records, FirstSeq: v.FirstSeq, LastSeq: v.LastSeq, Problems: []AuditProblem{}}
	for _, p := range v.Problems {
		o.Problems = append(o.Problems, AuditProblem{Seq: p.Seq, Kind: p.Kind, Detail: p.Detail})
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
		return time.Time{}, errf(CodeInvalidArgument, "%s: want an RFC 3339 time such as 2026-11-22T03:00:00Z, got %q", name, s).
			with("parameter", name)
	}
	return t, nil
}

func pid() int { return os.Getpid() }

package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// DefaultAuditLimit is the page size when AuditQuery.Limit is 0.
const DefaultAuditLimit = 100

// AuditQuery selects audit records. Zero fields do not filter.
type AuditQuery struct {
	// Since is inclusive, Until exclusive; zero means open.
	Since, Until time.Time
	// Exact matches when set. Tool may end in "*" for a prefix: "system.*"
	// matches "system.reboot"; "*" alone matches everything.
	Principal, Tool, Decision, ErrorCode string
	// OnlyErrors keeps records that were denied or carry an error code.
	OnlyErrors bool
	// Limit 0 means DefaultAuditLimit; callers cap it (at 1000) themselves.
	// Offset skips that many matches.
	Limit, Offset int
	// Oldest returns oldest first; the default is newest first.
	Oldest bool
}

func (q *AuditQuery) filtersTime() bool { return !q.Since.IsZero() || !q.Until.IsZero() }

func (q *AuditQuery) filters() bool {
	return q.filtersTime() || q.Principal != "" || (q.Tool != "" && q.Tool != "*") ||
		q.Decision != "" || q.ErrorCode != "" || q.OnlyErrors
}

// auditFilterFields is the part of a record filters look at. Decoding only
// these skips building the other strings for records that do not match.
type auditFilterFields struct {
	Principal string `json:"principal"`
	Tool      string `json:"tool"`
	Decision  string `json:"decision"`
	ErrorCode string `json:"error_code"`
}

// auditFilterFieldsTime adds the time, parsed only when a query needs it.
type auditFilterFieldsTime struct {
	auditFilterFields
	Time time.Time `json:"time"`
}

func (q *AuditQuery) match(f *auditFilterFields) bool {
	if q.Principal != "" && f.Principal != q.Principal {
		return false
	}
	if q.Tool != "" {
		if prefix, ok := strings.CutSuffix(q.Tool, "*"); ok {
			if !strings.HasPrefix(f.Tool, prefix) {
				return false
			}
		} else if f.Tool != q.Tool {
			return false
		}
	}
	if q.Decision != "" && f.Decision != q.Decision {
		return false
	}
	if q.ErrorCode != "" && f.ErrorCode != q.ErrorCode {
		return false
	}
	if q.OnlyErrors && f.Decision == DecisionAllow && f.ErrorCode == "" {
		return false
	}
	return true
}

func (q *AuditQuery) matchTime(t time.Time) bool {
	if !q.Since.IsZero() && t.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && !t.Before(q.Until) {
		return false
	}
	return true
}

// QueryAudit returns one page of matching records and total, the number of
// matches ignoring Limit and Offset.
//
// A filtered query decodes every record: times are not a usable index
// because a Pi without a real-time clock can record times that step
// backwards, and total needs every match counted anyway. An unfiltered query
// (the common "what happened recently") only counts keys and decodes the
// page, which is what keeps it fast on a long trail.
//
// Records that cannot be decoded are never returned (VerifyAudit reports
// them); an unfiltered query still counts them in total.
func (db *DB) QueryAudit(q AuditQuery) (recs []AuditRecord, total int, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultAuditLimit
	}
	offset := max(q.Offset, 0)
	filtered, withTime := q.filters(), q.filtersTime()
	err = db.viewAudit(func(tx *bolt.Tx) error {
		db.eachAudit(tx, q.Oldest, func(_, v []byte) bool {
			switch {
			case !filtered:
				// Every record matches; decode only the page below.
			case withTime:
				var f auditFilterFieldsTime
				if json.Unmarshal(v, &f) != nil || !q.matchTime(f.Time) || !q.match(&f.auditFilterFields) {
					return true
				}
			default:
				var f auditFilterFields
				if json.Unmarshal(v, &f) != nil || !q.match(&f) {
					return true
				}
			}
			if total >= offset && len(recs) < limit {
				// Only records on the page are decoded in full.
				var r AuditRecord
				if json.Unmarshal(v, &r) == nil {
					recs = append(recs, r)
				} else if filtered {
					return true
				}
			}
			total++
			return true
		})
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: query audit: %w", err)
	}
	return recs, total, nil
}

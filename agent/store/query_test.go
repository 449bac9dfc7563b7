package store

import (
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// queryFixture writes 30 records: tools cycle gpio.read, system.reboot,
// system.service.restart; principals alternate pi / uid:1001; every 5th is
// denied; every 7th has error code E_TIMEOUT. Record i is at baseTime+i min.
func queryFixture(t *testing.T) *DB {
	t.Helper()
	db := openTest(t)
	tools := []string{"gpio.read", "system.reboot", "system.service.restart"}
	for i := 1; i <= 30; i++ {
		r := sampleRecord(i)
		r.Tool = tools[i%3]
		if i%2 == 0 {
			r.Principal = "uid:1001"
		}
		if i%5 == 0 {
			r.Decision = DecisionDeny
		}
		if i%7 == 0 {
			r.ErrorCode = "E_TIMEOUT"
		}
		if _, err := db.AppendAudit(r); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func seqsOf(recs []AuditRecord) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func TestQueryAuditFilters(t *testing.T) {
	db := queryFixture(t)
	at := func(i int) time.Time { return baseTime.Add(time.Duration(i) * time.Minute) }
	cases := []struct {
		name string
		q    AuditQuery
		want []uint64 // newest first
	}{
		{"exact tool", AuditQuery{Tool: "system.reboot"}, []uint64{28, 25, 22, 19, 16, 13, 10, 7, 4, 1}},
		{"prefix and principal with limit", AuditQuery{Tool: "system.*", Principal: "pi", Limit: 4}, []uint64{29, 25, 23, 19}},
		{"star and decision", AuditQuery{Tool: "*", Decision: "deny"}, []uint64{30, 25, 20, 15, 10, 5}},
		{"error code", AuditQuery{ErrorCode: "E_TIMEOUT"}, []uint64{28, 21, 14, 7}},
		{"only errors in window", AuditQuery{OnlyErrors: true, Since: at(10), Until: at(21)}, []uint64{20, 15, 14, 10}},
		{"since", AuditQuery{Since: at(28)}, []uint64{30, 29, 28}},
		{"until", AuditQuery{Until: at(3)}, []uint64{2, 1}},
		{"combined", AuditQuery{Tool: "gpio.*", Principal: "uid:1001", Decision: "allow", Since: at(20)}, []uint64{24}},
		{"tool without star is exact", AuditQuery{Tool: "system"}, nil}, // exact match, not a prefix
		{"no match", AuditQuery{Principal: "root"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recs, total, err := db.QueryAudit(c.q)
			if err != nil {
				t.Fatal(err)
			}
			got := seqsOf(recs)
			if fmt.Sprint(got) != fmt.Sprint(c.want) && !(len(got) == 0 && len(c.want) == 0) {
				t.Errorf("got %v, want %v", got, c.want)
			}
			if c.q.Limit == 0 && total != len(c.want) {
				t.Errorf("total = %d, want %d", total, len(c.want))
			}
		})
	}
}

func TestQueryAuditPagination(t *testing.T) {
	db := queryFixture(t)

	recs, total, err := db.QueryAudit(AuditQuery{Limit: 5})
	if err != nil || total != 30 || fmt.Sprint(seqsOf(recs)) != "[30 29 28 27 26]" {
		t.Errorf("page 1 = %v total %d %v", seqsOf(recs), total, err)
	}
	recs, total, _ = db.QueryAudit(AuditQuery{Limit: 5, Offset: 5})
	if total != 30 || fmt.Sprint(seqsOf(recs)) != "[25 24 23 22 21]" {
		t.Errorf("page 2 = %v total %d", seqsOf(recs), total)
	}
	recs, total, _ = db.QueryAudit(AuditQuery{Limit: 5, Offset: 28})
	if total != 30 || fmt.Sprint(seqsOf(recs)) != "[2 1]" {
		t.Errorf("last page = %v total %d", seqsOf(recs), total)
	}
	recs, total, _ = db.QueryAudit(AuditQuery{Limit: 5, Offset: 40})
	if total != 30 || len(recs) != 0 {
		t.Errorf("past the end = %v total %d", seqsOf(recs), total)
	}
	recs, _, _ = db.QueryAudit(AuditQuery{Limit: 3, Offset: 2, Oldest: true})
	if fmt.Sprint(seqsOf(recs)) != "[3 4 5]" {
		t.Errorf("oldest first = %v", seqsOf(recs))
	}
	recs, total, _ = db.QueryAudit(AuditQuery{Tool: "system.*", Limit: 3, Offset: 3})
	if total != 20 || fmt.Sprint(seqsOf(recs)) != "[25 23 22]" {
		t.Errorf("filtered page = %v total %d", seqsOf(recs), total)
	}
	recs, _, _ = db.QueryAudit(AuditQuery{Offset: -3, Limit: -1})
	if len(recs) != 30 || recs[0].Seq != 30 {
		t.Errorf("negative offset/limit = %d recs", len(recs))
	}
	// The returned records are complete.
	recs, _, _ = db.QueryAudit(AuditQuery{Limit: 1, ErrorCode: "E_TIMEOUT"})
	if r := recs[0]; r.Seq != 28 || r.Hash == "" || r.PrevHash == "" || r.InHash == "" || r.Time.IsZero() {
		t.Errorf("record = %+v", r)
	}
}

func TestQueryAuditDefaultLimit(t *testing.T) {
	db := openTest(t)
	appendN(t, db, DefaultAuditLimit+20)
	recs, total, err := db.QueryAudit(AuditQuery{})
	if err != nil || total != DefaultAuditLimit+20 || len(recs) != DefaultAuditLimit {
		t.Errorf("got %d recs, total %d, %v", len(recs), total, err)
	}
	if recs[0].Seq != DefaultAuditLimit+20 {
		t.Errorf("first = %d, want newest", recs[0].Seq)
	}
}

func TestQueryAuditSkipsUndecodable(t *testing.T) {
	db := openTest(t)
	appendN(t, db, 5)
	db = tamper(t, db, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketAudit)).Put(seqKey(4), []byte("garbage"))
	})
	recs, total, err := db.QueryAudit(AuditQuery{})
	if err != nil || total != 5 || fmt.Sprint(seqsOf(recs)) != "[5 3 2 1]" {
		t.Errorf("unfiltered = %v total %d %v", seqsOf(recs), total, err)
	}
	recs, total, err = db.QueryAudit(AuditQuery{Principal: "pi"})
	if err != nil || total != 4 || fmt.Sprint(seqsOf(recs)) != "[5 3 2 1]" {
		t.Errorf("filtered = %v total %d %v", seqsOf(recs), total, err)
	}
	if _, _, _, last, err := db.AuditCounts(); err != nil || last.Seq != 5 {
		t.Errorf("AuditCounts last = %d, %v", last.Seq, err)
	}
}

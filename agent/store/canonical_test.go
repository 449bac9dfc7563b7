package store

import (
	"testing"
)

// TestRecordCanonicalMatchesStored checks that the hash computed on append
// from the struct equals the one verify computes from the stored raw JSON,
// for awkward strings. If encoding ever diverged, honest records would fail.
func TestRecordCanonicalMatchesStored(t *testing.T) {
	db := openTest(t)
	odd := []string{"", "<>&", "\u2028\u2029", "\x00\x1f\x7f", "a\xffb", `"\`, "😀", "日本語", "\t\n"}
	for i, s := range odd {
		r := sampleRecord(i)
		r.Reason, r.Message, r.Upstream, r.Principal, r.Tool = s, s+s, "x"+s, s, "t."+s
		if _, err := db.AppendAudit(r); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
	requireOK(t, db)
}

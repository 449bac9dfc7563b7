package agent

import (
	"context"
	"sync"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// BenchmarkAuditAppend is one audit record, durable in bbolt, with and
// without the helper witnessing it before the call answers: what the
// witness adds to every audited call. "parallel" is 8 appenders at once,
// whose witness round trips coalesce.
func BenchmarkAuditAppend(b *testing.B) {
	rec := store.AuditRecord{Principal: "bench", Role: "admin", Tool: "system.reboot", Decision: store.DecisionDeny,
		InHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	b.Run("store_only", func(b *testing.B) {
		r := newRig(b, nil)
		for b.Loop() {
			if _, err := r.db.AppendAudit(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("witnessed", func(b *testing.B) {
		r := newRig(b, nil)
		for b.Loop() {
			if _, err := r.a.appendAudit(rec); err != nil {
				b.Fatal(err)
			}
		}
		if head, _ := r.witnessFile().Head(); head.Seq != uint64(r.auditCount()) {
			b.Fatalf("witness at %d, %d records", head.Seq, r.auditCount())
		}
	})
	// The witness round trip alone: agent to helper, one line appended.
	b.Run("witness_call_only", func(b *testing.B) {
		r := newRig(b, nil)
		seq := uint64(0)
		for b.Loop() {
			seq++
			r.a.witness.appended(context.Background(), store.AuditRecord{Seq: seq, Hash: rec.InHash})
		}
		if head, _ := r.witnessFile().Head(); head.Seq != seq {
			b.Fatalf("witness at %d, want %d", head.Seq, seq)
		}
	})
	b.Run("witnessed_parallel8", func(b *testing.B) {
		r := newRig(b, nil)
		b.ResetTimer()
		var wg sync.WaitGroup
		per := b.N/8 + 1
		for range 8 {
			wg.Go(func() {
				for range per {
					if _, err := r.a.appendAudit(rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		lines := len(r.witnessFile().Points)
		b.ReportMetric(float64(lines)/float64(8*per), "witness_lines/record")
	})
}

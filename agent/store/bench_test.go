package store

import (
	"bufio"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// procWrittenBytes is this process's wchar from /proc/self/io: bytes handed
// to write/pwrite, i.e. what bbolt sends towards the SD card, including page
// rewrites that file growth does not show. ok is false off Linux.
func procWrittenBytes() (n int64, ok bool) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "wchar: "); found {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// BenchmarkAppendAudit is the real cost of one durable audit record: one
// transaction and one fsync per record, as the agent does before answering.
// file-B/rec is file growth per record (bbolt grows in steps, so run with
// enough records to average it out); written-B/rec is bytes written per
// record, the SD-card wear figure.
func BenchmarkAppendAudit(b *testing.B) {
	db := openTest(b)
	r := sampleRecord(1)
	r.Reason = "operator asked for a reading"
	size0, err := db.Size()
	if err != nil {
		b.Fatal(err)
	}
	w0, wok := procWrittenBytes()
	d0, _ := procIO("write_bytes")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.AppendAudit(r); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	size1, err := db.Size()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(size1-size0)/float64(b.N), "file-B/rec")
	if w1, ok := procWrittenBytes(); ok && wok {
		b.ReportMetric(float64(w1-w0)/float64(b.N), "written-B/rec")
	}
	if d, ok := procIO("write_bytes"); ok {
		b.ReportMetric(float64(d-d0)/float64(b.N), "disk-B/rec")
	}
}

// fixture10k is a store holding 10,000 records, built with fsync off so the
// setup takes a second rather than a minute; the records are identical to
// durable ones.
func fixture10k(b *testing.B) *DB {
	b.Helper()
	db := openTest(b)
	db.bolt.NoSync = true
	tools := []string{"gpio.read", "system.reboot", "system.service.restart", "i2c.read", "camera.capture"}
	for i := 1; i <= 10000; i++ {
		r := sampleRecord(i)
		r.Tool = tools[i%len(tools)]
		if i%10 == 0 {
			r.Decision = DecisionDeny
			r.Message = "role read may not call " + r.Tool
		}
		if _, err := db.AppendAudit(r); err != nil {
			b.Fatal(err)
		}
	}
	db.bolt.NoSync = false
	return db
}

func BenchmarkVerifyAudit10k(b *testing.B) {
	db := fixture10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := db.VerifyAudit()
		if err != nil || !v.OK || v.Records != 10000 {
			b.Fatalf("verify: %+v %v", v, err)
		}
	}
	b.StopTimer()
	// File size per record once the trail is long enough to amortise
	// bbolt's growth steps.
	size, _ := db.Size()
	b.ReportMetric(float64(size)/10000, "file-B/rec")
}

// BenchmarkVerifyAuditWitness10k is the same walk compared with a witness
// that saw every head: what `audit verify` and the agent's start check cost.
func BenchmarkVerifyAuditWitness10k(b *testing.B) {
	db := fixture10k(b)
	w := &Witness{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return bucket(tx, bucketAudit).ForEach(func(k, v []byte) error {
			seq, _ := keySeq(k)
			h, _ := storedHash(v)
			w.Heads = append(w.Heads, WitnessPoint{Seq: seq, Hash: h})
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := db.VerifyAuditWitness(w)
		if err != nil || !v.OK || v.Records != 10000 || v.WitnessSeq != 10000 {
			b.Fatalf("verify: %+v %v", v, err)
		}
	}
}

func BenchmarkQueryAuditNewest50(b *testing.B) {
	db := fixture10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, total, err := db.QueryAudit(AuditQuery{Limit: 50})
		if err != nil || len(recs) != 50 || total != 10000 {
			b.Fatalf("query: %d recs, total %d, %v", len(recs), total, err)
		}
	}
}

func BenchmarkQueryAuditFiltered10k(b *testing.B) {
	db := fixture10k(b)
	since := baseTime.Add(5000 * time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, total, err := db.QueryAudit(AuditQuery{Tool: "gpio.*", OnlyErrors: true, Since: since, Limit: 50})
		if err != nil || len(recs) != 50 || total == 0 {
			b.Fatalf("query: %d recs, total %d, %v", len(recs), total, err)
		}
	}
}

func BenchmarkAuditCounts10k(b *testing.B) {
	db := fixture10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if total, _, _, _, err := db.AuditCounts(); err != nil || total != 10000 {
			b.Fatalf("counts: %d %v", total, err)
		}
	}
}

func BenchmarkHashJSON(b *testing.B) {
	in := []byte(`{"pin":17,"mode":"output","value":1,"label":"relay <kitchen>","opts":{"pull":"up","debounce_ms":20}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := HashJSON(json.RawMessage(in)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendAuditParallel is audited calls arriving together (several
// MCP sessions at once): appends that meet a running commit share the next
// one, so the pages and the fsync are paid once per group. written-B/rec is
// wchar per record as in BenchmarkAppendAudit.
func BenchmarkAppendAuditParallel(b *testing.B) {
	db := openTest(b)
	r := sampleRecord(1)
	r.Reason = "operator asked for a reading"
	w0, wok := procWrittenBytes()
	d0, _ := procIO("write_bytes")
	b.SetParallelism(4) // 4 x GOMAXPROCS callers
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := db.AppendAudit(r); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if w1, ok := procWrittenBytes(); ok && wok {
		b.ReportMetric(float64(w1-w0)/float64(b.N), "written-B/rec")
	}
	if d, ok := procIO("write_bytes"); ok {
		b.ReportMetric(float64(d-d0)/float64(b.N), "disk-B/rec")
	}
}

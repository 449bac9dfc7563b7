package store

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// sampleStep is the default sampling interval the tests and benchmarks model.
const sampleStep = 5 * time.Second

// realisticSample is reading i of a Pi Zero 2 W-like device: 2 interfaces, 1
// SD card, kernel byte counts in KiB and 4 KiB blocks, rates computed from
// counter deltas over 5 s, errors and most drops zero.
func realisticSample(i int) Sample {
	f := float32(i%97) / 97
	s := Sample{
		Time:        baseTime.Add(time.Duration(i) * sampleStep),
		CPUPercent:  3.2 + 17*f,
		FreqMHz:     []float32{600, 1000}[i%2],
		TempC:       float32(44000+i%4000) / 1000,
		Load1:       0.15 + f,
		Load5:       0.22 + f/2,
		Load15:      0.30 + f/4,
		MemTotal:    436208 << 10,
		MemAvail:    uint64(300000+i%5000) << 10,
		SwapTotal:   102396 << 10,
		SwapUsed:    uint64(i%3) * 4096 << 10,
		DiskTotal:   7500000 * 4096,
		DiskUsed:    uint64(1200000+i/100) * 4096,
		HasThrottle: true,
		Net: []NetRate{
			{Name: "eth0", RxBytesPerSec: 1534.6 + 100*f, TxBytesPerSec: 812.2 + 50*f, RxPacketsPerSec: 12.4, TxPacketsPerSec: 9.8},
			{Name: "wlan0", RxBytesPerSec: 96.4 * f, TxBytesPerSec: 20.2, RxPacketsPerSec: 1.2, TxPacketsPerSec: 0.4},
		},
		Disk: []DiskRate{
			{Name: "mmcblk0", WriteBytesPerSec: 8192 * (1 + f), WriteIOPS: 2.2, BusyPercent: 0.8 + f},
		},
	}
	s.MemUsed = s.MemTotal - s.MemAvail
	if i%10 == 0 {
		s.Net[1].RxDropsPerSec = 0.2
	}
	if i%20 == 0 {
		s.Disk[0].ReadBytesPerSec, s.Disk[0].ReadIOPS = 4096*3, 0.6
	}
	if i%1000 == 999 {
		s.Throttle = 0x50000 // throttled since boot
	}
	return s
}

// sameSample reports how a and b differ, comparing floats by their bits so
// NaN payloads and -0 count, and nil and empty slices as equal. "" means equal.
func sameSample(a, b Sample) string {
	if !a.Time.Equal(b.Time) {
		return fmt.Sprintf("Time %v != %v", a.Time, b.Time)
	}
	fa := []float32{a.CPUPercent, a.FreqMHz, a.TempC, a.Load1, a.Load5, a.Load15}
	fb := []float32{b.CPUPercent, b.FreqMHz, b.TempC, b.Load1, b.Load5, b.Load15}
	for i := range fa {
		if math.Float32bits(fa[i]) != math.Float32bits(fb[i]) {
			return fmt.Sprintf("float %d: %v (%#x) != %v (%#x)", i, fa[i], math.Float32bits(fa[i]), fb[i], math.Float32bits(fb[i]))
		}
	}
	ua := []uint64{a.MemTotal, a.MemUsed, a.MemAvail, a.SwapTotal, a.SwapUsed, a.DiskTotal, a.DiskUsed}
	ub := []uint64{b.MemTotal, b.MemUsed, b.MemAvail, b.SwapTotal, b.SwapUsed, b.DiskTotal, b.DiskUsed}
	for i := range ua {
		if ua[i] != ub[i] {
			return fmt.Sprintf("size %d: %d != %d", i, ua[i], ub[i])
		}
	}
	if a.HasThrottle != b.HasThrottle || a.Throttle != b.Throttle {
		return fmt.Sprintf("throttle %v/%#x != %v/%#x", a.HasThrottle, a.Throttle, b.HasThrottle, b.Throttle)
	}
	if len(a.Net) != len(b.Net) || len(a.Disk) != len(b.Disk) {
		return fmt.Sprintf("counts net %d/%d disk %d/%d", len(a.Net), len(b.Net), len(a.Disk), len(b.Disk))
	}
	for i := range a.Net {
		x, y := a.Net[i], b.Net[i]
		if x.Name != y.Name {
			return fmt.Sprintf("net %d name %q != %q", i, x.Name, y.Name)
		}
		fx := []float32{x.RxBytesPerSec, x.TxBytesPerSec, x.RxPacketsPerSec, x.TxPacketsPerSec, x.RxErrorsPerSec, x.TxErrorsPerSec, x.RxDropsPerSec, x.TxDropsPerSec}
		fy := []float32{y.RxBytesPerSec, y.TxBytesPerSec, y.RxPacketsPerSec, y.TxPacketsPerSec, y.RxErrorsPerSec, y.TxErrorsPerSec, y.RxDropsPerSec, y.TxDropsPerSec}
		for j := range fx {
			if math.Float32bits(fx[j]) != math.Float32bits(fy[j]) {
				return fmt.Sprintf("net %d float %d: %#x != %#x", i, j, math.Float32bits(fx[j]), math.Float32bits(fy[j]))
			}
		}
	}
	for i := range a.Disk {
		x, y := a.Disk[i], b.Disk[i]
		if x.Name != y.Name {
			return fmt.Sprintf("disk %d name %q != %q", i, x.Name, y.Name)
		}
		fx := []float32{x.ReadBytesPerSec, x.WriteBytesPerSec, x.ReadIOPS, x.WriteIOPS, x.BusyPercent}
		fy := []float32{y.ReadBytesPerSec, y.WriteBytesPerSec, y.ReadIOPS, y.WriteIOPS, y.BusyPercent}
		for j := range fx {
			if math.Float32bits(fx[j]) != math.Float32bits(fy[j]) {
				return fmt.Sprintf("disk %d float %d: %#x != %#x", i, j, math.Float32bits(fx[j]), math.Float32bits(fy[j]))
			}
		}
	}
	return ""
}

// stored is s as a scan returns it: time truncated to the millisecond, UTC.
func stored(s Sample) Sample {
	s.Time = time.UnixMilli(s.Time.UnixMilli()).UTC()
	return s
}

func roundTrip(t *testing.T, name string, s Sample) []byte {
	t.Helper()
	enc := EncodeSample(nil, s)
	got, err := DecodeSample(enc)
	if err != nil {
		t.Fatalf("%s: DecodeSample(%x): %v", name, enc, err)
	}
	if !got.Time.IsZero() {
		t.Errorf("%s: decoded Time = %v, want zero (the key carries it)", name, got.Time)
	}
	s.Time = time.Time{}
	if d := sameSample(s, got); d != "" {
		t.Errorf("%s: round trip differs: %s", name, d)
	}
	return enc
}

func TestSampleRoundTrip(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001) // a NaN with a payload
	negZero := float32(math.Copysign(0, -1))
	five := make([]NetRate, 5)
	for i := range five {
		five[i] = NetRate{Name: fmt.Sprintf("veth%d", i), RxBytesPerSec: float32(i) * 1.5, TxErrorsPerSec: float32(i)}
	}
	cases := map[string]Sample{
		"empty":     {},
		"realistic": realisticSample(7),
		"nan temp, no throttle, 5 interfaces": {
			CPUPercent: 100, FreqMHz: float32(math.NaN()), TempC: nan, Load1: negZero,
			Load15: float32(math.Inf(1)), MemTotal: 1, MemUsed: 1023, MemAvail: 1024,
			Net: five, Disk: []DiskRate{{Name: "sda", BusyPercent: 100}, {Name: "", ReadIOPS: negZero}},
		},
		"throttle without HasThrottle": {Throttle: 7},
		"has throttle, zero bits":      {HasThrottle: true},
		"all throttle bits":            {HasThrottle: true, Throttle: math.MaxUint32},
		"huge sizes": {
			MemTotal: math.MaxUint64, MemUsed: 1 << 63, MemAvail: 1<<62 | 1<<10,
			SwapTotal: 1 << 62, SwapUsed: (1<<44 - 1) << 20, DiskTotal: 1<<64 - 1<<20, DiskUsed: 1<<54 - 1,
		},
		"empty non-nil slices": {Net: []NetRate{}, Disk: []DiskRate{}},
		"odd names":            {Net: []NetRate{{Name: "\xff\x00ü" + strings.Repeat("x", 200)}}},
	}
	for name, s := range cases {
		roundTrip(t, name, s)
	}
}

// TestSampleEncodedSize pins the size the design is built on: about 115
// bytes on average for two busy interfaces and a disk, a little more when
// reads and drops are non-zero too.
func TestSampleEncodedSize(t *testing.T) {
	total, lo, hi := 0, math.MaxInt, 0
	const n = 1000
	for i := range n {
		l := len(EncodeSample(nil, realisticSample(i)))
		total += l
		lo, hi = min(lo, l), max(hi, l)
	}
	avg := float64(total) / n
	js, _ := json.Marshal(realisticSample(1))
	t.Logf("encoded sample: avg %.1f B (min %d, max %d); same sample as JSON %d B", avg, lo, hi, len(js))
	if avg < 60 || avg > 120 || hi > 130 {
		t.Errorf("encoded size avg %.1f B, max %d B; want avg within 60..120, max <= 130", avg, hi)
	}
	if e := roundTrip(t, "empty", Sample{}); len(e) != 11 {
		t.Errorf("empty sample encodes to %d bytes (%x), want 11", len(e), e)
	}
}

func TestSampleRoundTripRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		s := randomSample(rng)
		enc := roundTrip(t, fmt.Sprintf("random %d", i), s)
		if t.Failed() {
			t.Fatalf("sample %+v encoded %x", s, enc)
		}
	}
}

func randomSample(rng *rand.Rand) Sample {
	f := func() float32 {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return float32(math.Copysign(0, -1))
		case 2:
			return math.Float32frombits(0x7f800000 | rng.Uint32()) // NaN/Inf payloads
		default:
			return math.Float32frombits(rng.Uint32())
		}
	}
	u := func() uint64 {
		switch rng.IntN(7) {
		case 0:
			return 0
		case 1:
			return rng.Uint64()
		case 2:
			return rng.Uint64N(1<<40) << 10
		case 3:
			return rng.Uint64N(1<<40) << 20
		case 4:
			return rng.Uint64() | 1<<63
		case 5:
			return (rng.Uint64() | 1<<62) &^ (1<<10 - 1)
		default:
			return rng.Uint64N(1 << 30)
		}
	}
	name := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	s := Sample{
		CPUPercent: f(), FreqMHz: f(), TempC: f(), Load1: f(), Load5: f(), Load15: f(),
		MemTotal: u(), MemUsed: u(), MemAvail: u(), SwapTotal: u(), SwapUsed: u(), DiskTotal: u(), DiskUsed: u(),
		HasThrottle: rng.IntN(2) == 0,
	}
	if rng.IntN(2) == 0 {
		s.Throttle = rng.Uint32()
	}
	for range rng.IntN(6) {
		s.Net = append(s.Net, NetRate{name(), f(), f(), f(), f(), f(), f(), f(), f()})
	}
	for range rng.IntN(4) {
		s.Disk = append(s.Disk, DiskRate{name(), f(), f(), f(), f(), f()})
	}
	return s
}

func TestDecodeSampleRejects(t *testing.T) {
	good := EncodeSample(nil, realisticSample(20)) // has reads, drops: many fields present
	for n := range len(good) {
		if _, err := DecodeSample(good[:n]); err == nil {
			t.Errorf("prefix of %d of %d bytes decoded without error", n, len(good))
		}
	}
	bad := map[string][]byte{
		"nil":              nil,
		"version 0":        append([]byte{0}, good[1:]...),
		"version 2":        append([]byte{2}, good[1:]...),
		"trailing byte":    append(append([]byte(nil), good...), 0),
		"garbage":          []byte("this is not a sample at all"),
		"huge net count":   append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"net count > left": {1, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0},
		"name > left":      {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9, 'a', 0},
		"disk mask high":   {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x20},
		"throttle 33 bits": {1, flagThrottleVal, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0},
		"size overflow":    {1, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0, 0, 0, 0, 0, 0},
		"raw size w/ bits": {1, 0, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"bad uvarint":      {1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range bad {
		s, err := DecodeSample(b)
		if err == nil {
			t.Errorf("%s: decoded %x without error: %+v", name, b, s)
			continue
		}
		if !strings.HasPrefix(err.Error(), "store: decode sample: ") {
			t.Errorf("%s: error %q does not name the package", name, err)
		}
	}
	if _, err := DecodeSample(append([]byte{2}, good[1:]...)); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("unknown version error = %v, want it to name version 2", err)
	}
	// The hand-made inputs above are only wrong where they say: the same
	// bytes with that one thing fixed decode.
	for name, b := range map[string][]byte{
		"minimal":      {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		"one net":      {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'a', 0, 0},
		"disk mask ok": {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x10, 0, 0, 0x80, 0x3f},
		"throttle 32":  {1, flagThrottleVal, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},
		"raw size":     {1, 0, 0x03, 0x05, 0, 0, 0, 0, 0, 0, 0, 0},
	} {
		if _, err := DecodeSample(b); err != nil {
			t.Errorf("%s: %x: %v", name, b, err)
		}
	}
}

func FuzzDecodeSample(f *testing.F) {
	f.Add(EncodeSample(nil, Sample{}))
	f.Add(EncodeSample(nil, realisticSample(20)))
	f.Add(EncodeSample(nil, Sample{HasThrottle: true, Throttle: 3, MemTotal: math.MaxUint64,
		Net: make([]NetRate, 5), Disk: []DiskRate{{Name: "sda", BusyPercent: float32(math.NaN())}}}))
	f.Add([]byte{1, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSample(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		// (Not necessarily the same bytes: a non-minimal uvarint or an
		// explicit +0 float is accepted but never written.)
		enc := EncodeSample(nil, s)
		s2, err := DecodeSample(enc)
		if err != nil {
			t.Fatalf("re-encoding of %x (%x) does not decode: %v", b, enc, err)
		}
		if d := sameSample(s, s2); d != "" {
			t.Fatalf("re-encoding of %x differs: %s", b, d)
		}
		if len(enc) > len(b) {
			t.Fatalf("canonical form %x is longer than accepted input %x", enc, b)
		}
	})
}

// appendBatches appends n batches of size samples to job, sample i of the
// whole run being realisticSample(first+i).
func appendBatches(t testing.TB, db *DB, job string, first, n, size int) {
	t.Helper()
	batch := make([]Sample, size)
	for b := range n {
		for j := range batch {
			batch[j] = realisticSample(first + b*size + j)
		}
		if err := db.AppendSamples(job, batch); err != nil {
			t.Fatalf("AppendSamples batch %d: %v", b, err)
		}
	}
}

func collect(t testing.TB, db *DB, job string, from, until time.Time, desc bool) []Sample {
	t.Helper()
	var out []Sample
	scan := db.ScanSamples
	if desc {
		scan = db.ScanSamplesDesc
	}
	if err := scan(job, from, until, func(s Sample) bool { out = append(out, s); return true }); err != nil {
		t.Fatalf("scan %s [%v, %v) desc=%v: %v", job, from, until, desc, err)
	}
	return out
}

// wantIndexes checks got holds realisticSample(i) for each i in idx, in order.
func wantIndexes(t *testing.T, what string, got []Sample, idx ...int) {
	t.Helper()
	if len(got) != len(idx) {
		t.Fatalf("%s: %d samples, want %d", what, len(got), len(idx))
	}
	for k, i := range idx {
		if d := sameSample(stored(realisticSample(i)), got[k]); d != "" {
			t.Fatalf("%s: sample %d (want index %d): %s", what, k, i, d)
		}
		if got[k].Time.Location() != time.UTC {
			t.Fatalf("%s: sample %d time not UTC: %v", what, k, got[k].Time)
		}
	}
}

func span(from, to int) []int { // [from, to)
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func reversed(s []int) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func at(i int) time.Time { return realisticSample(i).Time }

func TestSamplesAppendScanPruneDelete(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	defer func() { _ = db.Close() }()

	// Three batches of 12 (one minute each at 5 s) for job a; job b's
	// samples sit in the same time range.
	appendBatches(t, db, "job-a", 0, 3, 12)
	bSamples := []Sample{realisticSample(100), realisticSample(101)}
	bSamples[0].Time, bSamples[1].Time = at(5), at(6)
	if err := db.AppendSamples("job-b", bSamples); err != nil {
		t.Fatal(err)
	}

	var zero time.Time
	wantIndexes(t, "all", collect(t, db, "job-a", zero, zero, false), span(0, 36)...)
	wantIndexes(t, "all desc", collect(t, db, "job-a", zero, zero, true), reversed(span(0, 36))...)
	wantIndexes(t, "[2, 12)", collect(t, db, "job-a", at(2), at(12), false), span(2, 12)...)
	wantIndexes(t, "[2, 12) desc", collect(t, db, "job-a", at(2), at(12), true), reversed(span(2, 12))...)
	// Sub-millisecond bounds: from just after sample 2 excludes it, until
	// just after sample 12 includes it.
	ns := time.Nanosecond
	wantIndexes(t, "(2, 12]", collect(t, db, "job-a", at(2).Add(ns), at(12).Add(ns), false), span(3, 13)...)
	wantIndexes(t, "(2, 12] desc", collect(t, db, "job-a", at(2).Add(ns), at(12).Add(ns), true), reversed(span(3, 13))...)
	wantIndexes(t, "from 30", collect(t, db, "job-a", at(30), zero, false), span(30, 36)...)
	wantIndexes(t, "until 3 desc", collect(t, db, "job-a", zero, at(3), true), 2, 1, 0)
	wantIndexes(t, "until past end desc", collect(t, db, "job-a", at(34), at(1000), true), 35, 34)
	wantIndexes(t, "empty range", collect(t, db, "job-a", at(5), at(5), false))
	wantIndexes(t, "inverted range", collect(t, db, "job-a", at(9), at(5), true))
	wantIndexes(t, "before any", collect(t, db, "job-a", zero, at(0), false))
	wantIndexes(t, "pre-1970 from", collect(t, db, "job-a", time.Unix(-100, 0), at(1), false), 0)
	wantIndexes(t, "no such job", collect(t, db, "job-none", zero, zero, false))

	// Stop early, both directions.
	for _, desc := range []bool{false, true} {
		calls := 0
		scan := db.ScanSamples
		if desc {
			scan = db.ScanSamplesDesc
		}
		err := scan("job-a", zero, zero, func(Sample) bool { calls++; return calls < 3 })
		if err != nil || calls != 3 {
			t.Errorf("stop early desc=%v: %d calls, %v; want 3", desc, calls, err)
		}
	}

	// Jobs are isolated.
	gotB := collect(t, db, "job-b", zero, zero, false)
	if len(gotB) != 2 || sameSample(stored(bSamples[0]), gotB[0]) != "" || sameSample(stored(bSamples[1]), gotB[1]) != "" {
		t.Fatalf("job-b = %+v", gotB)
	}

	st, err := db.SampleStats("job-a")
	if err != nil || st != (SampleStats{Job: "job-a", Count: 36, First: at(0), Last: at(35)}) {
		t.Fatalf("SampleStats = %+v, %v", st, err)
	}

	// Prune deletes whole blocks. The three one-minute batches share one
	// (a small last block takes the next flush in): a bound inside it keeps
	// it, a bound just past its last sample takes it.
	if n, err := db.PruneSamples("job-a", at(10)); err != nil || n != 0 {
		t.Fatalf("PruneSamples(at 10) = %d, %v; want 0, the block reaches past the bound", n, err)
	}
	if n, err := db.PruneSamples("job-a", at(35)); err != nil || n != 0 {
		t.Fatalf("PruneSamples(at 35) = %d, %v; want 0, sample 35 is not before it", n, err)
	}
	wantIndexes(t, "after a bound inside the block", collect(t, db, "job-a", zero, zero, false), span(0, 36)...)
	if n, err := db.PruneSamples("job-a", at(35).Add(ns)); err != nil || n != 36 {
		t.Fatalf("PruneSamples(at 35 + 1ns) = %d, %v; want 36", n, err)
	}
	if n, err := db.PruneSamples("job-a", at(35).Add(ns)); err != nil || n != 0 {
		t.Fatalf("second PruneSamples(at 35 + 1ns) = %d, %v; want 0", n, err)
	}
	if n, err := db.PruneSamples("job-none", at(100)); err != nil || n != 0 {
		t.Fatalf("PruneSamples(no such job) = %d, %v", n, err)
	}
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 0 {
		t.Fatalf("SampleStats after prune = %+v, %v", st, err)
	}
	appendBatches(t, db, "job-a", 40, 2, 12)
	wantIndexes(t, "after prune and append", collect(t, db, "job-a", zero, zero, false), span(40, 64)...)
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 24 || !st.First.Equal(at(40)) || !st.Last.Equal(at(63)) {
		t.Fatalf("SampleStats after prune and append = %+v, %v", st, err)
	}
	if got := collect(t, db, "job-b", zero, zero, false); len(got) != 2 {
		t.Fatalf("prune of job-a touched job-b: %d samples", len(got))
	}

	// Reopening keeps everything.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path)
	wantIndexes(t, "after reopen", collect(t, db, "job-a", zero, zero, false), span(40, 64)...)

	if err := db.DeleteSamples("job-a"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteSamples("job-a"); err != nil {
		t.Fatalf("second DeleteSamples: %v", err)
	}
	if st, err := db.SampleStats("job-a"); err != nil || st != (SampleStats{Job: "job-a"}) {
		t.Fatalf("SampleStats after delete = %+v, %v", st, err)
	}
	wantIndexes(t, "after delete", collect(t, db, "job-a", zero, zero, false))
	if got := collect(t, db, "job-b", zero, zero, false); len(got) != 2 {
		t.Fatalf("delete of job-a touched job-b: %d samples", len(got))
	}
}

func TestAppendSamplesRefuses(t *testing.T) {
	db := openTest(t)
	good := realisticSample(0)
	for name, batch := range map[string][]Sample{
		"zero time":     {good, {}},
		"pre-1970 time": {good, {Time: time.Unix(-1, 0)}},
	} {
		err := db.AppendSamples("job-a", batch)
		if err == nil || !strings.Contains(err.Error(), "store: append 2 samples to job \"job-a\": sample 1") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if err := db.AppendSamples("", []Sample{good}); err == nil {
		t.Error("empty job id accepted")
	}
	if err := db.AppendSamples("job-a", nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
	// Nothing of a refused batch is written; an empty one creates nothing.
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if b := jobSamples(tx, "job-a"); b != nil {
			t.Errorf("job-a bucket exists with %d keys", b.Stats().KeyN)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same millisecond replaces.
	dup := realisticSample(1)
	dup.Time = good.Time.Add(300 * time.Microsecond)
	if err := db.AppendSamples("job-a", []Sample{good, dup}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, db, "job-a", time.Time{}, time.Time{}, false)
	dup.Time = good.Time
	if len(got) != 1 || sameSample(dup, got[0]) != "" {
		t.Fatalf("same-millisecond samples: got %+v", got)
	}
}

func TestScanSamplesReportsUndecodable(t *testing.T) {
	db := openTest(t)
	appendBatches(t, db, "job-a", 0, 1, 3)
	// A block in a format this build does not know, and a well-formed
	// block whose second sample does not decode.
	keys, vals := buildBlocks([]rawSample{
		{ms: uint64(at(6).UnixMilli()), enc: EncodeSample(nil, realisticSample(6))},
		{ms: uint64(at(7).UnixMilli()), enc: []byte{9, 9}},
	})
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := jobSamples(tx, "job-a")
		if err := putBlock(b, millisKey(uint64(at(4).UnixMilli())), []byte{9, 9}); err != nil {
			return err
		}
		return putBlock(b, keys[0], vals[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from   time.Time
		n      int
		at     time.Time
		detail string
	}{
		{time.Time{}, 3, at(4), "unknown block format 9"},
		{at(6), 1, at(7), "unknown format version 9"},
	} {
		n := 0
		err = db.ScanSamples("job-a", tc.from, time.Time{}, func(Sample) bool { n++; return true })
		if err == nil || n != tc.n || !strings.Contains(err.Error(), tc.at.Format(time.RFC3339Nano)) ||
			!strings.Contains(err.Error(), `job "job-a"`) || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("scan from %v over a bad value: %d samples, err %v; want %d and %q at %v", tc.from, n, err, tc.n, tc.detail, tc.at)
		}
	}
}

// TestSamplesOneBlockPerFlush checks the point of blocks: a flush of 45
// minutes at 5 s becomes one nested bucket, and appending it writes the
// block's own pages plus a handful (the job bucket's last leaf, the
// parents, the meta page), never the blocks before it. bbolt counts the
// pages a commit writes, so the check does not depend on the machine.
func TestSamplesOneBlockPerFlush(t *testing.T) {
	db := openTest(t)
	const per = 540
	appendBatches(t, db, "job-a", 0, 40, per)
	batch := make([]Sample, per)
	for j := range batch {
		batch[j] = realisticSample(40*per + j)
	}
	before := db.bolt.Stats()
	if err := db.AppendSamples("job-a", batch); err != nil {
		t.Fatal(err)
	}
	after := db.bolt.Stats()
	diff := after.TxStats.Sub(&before.TxStats)
	written := diff.GetWrite()
	var blockPages int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := jobSamples(tx, "job-a")
		if n := keyCount(b); n != 41 {
			t.Errorf("%d keys for 41 flushes, want one block each", n)
		}
		k, v := b.Cursor().Last()
		bv, err := blockAt(b, k, v)
		if err != nil {
			return err
		}
		blockPages = int64(len(bv)+16+16+1+4095) / 4096
		t.Logf("a flush of %d samples: a %d-byte block (%.1f B a sample), %d pages written", per, len(bv), float64(len(bv))/per, written)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if written > blockPages+6 {
		t.Errorf("appending a %d-page block wrote %d pages, want at most %d", blockPages, written, blockPages+6)
	}
}

// checkFile opens path and checks it the way an agent start after a power
// cut would meet it: bbolt's own consistency check, every bucket and key
// reachable, every sample of job decodes, and the samples are exactly
// realisticSample(0..n-1) with n a whole number of batches.
func checkFile(t *testing.T, path, job string, batch int) int {
	t.Helper()
	db, err := Open(path, Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("Open after kill: %v", err)
	}
	defer func() { _ = db.Close() }()
	err = db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("bbolt check: %v", err)
		}
		var walk func(b *bolt.Bucket) error
		walk = func(b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					return walk(b.Bucket(k))
				}
				return nil
			})
		}
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) })
	})
	if err != nil {
		t.Fatalf("walk after kill: %v", err)
	}
	n := 0
	err = db.ScanSamples(job, time.Time{}, time.Time{}, func(s Sample) bool {
		if d := sameSample(stored(realisticSample(n)), s); d != "" {
			t.Fatalf("sample %d after kill: %s", n, d)
		}
		n++
		return true
	})
	if err != nil {
		t.Fatalf("scan after kill: %v", err)
	}
	if n%batch != 0 {
		t.Fatalf("%d samples after kill: not whole batches of %d", n, batch)
	}
	return n
}

const (
	envKillChild = "RASPI_STORE_KILL_CHILD"
	killBatch    = 12
)

// TestSamplesKillChild is the child of TestSamplesSurviveKill: it appends
// batches as fast as it can, reporting each commit, until it is killed.
func TestSamplesKillChild(t *testing.T) {
	path := os.Getenv(envKillChild)
	if path == "" {
		t.Skip("helper process for TestSamplesSurviveKill")
	}
	db, err := Open(path, Options{})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	st, err := db.SampleStats("job-k")
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	writeUntilKilled(st.Count, func(b []Sample) error { return db.AppendSamples("job-k", b) })
}

// writeUntilKilled is a kill test's child: it appends batches of killBatch
// realistic samples to job-k, numbered from next, printing each commit,
// until it is killed (or exits 1 on an error).
func writeUntilKilled(next int, appendBatch func([]Sample) error) {
	batch := make([]Sample, killBatch)
	for ; ; next += killBatch {
		for j := range batch {
			batch[j] = realisticSample(next + j)
		}
		if err := appendBatch(batch); err != nil {
			fmt.Printf("error %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("committed %d\n", next+killBatch)
	}
}

// TestSamplesSurviveKill SIGKILLs a writer mid-stream, three times on the
// same file: each time the file must open and check clean, hold every batch
// the writer reported committed, and hold no partial batch.
func TestSamplesSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := testPath(t)
	openAt(t, path).Close() // create it, as the agent would have
	rng := rand.New(rand.NewPCG(3, 4))
	prev := 0
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSamplesKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillChild+"="+path)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a random number of commits, while the child is
		// somewhere inside the next one.
		target := 5 + rng.IntN(40)
		committed, seen := 0, 0
		sc := bufio.NewScanner(out)
		deadline := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
		for sc.Scan() {
			line := sc.Text()
			if msg, ok := strings.CutPrefix(line, "error "); ok {
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: child: %s", round, msg)
			}
			if v, ok := strings.CutPrefix(line, "committed "); ok {
				committed, _ = strconv.Atoi(v)
				if seen++; seen == target {
					_ = cmd.Process.Kill()
					break
				}
			}
		}
		deadline.Stop()
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.String() != "signal: killed" {
			t.Fatalf("round %d: child ended with %v after %d commits, want killed", round, err, seen)
		}
		n := checkFile(t, path, "job-k", killBatch)
		t.Logf("round %d: killed after %d reported commits; file holds %d samples (reported %d)", round, seen, n, committed)
		if n < committed || n < prev {
			t.Fatalf("round %d: %d samples on disk, but %d were reported committed", round, n, committed)
		}
		prev = n
	}
}

// TestSamplesSurviveClose: batches written and the file closed the ordinary
// way are all there after reopening.
func TestSamplesSurviveClose(t *testing.T) {
	path := testPath(t)
	db := openAt(t, path)
	appendBatches(t, db, "job-k", 0, 10, killBatch)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := checkFile(t, path, "job-k", killBatch); n != 120 {
		t.Fatalf("%d samples after reopen, want 120", n)
	}
}

// keyCount is how many keys b holds itself (bbolt's Stats counts the nested
// buckets' keys too).
func keyCount(b *bolt.Bucket) int {
	n := 0
	_ = b.ForEach(func(_, _ []byte) error { n++; return nil })
	return n
}

// TestSampleBucketLayout pins the on-disk layout other tools may read:
// samples/<job>/<8-byte big-endian unix ms of the first sample>/ is a
// bucket holding one value under key 0x00: format 3, count, span in ms,
// then a raw DEFLATE stream of, per sample, a time delta (not for the first),
// a length and EncodeSample's bytes.
func TestSampleBucketLayout(t *testing.T) {
	db := openTest(t)
	s0, s1 := realisticSample(3), realisticSample(3)
	s1.Time = s0.Time.Add(5 * time.Second)
	s1.TempC++
	if err := db.AppendSamples("job-x", []Sample{s1, s0}); err != nil {
		t.Fatal(err)
	}
	e0, e1 := EncodeSample(nil, s0), EncodeSample(nil, s1)
	wantRec := binary.AppendUvarint(nil, uint64(len(e0)))
	wantRec = append(wantRec, e0...)
	wantRec = binary.AppendUvarint(wantRec, 5000)
	wantRec = binary.AppendUvarint(wantRec, uint64(len(e1)))
	wantRec = append(wantRec, e1...)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("samples")).Bucket([]byte("job-x"))
		k, v := b.Cursor().First()
		wantK := []byte{0, 0, 0, 0, 0, 0, 0, 0}
		ms := s0.Time.UnixMilli()
		for i := 7; i >= 0; i-- {
			wantK[i] = byte(ms)
			ms >>= 8
		}
		if !bytes.Equal(k, wantK) || v != nil {
			t.Fatalf("stored %x -> %x, want %x -> a bucket", k, v, wantK)
		}
		blk := b.Bucket(k)
		if n := blk.Stats().KeyN; n != 1 {
			t.Errorf("block bucket has %d keys, want 1", n)
		}
		bv := blk.Get([]byte{0})
		head := []byte{3, 2}
		head = binary.AppendUvarint(head, 5000)
		if !bytes.HasPrefix(bv, head) {
			t.Fatalf("block value starts %x, want %x", bv[:min(len(bv), 8)], head)
		}
		rec, err := io.ReadAll(flate.NewReader(bytes.NewReader(bv[len(head):])))
		if err != nil || !bytes.Equal(rec, wantRec) {
			t.Errorf("block records %x, %v; want %x", rec, err, wantRec)
		}
		if n := keyCount(b); n != 1 {
			t.Errorf("%d keys, want 1 block", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSamplesConcurrentScan: scans running while batches are appended each
// see one committed state, so always whole batches, in order.
func TestSamplesConcurrentScan(t *testing.T) {
	db := openTest(t)
	done := make(chan error, 1)
	go func() {
		batch := make([]Sample, 12)
		for b := range 40 {
			for j := range batch {
				batch[j] = realisticSample(b*12 + j)
			}
			if err := db.AppendSamples("job-a", batch); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		n := 0
		err := db.ScanSamples("job-a", time.Time{}, time.Time{}, func(s Sample) bool {
			if !s.Time.Equal(at(n)) {
				t.Errorf("sample %d at %v, want %v", n, s.Time, at(n))
			}
			n++
			return true
		})
		if err != nil || n%12 != 0 {
			t.Fatalf("concurrent scan: %d samples, %v", n, err)
		}
	}
	if st, err := db.SampleStats("job-a"); err != nil || st.Count != 480 {
		t.Fatalf("SampleStats = %+v, %v", st, err)
	}
}

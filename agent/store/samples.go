package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Samples live in the "samples" bucket, one nested bucket per job id, in
// blocks (block.go), normally one per flush: keys are the first sample's time
// as 8-byte big-endian unix milliseconds, so bytewise key order is time
// order and a range scan is a cursor seek; each block holds a run of samples
// in EncodeSample's binary form, deflated together.
//
// A sampler appends in time order, so every write transaction sets the nested
// bucket's FillPercent to 1.0 (bbolt does not persist it): leaf pages are then
// split full instead of half full.

// sampleFillPercent packs leaves full: keys only ever grow.
const sampleFillPercent = 1.0

// sampleFormatV1 is the first byte of every encoded sample. DecodeSample
// rejects any other value, so a later layout can coexist in the same file.
const sampleFormatV1 = 1

// Layout of format 1, after the version byte:
//
//	flags    1 byte: bits 0-5 say which of CPUPercent, FreqMHz, TempC, Load1,
//	         Load5, Load15 follow (a float whose bits are all zero, i.e. +0,
//	         is left out); bit 6 is HasThrottle; bit 7 says a Throttle value
//	         follows.
//	floats   the present ones, float32 bits little endian.
//	sizes    MemTotal, MemUsed, MemAvail, SwapTotal, SwapUsed, DiskTotal,
//	         DiskUsed, each as a size (see appendSize).
//	throttle uvarint, only with flag bit 7.
//	net      uvarint count, then per interface: uvarint name length, name,
//	         1 mask byte (bit i: float i of NetRate's 8 follows), the floats.
//	disk     uvarint count, then per device: uvarint name length, name,
//	         1 mask byte (bits 0-4 for DiskRate's 5 floats; 5-7 must be 0),
//	         the floats.
//
// Nothing may follow. Leaving out zero floats matters because most rates are
// zero most of the time (errors, drops, an idle disk's reads): a quiet
// interface costs its name and 2 bytes instead of 33.
const (
	flagHasThrottle = 1 << 6
	flagThrottleVal = 1 << 7

	numSampleFloats = 6
	numNetFloats    = 8
	numDiskFloats   = 5
)

// Sizes (the uint64 byte counts) are stored as uvarint(m<<2 | k) meaning
// m << (10*k) for k = 0, 1, 2: /proc/meminfo counts in KiB and statfs in
// 4 KiB blocks, so their low 10 bits are zero and dropping them saves one or
// two bytes per value. k = 3 (sizeRaw) is followed by the plain uvarint, for
// the values of 2^62 and up that m<<2 cannot hold.
const (
	sizeShiftUnit = 10
	sizeMaxShift  = 2
	sizeRaw       = 3
)

// appendSize appends v in the size form described above.
func appendSize(dst []byte, v uint64) []byte {
	m, k := v, uint64(0)
	for k < sizeMaxShift && m != 0 && m&(1<<sizeShiftUnit-1) == 0 {
		m >>= sizeShiftUnit
		k++
	}
	if m>>62 != 0 {
		return binary.AppendUvarint(append(dst, sizeRaw), v)
	}
	return binary.AppendUvarint(dst, m<<2|k)
}

// EncodeSample appends the stored form of s to dst and returns it. s.Time is
// not encoded: the key carries it (see the samples layout above). Empty Net
// and Disk slices decode as nil. A device with two busy interfaces and one
// disk takes about 115 bytes (TestSampleEncodedSize), a seventh of the same
// sample as encoding/json writes it.
func EncodeSample(dst []byte, s Sample) []byte {
	top := [numSampleFloats]float32{s.CPUPercent, s.FreqMHz, s.TempC, s.Load1, s.Load5, s.Load15}
	flags := floatMask(top[:])
	if s.HasThrottle {
		flags |= flagHasThrottle
	}
	if s.Throttle != 0 {
		flags |= flagThrottleVal
	}
	dst = append(dst, sampleFormatV1, flags)
	dst = appendFloats(dst, flags, top[:])
	for _, v := range [...]uint64{s.MemTotal, s.MemUsed, s.MemAvail, s.SwapTotal, s.SwapUsed, s.DiskTotal, s.DiskUsed} {
		dst = appendSize(dst, v)
	}
	if s.Throttle != 0 {
		dst = binary.AppendUvarint(dst, uint64(s.Throttle))
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Net)))
	for i := range s.Net {
		n := &s.Net[i]
		f := [numNetFloats]float32{n.RxBytesPerSec, n.TxBytesPerSec, n.RxPacketsPerSec, n.TxPacketsPerSec,
			n.RxErrorsPerSec, n.TxErrorsPerSec, n.RxDropsPerSec, n.TxDropsPerSec}
		dst = appendName(dst, n.Name)
		m := floatMask(f[:])
		dst = appendFloats(append(dst, m), m, f[:])
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Disk)))
	for i := range s.Disk {
		d := &s.Disk[i]
		f := [numDiskFloats]float32{d.ReadBytesPerSec, d.WriteBytesPerSec, d.ReadIOPS, d.WriteIOPS, d.BusyPercent}
		dst = appendName(dst, d.Name)
		m := floatMask(f[:])
		dst = appendFloats(append(dst, m), m, f[:])
	}
	return dst
}

func appendName(dst []byte, name string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(name))), name...)
}

// floatMask has bit i set when vals[i] is anything but +0. Comparing bits
// rather than values keeps -0 and every NaN payload exact.
func floatMask(vals []float32) byte {
	var m byte
	for i, v := range vals {
		if math.Float32bits(v) != 0 {
			m |= 1 << i
		}
	}
	return m
}

func appendFloats(dst []byte, mask byte, vals []float32) []byte {
	for i, v := range vals {
		if mask&(1<<i) != 0 {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
		}
	}
	return dst
}

// DecodeSample is the inverse of EncodeSample. Time is left zero: scans set it
// from the key. Input that is not exactly one format-1 sample (another
// version, truncated, trailing bytes, out-of-range values) is an error, never
// a panic, and counts are checked against the bytes left before anything is
// allocated, so garbage cannot make it allocate much.
func DecodeSample(b []byte) (Sample, error) {
	var d sampleDecoder
	s, err := d.decode(b)
	if err != nil {
		return Sample{}, fmt.Errorf("store: decode sample: %w", err)
	}
	return s, nil
}

// sampleDecoder decodes many samples in a row. It remembers the interface
// and device names it has seen, so a scan of a week does not allocate the same
// few names hundreds of thousands of times. A device has a handful of
// interfaces and disks, and the lookup is a linear search, so it keeps 16.
type sampleDecoder struct {
	names  [16]string
	nNames int
}

func (d *sampleDecoder) name(b []byte) string {
	for _, n := range d.names[:d.nNames] {
		if n == string(b) { // compiled without allocating
			return n
		}
	}
	n := string(b)
	if d.nNames < len(d.names) {
		d.names[d.nNames] = n
		d.nNames++
	}
	return n
}

// sampleReader walks an encoded sample; the first failure sticks, so decode
// can read a whole group and check once.
type sampleReader struct {
	b   []byte
	off int
	err error
}

// fail records that what (element i of it, when i >= 0) is missing or is
// not a valid uvarint.
func (r *sampleReader) fail(what string, i int) {
	if r.err != nil {
		return
	}
	if i >= 0 {
		what = fmt.Sprintf("%s %d", what, i)
	}
	if r.off >= len(r.b) {
		r.err = fmt.Errorf("truncated: %s missing after byte %d", what, len(r.b))
		return
	}
	r.err = fmt.Errorf("%s at byte %d of %d: bad encoding or truncated", what, r.off, len(r.b))
}

// invalid records a value that decoded but is out of range.
func (r *sampleReader) invalid(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *sampleReader) byte(what string, i int) byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail(what, i)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *sampleReader) uvarint(what string, i int) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(what, i)
		return 0
	}
	r.off += n
	return v
}

func (r *sampleReader) size(what string) uint64 {
	h := r.uvarint(what, -1)
	m, k := h>>2, h&3
	if k == sizeRaw {
		if m != 0 {
			r.invalid("%s: raw size marker %d carries bits", what, h)
			return 0
		}
		return r.uvarint(what, -1)
	}
	if m > math.MaxUint64>>(sizeShiftUnit*k) {
		r.invalid("%s: %d<<%d overflows 64 bits", what, m, sizeShiftUnit*k)
		return 0
	}
	return m << (sizeShiftUnit * k)
}

// floats fills dst[i] for each bit i of mask; the rest stay +0.
func (r *sampleReader) floats(what string, i int, mask byte, dst []*float32) {
	for j, p := range dst {
		if mask&(1<<j) == 0 {
			continue
		}
		if r.err != nil || len(r.b)-r.off < 4 {
			r.fail(what, i)
			return
		}
		*p = math.Float32frombits(binary.LittleEndian.Uint32(r.b[r.off:]))
		r.off += 4
	}
}

// name reads a length-prefixed name.
func (r *sampleReader) name(d *sampleDecoder, what string, i int) string {
	n := r.uvarint(what, i)
	if r.err != nil {
		return ""
	}
	if left := len(r.b) - r.off; n > uint64(left) {
		r.invalid("%s %d: length %d exceeds the %d bytes left", what, i, n, left)
		return ""
	}
	s := d.name(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

// count reads an element count and refuses one that the remaining bytes
// cannot hold at minElem bytes per element.
func (r *sampleReader) count(what string, minElem int) int {
	n := r.uvarint(what, -1)
	if r.err != nil {
		return 0
	}
	if left := len(r.b) - r.off; n > uint64(left/minElem) {
		r.invalid("%s %d: more than the %d bytes left can hold", what, n, left)
		return 0
	}
	return int(n)
}

func (d *sampleDecoder) decode(b []byte) (Sample, error) {
	if len(b) == 0 {
		return Sample{}, errors.New("empty value")
	}
	if b[0] != sampleFormatV1 {
		return Sample{}, fmt.Errorf("unknown format version %d (want %d)", b[0], sampleFormatV1)
	}
	var s Sample
	r := sampleReader{b: b, off: 1}
	flags := r.byte("flags", -1)
	r.floats("float", -1, flags, []*float32{&s.CPUPercent, &s.FreqMHz, &s.TempC, &s.Load1, &s.Load5, &s.Load15})
	s.MemTotal = r.size("mem_total")
	s.MemUsed = r.size("mem_used")
	s.MemAvail = r.size("mem_available")
	s.SwapTotal = r.size("swap_total")
	s.SwapUsed = r.size("swap_used")
	s.DiskTotal = r.size("disk_total")
	s.DiskUsed = r.size("disk_used")
	s.HasThrottle = flags&flagHasThrottle != 0
	if flags&flagThrottleVal != 0 {
		t := r.uvarint("throttle", -1)
		if t > math.MaxUint32 {
			r.invalid("throttle %d exceeds 32 bits", t)
		}
		s.Throttle = uint32(t)
	}
	// Every element is at least a name length and a mask byte.
	if n := r.count("net count", 2); n > 0 {
		s.Net = make([]NetRate, n)
		for i := range s.Net {
			x := &s.Net[i]
			x.Name = r.name(d, "net name", i)
			m := r.byte("net mask", i)
			r.floats("net rate", i, m, []*float32{&x.RxBytesPerSec, &x.TxBytesPerSec, &x.RxPacketsPerSec,
				&x.TxPacketsPerSec, &x.RxErrorsPerSec, &x.TxErrorsPerSec, &x.RxDropsPerSec, &x.TxDropsPerSec})
		}
	}
	if n := r.count("disk count", 2); n > 0 {
		s.Disk = make([]DiskRate, n)
		for i := range s.Disk {
			x := &s.Disk[i]
			x.Name = r.name(d, "disk name", i)
			m := r.byte("disk mask", i)
			if m>>numDiskFloats != 0 {
				r.invalid("disk mask %d: reserved bits set in %#02x", i, m)
			}
			r.floats("disk rate", i, m, []*float32{&x.ReadBytesPerSec, &x.WriteBytesPerSec, &x.ReadIOPS,
				&x.WriteIOPS, &x.BusyPercent})
		}
	}
	if r.err != nil {
		return Sample{}, r.err
	}
	if r.off != len(b) {
		return Sample{}, fmt.Errorf("%d trailing bytes after byte %d", len(b)-r.off, r.off)
	}
	return s, nil
}

// errNoChange makes a write transaction that found nothing to do roll back:
// bbolt writes and fsyncs the meta page on every commit, even an empty one,
// and periodic retention mostly finds nothing to delete.
var errNoChange = errors.New("store: nothing to change")

// sampleMillis is the key time of a sample being stored. Zero and pre-1970
// times are refused: a zero Time is a caller's bug, and negative keys would
// sort after every real one.
func sampleMillis(t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, errors.New("zero time")
	}
	ms := t.UnixMilli()
	if ms < 0 {
		return 0, fmt.Errorf("time %s is before 1970", t.UTC().Format(time.RFC3339Nano))
	}
	return ms, nil
}

// boundMillis is a range bound as a key: the first millisecond at or after t,
// so that "t >= from" and "t < until" hold exactly for millisecond-precision
// stored times even when the bound has a sub-millisecond part. Bounds before
// 1970 become 0, before any stored key.
func boundMillis(t time.Time) uint64 {
	ms := t.UnixMilli() // floor
	if t.Nanosecond()%int(time.Millisecond) != 0 {
		ms++
	}
	return uint64(max(ms, 0))
}

func millisKey(ms uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), ms)
}

// keyTime decodes a sample key.
func keyTime(k []byte) (uint64, time.Time, error) {
	if len(k) != 8 {
		return 0, time.Time{}, fmt.Errorf("key %x is not an 8-byte time", k)
	}
	ms := binary.BigEndian.Uint64(k)
	return ms, time.UnixMilli(int64(ms)).UTC(), nil
}

// scanRange turns ScanSamples' bounds into keys [lo, hi); open is true when
// until is zero. empty is true when the range holds no millisecond at all.
func scanRange(from, until time.Time) (lo, hi uint64, open, empty bool) {
	lo = boundMillis(from)
	if until.IsZero() {
		return lo, 0, true, false
	}
	hi = boundMillis(until)
	return lo, hi, false, hi <= lo
}

// jobSamples returns job's sample bucket for reading, or nil when the job has
// never stored a sample (or its samples were deleted).
func jobSamples(tx *bolt.Tx, job string) *bolt.Bucket {
	p := bucket(tx, bucketSamples)
	if p == nil {
		return nil
	}
	return p.Bucket([]byte(job))
}

// writableJobSamples returns job's sample bucket inside a write transaction,
// creating it, with FillPercent set for appends.
func writableJobSamples(tx *bolt.Tx, job string) (*bolt.Bucket, error) {
	p, err := writableBucket(tx, bucketSamples)
	if err != nil {
		return nil, err
	}
	b, err := p.CreateBucketIfNotExists([]byte(job))
	if err != nil {
		return nil, fmt.Errorf("bucket %s/%s: %w", bucketSamples, job, err)
	}
	b.FillPercent = sampleFillPercent
	return b, nil
}

// AppendSamples writes a batch in ONE transaction (one fsync): the sampler
// buffers and flushes every flush interval. The batch goes in as a block (see
// block.go), or several past a block's limits, so a flush dirties the
// block's own pages, the job's last leaf, its parents and the meta page; see
// BenchmarkAppendSamplesBatch12 and BenchmarkFlushIntervalCurve for the
// bytes this costs.
//
// Times are stored to the millisecond; a sample in the same millisecond as a
// stored one replaces it, and samples that fall inside stored chunks (a
// clock stepped back) are merged into them, so scans stay in time order.
// Zero and pre-1970 times are refused, and then nothing of the batch is
// written. An empty batch writes nothing. When it returns nil the whole
// batch is durable; on error none of it is.
func (db *DB) AppendSamples(job string, batch []Sample) error {
	_, err := db.appendSamples(job, batch, time.Time{})
	return err
}

// AppendSamplesPruning is AppendSamples plus PruneSamples(job, before) in
// the same commit: retention then costs the pages it changes rather than a
// commit (and a meta page and fsync) of its own. It returns how many samples
// retention deleted.
func (db *DB) AppendSamplesPruning(job string, batch []Sample, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, fmt.Errorf("store: append %d samples to job %q: zero retention bound", len(batch), job)
	}
	return db.appendSamples(job, batch, before)
}

func (db *DB) appendSamples(job string, batch []Sample, before time.Time) (int, error) {
	if job == "" {
		return 0, fmt.Errorf("store: append %d samples: empty job id", len(batch))
	}
	if len(batch) == 0 && before.IsZero() {
		return 0, nil
	}
	// Encode before taking the write lock, into an arena that stays
	// untouched until commit: bbolt keeps the slices given to Put until then.
	raw := make([]rawSample, len(batch))
	arena := make([]byte, 0, 128*len(batch))
	for i := range batch {
		ms, err := sampleMillis(batch[i].Time)
		if err != nil {
			return 0, fmt.Errorf("store: append %d samples to job %q: sample %d: %w", len(batch), job, i, err)
		}
		start := len(arena)
		arena = EncodeSample(arena, batch[i])
		raw[i] = rawSample{ms: uint64(ms), enc: arena[start:len(arena):len(arena)]}
	}
	raw = sortRaw(raw)
	pruned := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if len(raw) == 0 && jobSamples(tx, job) == nil {
			return errNoChange
		}
		b, err := writableJobSamples(tx, job)
		if err != nil {
			return err
		}
		if len(raw) > 0 {
			if err := putSamples(b, raw); err != nil {
				return err
			}
		}
		if !before.IsZero() {
			if pruned, err = pruneBlocks(b, boundMillis(before)); err != nil {
				return err
			}
		}
		if len(raw) == 0 && pruned == 0 {
			return errNoChange
		}
		return nil
	})
	if errors.Is(err, errNoChange) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: append %d samples to job %q: %w", len(batch), job, err)
	}
	db.forgetCached()
	return pruned, nil
}

// putSamples stores sorted, unique samples as blocks. Stored blocks that
// reach into the samples' time span are decoded, merged with them (the new
// sample wins a shared millisecond) and replaced, which keeps blocks from
// overlapping. Appending after the last stored sample, the normal case,
// reads only the last block's header, unless that block is small (a flush
// cut short, or a short flush interval): then the samples join it, which
// rewrites the page it takes anyway and keeps the job from becoming a long
// run of one-page blocks half empty. The walk back stops at a block that
// does not decode: new samples still get stored.
func putSamples(b *bolt.Bucket, raw []rawSample) error {
	first, last := raw[0].ms, raw[len(raw)-1].ms
	c := b.Cursor()
	k, v := c.Seek(millisKey(last + 1))
	tail := k == nil // k, once stepped back, is the job's last block
	if tail {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	var old []rawSample
	var del [][]byte
	for ; k != nil; k, v = c.Prev() {
		ms, _, err := keyTime(k)
		if err != nil {
			return err
		}
		bv, h, err := blockHeadAt(b, k, v)
		if err != nil {
			// A damaged block's span is unknown: leave it where it is
			// (scans keep reporting it) rather than stop all appends.
			break
		}
		if ms+h.span < first && !(tail && len(bv) < smallBlock && last-ms < maxBlockSpan) {
			break
		}
		got, err := decodeBlock(nil, k, bv)
		if err != nil {
			break
		}
		old = append(got, old...)
		del = append(del, append([]byte(nil), k...))
		tail = false
	}
	if len(old) > 0 {
		raw = sortRaw(append(old, raw...))
	}
	for _, k := range del {
		if err := deleteKey(b, k); err != nil {
			return err
		}
	}
	return putBlocks(b, raw)
}

// keyString is a block key as a time, for errors.
func keyString(k []byte) string {
	if _, t, err := keyTime(k); err == nil {
		return t.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%x", k)
}

// pruneBlocks deletes the blocks whose every sample is before the unix
// millisecond hi and returns how many samples they held. The block reaching
// across hi stays whole: rewriting it without its older samples would cost
// as many pages as the flush that wrote it, every time retention runs, so a
// sample outlives its retention by at most one block's span (a flush
// interval, at most maxBlockSpan). A plain value (a schema 2 chunk the
// migration could not read) goes once the block after it starts before hi.
func pruneBlocks(b *bolt.Bucket, hi uint64) (int, error) {
	var del [][]byte
	n := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		ms, _, err := keyTime(k)
		if err != nil {
			return 0, err
		}
		if ms >= hi {
			break
		}
		if v != nil {
			if nk, _ := c.Next(); nk != nil && binary.BigEndian.Uint64(nk) <= hi {
				del = append(del, append([]byte(nil), k...))
			}
			c.Prev()
			continue
		}
		_, h, err := blockHeadAt(b, k, v)
		if err != nil {
			return 0, fmt.Errorf("block at %s: %w", keyString(k), err)
		}
		if ms+h.span >= hi {
			break
		}
		del = append(del, append([]byte(nil), k...))
		n += h.count
	}
	for _, k := range del {
		if err := deleteKey(b, k); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// ScanSamples calls fn for samples of job with from <= t < until in time
// order (zero until = open; zero from = from the first); fn returns false to
// stop. A job without samples is not an error.
//
// fn runs inside a read transaction, one sample at a time (a block, one
// flush's samples, is inflated at once), so a week of history never sits
// in memory at once on a 512 MB Pi. fn must not write to this DB (a write
// that grows the file waits for the read transaction to end: deadlock) and
// should be quick, since pages freed meanwhile cannot be reused. A stored
// value that does not decode stops the scan with an error naming its time.
func (db *DB) ScanSamples(job string, from, until time.Time, fn func(Sample) bool) error {
	return db.scanSamples(job, from, until, false, fn)
}

// ScanSamplesDesc is ScanSamples newest first, for "latest N".
func (db *DB) ScanSamplesDesc(job string, from, until time.Time, fn func(Sample) bool) error {
	return db.scanSamples(job, from, until, true, fn)
}

func (db *DB) scanSamples(job string, from, until time.Time, desc bool, fn func(Sample) bool) error {
	lo, hi, open, empty := scanRange(from, until)
	if empty {
		return nil
	}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := jobSamples(tx, job)
		if b == nil {
			return nil
		}
		var dec sampleDecoder
		c := b.Cursor()
		var k, v []byte
		switch {
		case !desc:
			// The block holding lo starts at or before it.
			k, v = c.Seek(millisKey(lo))
			if k == nil {
				k, v = c.Last()
			} else if binary.BigEndian.Uint64(k) > lo {
				if pk, pv := c.Prev(); pk != nil {
					k, v = pk, pv
				} else {
					k, v = c.First()
				}
			}
		case open:
			k, v = c.Last()
		default:
			// The last block starting before until.
			if k, _ = c.Seek(millisKey(hi)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		var chunk []rawSample
		var arena []byte
		var inf inflater
		for ; k != nil; k, v = step(c, desc) {
			bv, err := blockAt(b, k, v)
			if err == nil {
				chunk, arena, err = decodeBlockInto(chunk[:0], arena[:0], &inf, k, bv)
			}
			if err != nil {
				return fmt.Errorf("block at %s: %w", keyString(k), err)
			}
			for i := range chunk {
				r := chunk[i]
				if desc {
					r = chunk[len(chunk)-1-i]
				}
				if desc && r.ms < lo || !desc && !open && r.ms >= hi {
					return nil
				}
				if !desc && r.ms < lo || desc && !open && r.ms >= hi {
					continue
				}
				t := time.UnixMilli(int64(r.ms)).UTC()
				s, err := dec.decode(r.enc)
				if err != nil {
					return fmt.Errorf("sample at %s: %w", t.Format(time.RFC3339Nano), err)
				}
				s.Time = t
				if !fn(s) {
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: scan samples of job %q: %w", job, err)
	}
	return nil
}

func step(c *bolt.Cursor, desc bool) ([]byte, []byte) {
	if desc {
		return c.Prev()
	}
	return c.Next()
}

// PruneSamples deletes samples of job older than before (t < before) and
// returns how many. It is retention: run it every so often rather than per
// flush, or better as part of a flush (AppendSamplesPruning), since on its
// own it costs a commit plus the leaves it changes, however few samples go.
// A job without samples is not an error.
func (db *DB) PruneSamples(job string, before time.Time) (int, error) {
	hi := boundMillis(before)
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if jobSamples(tx, job) == nil {
			return errNoChange
		}
		b, err := writableJobSamples(tx, job)
		if err != nil {
			return err
		}
		if n, err = pruneBlocks(b, hi); err != nil {
			return err
		}
		if n == 0 {
			return errNoChange
		}
		return nil
	})
	if errors.Is(err, errNoChange) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: prune samples of job %q before %s: %w",
			job, before.UTC().Format(time.RFC3339Nano), err)
	}
	return n, nil
}

// DeleteSamples drops a job's whole nested bucket: every sample it has, in
// one commit. A job without samples is not an error. Its pages go to the
// freelist for reuse; the file does not shrink (bbolt never shrinks it).
func (db *DB) DeleteSamples(job string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		p, err := writableBucket(tx, bucketSamples)
		if err != nil {
			return err
		}
		err = p.DeleteBucket([]byte(job))
		if errors.Is(err, berrors.ErrBucketNotFound) {
			return errNoChange
		}
		return err
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: delete samples of job %q: %w", job, err)
	}
	return nil
}

// SampleStats describes what a job has stored, for status screens and for
// deciding whether a query range has data. First and Last are zero when Count
// is.
type SampleStats struct {
	Job         string
	Count       int
	First, Last time.Time
}

// SampleStats adds up the counts at the head of each of the job's blocks (a
// few hundred a week, none inflated), takes First from the first key and
// Last from the last block's span. A job without samples gives Count 0.
func (db *DB) SampleStats(job string) (SampleStats, error) {
	st := SampleStats{Job: job}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := jobSamples(tx, job)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var first, last uint64
		for k, v := c.First(); k != nil; k, v = c.Next() {
			ms, _, err := keyTime(k)
			var h blockHead
			if err == nil {
				_, h, err = blockHeadAt(b, k, v)
			}
			if err != nil {
				return fmt.Errorf("block at %s: %w", keyString(k), err)
			}
			if st.Count == 0 {
				first = ms
			}
			st.Count += h.count
			last = ms + h.span
		}
		if st.Count > 0 {
			st.First = time.UnixMilli(int64(first)).UTC()
			st.Last = time.UnixMilli(int64(last)).UTC()
		}
		return nil
	})
	if err != nil {
		return SampleStats{}, fmt.Errorf("store: sample stats of job %q: %w", job, err)
	}
	return st, nil
}

package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Schema 2 stored samples in chunks, which this file still builds (for the
// schema 1 migration, whose output the schema 2 step reads) and reads (for
// the migration to blocks, block.go): one bbolt key per run of consecutive
// samples rather than one per sample. With one key per sample every flush rewrote
// the job's last leaf, its branch, the parent buckets and the meta page for
// a kilobyte or two of samples; a chunk carries the same samples in a third
// of the bytes (consecutive readings differ in a few bytes), so a flush
// dirties fewer leaves and the tree has a few hundred keys a week instead of
// a hundred thousand.
//
// A chunk's key is the 8-byte big-endian unix millisecond of its first
// sample, so key order is time order and a range scan seeks to the chunk
// before the bound. Its value, format 2:
//
//	format   1 byte, chunkFormat.
//	count    uvarint n >= 1.
//	n times: uvarint dt, milliseconds since the previous sample (absent for
//	         the first, whose time is the key; at least 1 for the others, so
//	         times strictly increase);
//	         uvarint h = len<<1 | x, then: x = 0, len bytes of EncodeSample;
//	         x = 1 (only when len equals the previous sample's), a mask of
//	         ceil(len/8) bytes whose bit i says byte i differs from the
//	         previous sample's, then the differing bytes XORed with it.
//
// Nothing may follow. A chunk is at most maxChunkValue bytes (a single
// sample larger than that gets a chunk of its own). bbolt rewrites the whole
// last leaf on every append and, splitting a leaf that appends overfilled,
// leaves at least two keys on the new page, so big values make a flush drag
// its neighbours along and leave leaves half empty; chunks of a few hundred
// bytes keep the rewritten leaf to one page and leaves about 75% full.
const chunkFormat = 2

// maxChunkValue is the largest chunk built from more than one sample: a
// 4096-byte page holds a 16-byte header plus eight elements of a 16-byte
// element header, an 8-byte key and a 480-byte value. At 5 s sampling that
// is about six samples.
const maxChunkValue = 480

// rawSample is one sample as stored: its time in unix milliseconds and its
// EncodeSample bytes.
type rawSample struct {
	ms  uint64
	enc []byte
}

// chunkBuilder encodes sorted raw samples into chunks of at most
// maxChunkValue bytes.
type chunkBuilder struct {
	keys   [][]byte
	vals   [][]byte
	cur    []byte
	n      int
	prevMs uint64
	prev   []byte
	body   []byte // the current chunk's samples, after format and count
}

// add appends s, which must be later than the previous sample added.
func (c *chunkBuilder) add(s rawSample) {
	var enc []byte
	if c.n > 0 {
		enc = binary.AppendUvarint(nil, s.ms-c.prevMs)
	}
	enc = appendSampleDelta(enc, c.prev, s.enc, c.n > 0)
	if c.n > 0 && 1+binary.MaxVarintLen32+len(c.body)+len(enc) > maxChunkValue {
		c.finish()
		enc = appendSampleDelta(nil, nil, s.enc, false)
	}
	if c.n == 0 {
		c.keys = append(c.keys, millisKey(s.ms))
	}
	c.body = append(c.body, enc...)
	c.n++
	c.prevMs, c.prev = s.ms, s.enc
}

// appendSampleDelta appends enc against prev (see the chunk layout).
func appendSampleDelta(dst, prev, enc []byte, havePrev bool) []byte {
	if !havePrev || len(prev) != len(enc) {
		return append(binary.AppendUvarint(dst, uint64(len(enc))<<1), enc...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(enc))<<1|1)
	maskAt := len(dst)
	dst = append(dst, make([]byte, (len(enc)+7)/8)...)
	for i := range enc {
		if x := enc[i] ^ prev[i]; x != 0 {
			dst[maskAt+i/8] |= 1 << (i % 8)
			dst = append(dst, x)
		}
	}
	return dst
}

// finish closes the current chunk.
func (c *chunkBuilder) finish() {
	if c.n == 0 {
		return
	}
	v := binary.AppendUvarint([]byte{chunkFormat}, uint64(c.n))
	c.vals = append(c.vals, append(v, c.body...))
	c.body, c.n = nil, 0
}

// buildChunks encodes samples, sorted by time with no two in the same
// millisecond, into chunks.
func buildChunks(samples []rawSample) (keys, vals [][]byte) {
	var c chunkBuilder
	for _, s := range samples {
		c.add(s)
	}
	c.finish()
	return c.keys, c.vals
}

// sortRaw sorts by time and keeps the last of samples in the same
// millisecond: a later write of the same instant replaces the earlier one.
func sortRaw(s []rawSample) []rawSample {
	slices.SortStableFunc(s, func(a, b rawSample) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	out := s[:0]
	for i := range s {
		if i+1 < len(s) && s[i+1].ms == s[i].ms {
			continue
		}
		out = append(out, s[i])
	}
	return out
}

// chunkCount reads a chunk's sample count without decoding it.
func chunkCount(v []byte) (int, error) {
	if len(v) == 0 || v[0] != chunkFormat {
		return 0, chunkFormatErr(v)
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n == 0 || n > uint64(len(v)) {
		return 0, errors.New("bad sample count")
	}
	return int(n), nil
}

func chunkFormatErr(v []byte) error {
	if len(v) == 0 {
		return errors.New("empty chunk")
	}
	return fmt.Errorf("unknown chunk format %d (want %d)", v[0], chunkFormat)
}

// decodeChunk appends the raw samples of the chunk stored under key k to
// dst; schema 2 stored them so, and the migration to blocks reads them. The
// enc slices never alias v, so they outlive the transaction. Malformed input
// is an error, never a panic: every length is checked against the bytes
// left.
func decodeChunk(dst []rawSample, k, v []byte) ([]rawSample, error) {
	var arena []byte // the samples' bytes, appended
	ms, _, err := keyTime(k)
	if err != nil {
		return dst, err
	}
	n, err := chunkCount(v)
	if err != nil {
		return dst, err
	}
	r := sampleReader{b: v, off: 1}
	r.uvarint("count", -1)
	var prev []byte
	for i := range n {
		if i > 0 {
			dt := r.uvarint("time delta", i)
			if r.err == nil && (dt == 0 || ms+dt < ms) {
				r.invalid("sample %d: time delta %d is not positive or overflows", i, dt)
			}
			ms += dt
		}
		h := r.uvarint("sample header", i)
		if r.err != nil {
			return dst, r.err
		}
		size, delta := h>>1, h&1 == 1
		left := uint64(len(v) - r.off)
		var enc []byte
		switch {
		case !delta:
			if size > left {
				return dst, fmt.Errorf("sample %d: length %d exceeds the %d bytes left", i, size, left)
			}
			at := len(arena)
			arena = append(arena, v[r.off:r.off+int(size)]...)
			enc = arena[at:len(arena):len(arena)]
			r.off += int(size)
		case i == 0 || size != uint64(len(prev)):
			return dst, fmt.Errorf("sample %d: delta against a sample of another length", i)
		default:
			mlen := (int(size) + 7) / 8
			if uint64(mlen) > left {
				return dst, fmt.Errorf("sample %d: mask exceeds the %d bytes left", i, left)
			}
			mask := v[r.off : r.off+mlen]
			r.off += mlen
			at := len(arena)
			arena = append(arena, prev...)
			enc = arena[at:len(arena):len(arena)]
			for j := range enc {
				if mask[j/8]&(1<<(j%8)) == 0 {
					continue
				}
				if r.off >= len(v) {
					return dst, fmt.Errorf("sample %d: truncated delta", i)
				}
				enc[j] ^= v[r.off]
				r.off++
			}
		}
		dst = append(dst, rawSample{ms: ms, enc: enc})
		prev = enc
	}
	if r.err != nil {
		return dst, r.err
	}
	if r.off != len(v) {
		return dst, fmt.Errorf("%d trailing bytes after byte %d", len(v)-r.off, r.off)
	}
	return dst, nil
}

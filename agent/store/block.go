package store

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// Schema 3 keeps a job's samples in blocks, normally one per flush: every
// sample of the flush interval, deflated as one stream. A flush's samples
// are much alike (the same fields, slowly moving values, repeated names), so
// a block carries them in about a third of the bytes of schema 2's chunks
// (each of which held five or six samples, XORed against the one before):
// on the simulated board, 97 B a sample as chunks, 38 B in a 45-minute block.
//
// A block is a nested bucket of its own, under the job's bucket, keyed by
// the 8-byte big-endian unix millisecond of its first sample (so key order
// is time order and a range scan seeks to the block before the bound),
// holding one value under blockValueKey. The nested bucket is what keeps a
// flush from rewriting older data: bbolt never splits a leaf below five
// keys, so a leaf of big values would carry up to four older blocks along
// each time one is appended. As a bucket, a block gets pages of its own;
// appending one writes those pages, the job bucket's last leaf (a block's
// entry there is 40 bytes), the parents and the meta page.
//
// The value:
//
//	format  1 byte, blockFormat.
//	count   uvarint n >= 1.
//	span    uvarint, milliseconds from the first sample to the last, so
//	        retention and appends see a block's end without inflating it.
//	then a raw DEFLATE stream (compress/flate) of n records:
//	        uvarint dt, milliseconds since the previous sample (absent for
//	        the first, whose time is the key; at least 1, so times strictly
//	        increase); uvarint len; len bytes of EncodeSample.
//
// Nothing may follow the stream's end.
const blockFormat = 3

// blockValueKey is the one key inside a block's bucket.
var blockValueKey = []byte{0}

// Limits on one block. A flush longer or denser than this is stored as
// several blocks. maxBlockSpan also bounds how long a sample outlives its
// retention, since retention deletes whole blocks; maxBlockRaw bounds what
// reading a block inflates into memory.
const (
	maxBlockSpan    = 3600_000 // ms: an hour
	maxBlockSamples = 4096
	maxBlockRaw     = 1 << 20 // bytes of records before deflating
)

// smallBlock is the size below which the job's last block takes the next
// flush's samples in rather than getting a block after it: rewriting a
// block of less than a page costs what a new one costs.
const smallBlock = 3000

// blockLevel is the deflate level: a flush happens once per interval, so
// the best compression costs a few milliseconds of a Pi Zero's time per
// interval and saves SD pages for as long as retention keeps the block.
const blockLevel = flate.BestCompression

// blockHead is what a block says of itself before its stream.
type blockHead struct {
	count int
	span  uint64 // ms from first to last sample
	body  []byte // the deflate stream
}

// parseBlockHead reads a block value's header. It checks lengths, not the
// stream.
func parseBlockHead(v []byte) (blockHead, error) {
	if len(v) == 0 {
		return blockHead{}, errors.New("empty block")
	}
	if v[0] != blockFormat {
		return blockHead{}, fmt.Errorf("unknown block format %d (want %d)", v[0], blockFormat)
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n == 0 || n > maxBlockSamples {
		return blockHead{}, fmt.Errorf("bad sample count %d", n)
	}
	span, k2 := binary.Uvarint(v[1+k:])
	if k2 <= 0 || span >= 1<<62 {
		return blockHead{}, errors.New("bad span")
	}
	return blockHead{count: int(n), span: span, body: v[1+k+k2:]}, nil
}

// encodeBlock deflates samples, sorted by time with no two in the same
// millisecond and within the limits above, into one block value.
func encodeBlock(samples []rawSample) []byte {
	var rec []byte
	for i, s := range samples {
		if i > 0 {
			rec = binary.AppendUvarint(rec, s.ms-samples[i-1].ms)
		}
		rec = binary.AppendUvarint(rec, uint64(len(s.enc)))
		rec = append(rec, s.enc...)
	}
	out := binary.AppendUvarint([]byte{blockFormat}, uint64(len(samples)))
	out = binary.AppendUvarint(out, samples[len(samples)-1].ms-samples[0].ms)
	buf := bytes.NewBuffer(out)
	w, err := flate.NewWriter(buf, blockLevel)
	if err != nil {
		panic(err) // only for a bad level, a constant
	}
	_, _ = w.Write(rec) // a bytes.Buffer does not fail
	_ = w.Close()
	return buf.Bytes()
}

// buildBlocks splits sorted, unique samples into blocks within the limits.
func buildBlocks(samples []rawSample) (keys, vals [][]byte) {
	for len(samples) > 0 {
		n, raw := 0, 0
		for n < len(samples) && n < maxBlockSamples &&
			samples[n].ms-samples[0].ms < maxBlockSpan &&
			(n == 0 || raw+len(samples[n].enc)+2*binary.MaxVarintLen64 <= maxBlockRaw) {
			raw += len(samples[n].enc) + 2*binary.MaxVarintLen64
			n++
		}
		keys = append(keys, millisKey(samples[0].ms))
		vals = append(vals, encodeBlock(samples[:n]))
		samples = samples[n:]
	}
	return keys, vals
}

// decodeBlockInto appends the samples of the block stored under key k to
// dst, inflating into arena with inf, and returns arena: a scan passes the
// same arena, emptied, and the same inflater for every block. The enc slices
// point into arena, so they stay valid until it is reused, and never into v.
// Malformed input is an error, never a panic, and inflating stops at
// maxBlockRaw.
func decodeBlockInto(dst []rawSample, arena []byte, inf *inflater, k, v []byte) ([]rawSample, []byte, error) {
	ms, _, err := keyTime(k)
	if err != nil {
		return dst, arena, err
	}
	h, err := parseBlockHead(v)
	if err != nil {
		return dst, arena, err
	}
	arena, err = inf.inflate(arena[:0], h.body)
	if err != nil {
		return dst, arena, err
	}
	r := sampleReader{b: arena}
	first := ms
	for i := range h.count {
		if i > 0 {
			dt := r.uvarint("time delta", i)
			if r.err == nil && (dt == 0 || ms+dt < ms) {
				r.invalid("sample %d: time delta %d is not positive or overflows", i, dt)
			}
			ms += dt
		}
		size := r.uvarint("sample length", i)
		if r.err != nil {
			return dst, arena, r.err
		}
		if left := uint64(len(arena) - r.off); size > left {
			return dst, arena, fmt.Errorf("sample %d: length %d exceeds the %d bytes left", i, size, left)
		}
		dst = append(dst, rawSample{ms: ms, enc: arena[r.off : r.off+int(size) : r.off+int(size)]})
		r.off += int(size)
	}
	if r.off != len(arena) {
		return dst, arena, fmt.Errorf("%d trailing bytes after sample %d", len(arena)-r.off, h.count)
	}
	if ms-first != h.span {
		return dst, arena, fmt.Errorf("samples span %d ms, header says %d", ms-first, h.span)
	}
	return dst, arena, nil
}

// decodeBlock is decodeBlockInto with a fresh arena: the samples outlive
// the transaction.
func decodeBlock(dst []rawSample, k, v []byte) ([]rawSample, error) {
	dst, _, err := decodeBlockInto(dst, nil, new(inflater), k, v)
	return dst, err
}

// inflater inflates block after block with one decompressor: making one
// costs some 40 KiB, which a scan over a week of blocks would otherwise
// allocate per block.
type inflater struct {
	src bytes.Reader
	zr  io.ReadCloser
}

// inflate appends the DEFLATE stream body, inflated, to dst, refusing more
// than maxBlockRaw bytes and anything after the stream's end.
func (f *inflater) inflate(dst, body []byte) ([]byte, error) {
	f.src.Reset(body)
	if f.zr == nil {
		f.zr = flate.NewReader(&f.src)
	} else if err := f.zr.(flate.Resetter).Reset(&f.src, nil); err != nil {
		return dst, fmt.Errorf("inflating: %w", err)
	}
	w := bytes.NewBuffer(dst)
	n, err := w.ReadFrom(io.LimitReader(f.zr, maxBlockRaw+1))
	if err != nil {
		return w.Bytes(), fmt.Errorf("inflating: %w", err)
	}
	if n > maxBlockRaw {
		return w.Bytes(), fmt.Errorf("inflates to more than %d bytes", maxBlockRaw)
	}
	if f.src.Len() > 0 {
		return w.Bytes(), fmt.Errorf("%d bytes after the compressed stream", f.src.Len())
	}
	return w.Bytes(), nil
}

// blockAt returns the value of the block under key k of job bucket b. A
// plain value there (a schema 2 chunk the migration could not read, left
// for scans to report) is an error.
func blockAt(b *bolt.Bucket, k, v []byte) ([]byte, error) {
	if v != nil {
		return nil, errors.New("a value where a block belongs (a schema 2 chunk that did not decode)")
	}
	sub := b.Bucket(k)
	if sub == nil {
		return nil, errors.New("block bucket missing")
	}
	bv := sub.Get(blockValueKey)
	if bv == nil {
		return nil, errors.New("empty block bucket")
	}
	return bv, nil
}

// blockHeadAt is blockAt with the block's header read: what appends,
// retention and counts need, without inflating the block.
func blockHeadAt(b *bolt.Bucket, k, v []byte) ([]byte, blockHead, error) {
	bv, err := blockAt(b, k, v)
	if err != nil {
		return nil, blockHead{}, err
	}
	h, err := parseBlockHead(bv)
	return bv, h, err
}

// putBlock stores one block under key k, replacing whatever was there.
func putBlock(b *bolt.Bucket, k, v []byte) error {
	if err := deleteKey(b, k); err != nil {
		return err
	}
	sub, err := b.CreateBucket(k)
	if err != nil {
		return fmt.Errorf("block at %s: %w", keyString(k), err)
	}
	if err := sub.Put(blockValueKey, v); err != nil {
		return fmt.Errorf("block at %s: %w", keyString(k), err)
	}
	return nil
}

// putBlocks stores sorted, unique samples as new blocks.
func putBlocks(b *bolt.Bucket, samples []rawSample) error {
	keys, vals := buildBlocks(samples)
	for i := range keys {
		if err := putBlock(b, keys[i], vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// deleteKey removes a block, or a plain value, under k; a missing key is
// not an error.
func deleteKey(b *bolt.Bucket, k []byte) error {
	if b.Bucket(k) != nil {
		if err := b.DeleteBucket(k); err != nil {
			return fmt.Errorf("block at %s: %w", keyString(k), err)
		}
		return nil
	}
	if err := b.Delete(k); err != nil {
		return fmt.Errorf("key %x: %w", k, err)
	}
	return nil
}

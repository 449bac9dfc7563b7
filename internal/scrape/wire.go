package scrape

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The pipe between the agent and raspi-mcp-exporter carries frames: a
// uvarint length, then that many bytes. A request is
//
//	version byte, accept string, flags byte (1: the family table follows),
//	[family count, each: name, type byte, help, label count, labels],
//	process pid, process namespace,
//	point count, each: family index, value (8 bytes, IEEE 754 little endian), label count, labels
//
// and a response is
//
//	version byte, error string ("" for none), content type, body (a string),
//	problem count, problems
//
// with every count and index a uvarint and every string a uvarint length
// and its bytes. It is binary rather than JSON because values can be NaN
// or infinite and device label values need not be UTF-8; both must reach
// the renderer as they are, for it to accept or refuse them.

// wireVersion is the first byte of every frame; a binary of another
// version answers with an error rather than misreading the rest.
const wireVersion = 1

// maxFrame bounds a frame either side reads, so a corrupt length cannot
// make it allocate without limit. A Pi's scrape is tens of KB.
const maxFrame = 64 << 20

const flagFamilies = 1

// ErrFrame wraps errors in a frame's length or version: the stream cannot
// be trusted after one.
var ErrFrame = errors.New("scrape: bad frame")

// frameHead is room for a frame's length in front of its payload, so a
// frame is built in one buffer and written with one call.
const frameHead = binary.MaxVarintLen64

// appendRequest appends a request frame to b (which it returns), with the
// family table only when withFamilies.
func appendRequest(b []byte, accept string, s *Snapshot, withFamilies bool) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHead)...)
	b = append(b, wireVersion)
	b = appendString(b, accept)
	if withFamilies {
		b = append(b, flagFamilies)
		b = binary.AppendUvarint(b, uint64(len(s.Families)))
		for _, f := range s.Families {
			b = appendString(b, f.Name)
			b = append(b, byte(f.Type))
			b = appendString(b, f.Help)
			b = appendStrings(b, f.Labels)
		}
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(max(s.ProcessPID, 0)))
	b = appendString(b, s.ProcessNamespace)
	b = binary.AppendUvarint(b, uint64(len(s.Points)))
	for _, p := range s.Points {
		b = binary.AppendUvarint(b, uint64(p.Family))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Value))
		b = appendStrings(b, p.Labels)
	}
	return sealFrame(b, start)
}

// appendResponse appends a response frame to b.
func appendResponse(b []byte, p Page, errMsg string) []byte {
	start := len(b)
	b = append(b, make([]byte, frameHead)...)
	b = append(b, wireVersion)
	b = appendString(b, errMsg)
	b = appendString(b, p.ContentType)
	b = binary.AppendUvarint(b, uint64(len(p.Body)))
	b = append(b, p.Body...)
	b = appendStrings(b, p.Problems)
	return sealFrame(b, start)
}

// sealFrame writes the payload's length just before it, in the room
// appendRequest left at start, and moves the frame to start.
func sealFrame(b []byte, start int) []byte {
	payload := len(b) - start - frameHead
	var head [frameHead]byte
	n := binary.PutUvarint(head[:], uint64(payload))
	copy(b[start+frameHead-n:], head[:n])
	return append(b[:start], b[start+frameHead-n:]...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// readFrame reads one frame's payload. io.EOF means the stream ended
// cleanly between frames.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: length: %w", ErrFrame, err)
	}
	if n > maxFrame {
		return nil, fmt.Errorf("%w: length %d over %d", ErrFrame, n, maxFrame)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: %d-byte payload: %w", ErrFrame, n, err)
	}
	if n == 0 || buf[0] != wireVersion {
		return nil, fmt.Errorf("%w: version %v, this binary speaks %d (are raspi-mcp and raspi-mcp-exporter from the same release?)", ErrFrame, buf[:min(n, 1)], wireVersion)
	}
	return buf[1:], nil
}

// decodeRequest decodes a request payload. A request without a family
// table keeps prev.
func decodeRequest(payload []byte, prev []Family) (accept string, s Snapshot, err error) {
	d := decoder{b: payload}
	accept = d.str()
	switch d.byte() {
	case 0:
		s.Families = prev
	case flagFamilies:
		n := d.count(4) // a family is at least four bytes
		s.Families = make([]Family, n)
		for i := range s.Families {
			f := &s.Families[i]
			f.Name = d.str()
			f.Type = ValueType(d.byte())
			f.Help = d.str()
			f.Labels = d.strs()
			if d.err == nil && f.Type != Gauge && f.Type != Counter {
				d.fail(fmt.Sprintf("family %q has type %d", f.Name, f.Type))
			}
		}
	default:
		d.fail("unknown flags")
	}
	pid := d.uvarint()
	if pid > math.MaxInt32 {
		d.fail(fmt.Sprintf("process id %d", pid))
	}
	s.ProcessPID = int(pid)
	s.ProcessNamespace = d.str()
	s.Points = make([]Point, d.count(10)) // index, value, label count
	for i := range s.Points {
		p := &s.Points[i]
		fam := d.uvarint()
		if d.err == nil && fam >= uint64(len(s.Families)) {
			d.fail(fmt.Sprintf("point %d: family %d of %d", i, fam, len(s.Families)))
		}
		p.Family = int(fam)
		p.Value = math.Float64frombits(d.u64())
		p.Labels = d.strs()
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the last point", len(d.b)))
	}
	if d.err != nil {
		return "", Snapshot{}, fmt.Errorf("scrape: request: %w", d.err)
	}
	return accept, s, nil
}

// decodeResponse decodes a response payload into the page and the error
// the renderer reported ("" for none).
func decodeResponse(payload []byte) (p Page, errMsg string, err error) {
	d := decoder{b: payload}
	errMsg = d.str()
	p.ContentType = d.str()
	p.Body = d.bytes()
	p.Problems = d.strs()
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the problems", len(d.b)))
	}
	if d.err != nil {
		return Page{}, "", fmt.Errorf("scrape: response: %w", d.err)
	}
	return p, errMsg, nil
}

// decoder reads a payload; the first error sticks and every later read
// returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = errors.New(msg)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated value")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// count reads a count of items at least minSize bytes each, refusing one
// the rest of the payload cannot hold, so a corrupt count allocates nothing.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/minSize) {
		d.fail(fmt.Sprintf("%d items in %d bytes", n, len(d.b)))
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("string of %d bytes in %d", n, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// bytes is str for a body: a copy, as the payload's buffer is reused.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("body of %d bytes in %d", n, len(d.b)))
		return nil
	}
	b := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return b
}

func (d *decoder) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

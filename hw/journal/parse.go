package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// rawEntry holds the fields of one `journalctl -o json` line that Parse
// uses, undecoded and pointing into the line: a field is a JSON string, a
// JSON array of byte values (journald's encoding of data that is not valid
// UTF-8 or holds control characters), an array of either (a field that
// occurs several times in the entry) or null (a value journalctl left out).
type rawEntry struct {
	Realtime, SystemdUnit, Unit, Identifier, PID, Priority, Message []byte
}

func (r *rawEntry) set(key, value []byte) {
	switch string(key) { // no allocation: the compiler compares in place
	case "__REALTIME_TIMESTAMP":
		r.Realtime = value
	case "_SYSTEMD_UNIT":
		r.SystemdUnit = value
	case "UNIT":
		r.Unit = value
	case "SYSLOG_IDENTIFIER":
		r.Identifier = value
	case "_PID":
		r.PID = value
	case "PRIORITY":
		r.Priority = value
	case "MESSAGE":
		r.Message = value
	}
}

// Parse reads `journalctl -o json` lines, newest first, from r, applies
// q's priority, time, grep, limit, byte and scan bounds, and returns the
// entries oldest first. It stops reading as soon as the answer is complete,
// so a caller streaming a process's output can kill it then. Lines that do
// not decode are counted in Result.Skipped rather than failing the query:
// one odd entry should not hide the rest of the log. Only a read error is
// returned. q.Units is not applied: journalctl's -u matching (which also
// covers systemd's own messages about the unit) has already done that.
//
// Entry.Unit is _SYSTEMD_UNIT, else UNIT; for entries logged by systemd
// itself (_SYSTEMD_UNIT=init.scope) UNIT wins, so "Started nginx.service"
// is attributed to nginx.service as `journalctl -u nginx` attributes it.
func Parse(r io.Reader, q Query) (Result, error) {
	c := newCollector(q)
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	var raw rawEntry // reused: one allocation less per line
	for {
		line, overlong, err := readLine(br, &buf)
		line = bytes.TrimSpace(line)
		if len(line) > 0 || overlong {
			if !c.scan() {
				break
			}
			if overlong {
				c.res.Skipped++
			} else if more, ok := c.offerLine(line, &raw); !ok {
				c.res.Skipped++
			} else if !more {
				break
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return c.result(), fmt.Errorf("journal: read journalctl output: %w", err)
		}
	}
	return c.result(), nil
}

// readLine returns the next line. A line longer than maxLine is read to
// its end but not kept (overlong), so one giant entry costs no more than
// maxLine of memory. The returned slice is valid until the next call.
func readLine(br *bufio.Reader, buf *[]byte) (line []byte, overlong bool, err error) {
	chunk, err := br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return chunk, false, err
	}
	*buf = append((*buf)[:0], chunk...)
	for {
		chunk, err = br.ReadSlice('\n')
		if !overlong {
			if len(*buf)+len(chunk) > maxLine {
				overlong, *buf = true, (*buf)[:0]
			} else {
				*buf = append(*buf, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if overlong {
				return nil, true, err
			}
			return *buf, false, err
		}
	}
}

// offerLine decodes one JSON line and offers it to the collector. It
// decodes lazily, in the order the filters need the fields (time and
// priority, then the message for grep, then the rest), so that lines that
// are filtered out cost no allocation. ok is false for a line that does
// not decode; more is false once the answer is complete.
func (c *collector) offerLine(line []byte, raw *rawEntry) (more, ok bool) {
	*raw = rawEntry{}
	if !scanObject(line, raw) {
		return true, false
	}
	e := Entry{Priority: 6}
	if raw.Realtime != nil {
		us, ok := fieldInt(raw.Realtime)
		if !ok {
			return true, false
		}
		e.Time = time.UnixMicro(us)
	}
	if p, ok := fieldInt(raw.Priority); ok && p >= 0 && p <= 7 {
		e.Priority = int(p)
	}
	if !c.inRange(e) {
		return true, true
	}
	if c.grep != "" && c.grepASCII {
		// The common case, a plain string without escapes, is searched
		// where it lies.
		if m := raw.Message; len(m) >= 2 && m[0] == '"' && bytes.IndexByte(m, '\\') < 0 && !containsFoldASCII(m[1:len(m)-1], c.grep) {
			return true, true
		}
	}
	if s, ok := fieldString(raw.Message); ok {
		e.Message = s
	} else if string(raw.Message) == "null" {
		// Only without --all: journalctl prints null for values over 4096 bytes.
		e.Message = "[message not shown by journalctl: longer than 4096 bytes]"
	}
	e.Unit, _ = fieldString(raw.SystemdUnit)
	if u, ok := fieldString(raw.Unit); ok && u != "" && (e.Unit == "" || e.Unit == "init.scope") {
		e.Unit = u
	}
	e.Identifier, _ = fieldString(raw.Identifier)
	if pid, ok := fieldInt(raw.PID); ok && pid > 0 && pid <= math.MaxInt32 {
		e.PID = int(pid)
	}
	e.Level = Level(e.Priority)
	return c.offer(e), true
}

// fieldInt decodes a decimal field ("1795325967143238") without
// allocating, falling back to fieldString for the unusual encodings.
func fieldInt(raw []byte) (int64, bool) {
	if len(raw) >= 3 && raw[0] == '"' && raw[len(raw)-1] == '"' && len(raw) <= 21 {
		var n int64
		for _, d := range raw[1 : len(raw)-1] {
			if d < '0' || d > '9' {
				goto slow
			}
			n = n*10 + int64(d-'0')
		}
		return n, true
	}
slow:
	s, ok := fieldString(raw)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

// fieldString decodes one field value. The second result is false when the
// field is absent or null.
func fieldString(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return validUTF8(string(raw[1 : len(raw)-1])), true
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return validUTF8(s), true
	case '[':
		return arrayString(raw)
	case 'n':
		return "", false
	}
	// A bare number is not what journalctl prints, but harmless as text;
	// anything else bare is not JSON and the field is taken as absent.
	if json.Valid(raw) {
		return string(raw), true
	}
	return "", false
}

// arrayString decodes either a byte array ([104,105]) or a multi-valued
// field (["a","b"] or [[104],[105]]), whose first value is taken: for
// MESSAGE, PRIORITY and the rest a second value is a logging mistake.
func arrayString(raw []byte) (string, bool) {
	inner := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(inner) == 0 {
		return "", true
	}
	if c := inner[0]; c == '"' || c == '[' || c == 'n' {
		var vals []json.RawMessage
		if err := json.Unmarshal(raw, &vals); err != nil || len(vals) == 0 {
			return "", false
		}
		return fieldString(vals[0])
	}
	b := make([]byte, 0, len(inner)/3+1)
	for len(inner) > 0 {
		var num []byte
		num, inner, _ = bytes.Cut(inner, []byte{','})
		v, err := strconv.ParseUint(string(bytes.TrimSpace(num)), 10, 8)
		if err != nil {
			return "", false
		}
		b = append(b, byte(v))
	}
	return validUTF8(string(b)), true
}

// validUTF8 replaces invalid sequences: the text ends up in JSON for a
// model, and a byte-array message is usually mostly text.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// capMessage cuts s to at most MaxMessage bytes on a rune boundary and
// marks the cut with "…".
func capMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	cut := MaxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// scanObject finds the members of the flat JSON object journalctl prints
// for one entry and hands the wanted ones' raw values to raw.set. It is a
// scanner rather than encoding/json because it runs on every scanned line:
// it allocates nothing and is several times faster, which matters on a Pi
// Zero. Values are delimited, not validated; fieldString decodes the few
// that are used (and falls back to encoding/json for escaped strings).
func scanObject(b []byte, raw *rawEntry) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		kEnd, ok := stringEnd(b, i)
		if !ok {
			return false
		}
		key := b[i+1 : kEnd-1]
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vEnd, ok := valueEnd(b, i)
		if !ok {
			return false
		}
		raw.set(key, b[i:vEnd])
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the JSON string
// starting at b[i].
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// valueEnd returns the index after the JSON value starting at b[i]:
// a string, an array or object (nesting and strings inside accounted
// for), or a literal (null, a number).
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '[', '{':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '[', '{':
				depth++
			case ']', '}':
				if depth--; depth == 0 {
					return j + 1, true
				}
			case '"':
				e, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' {
		j++
	}
	return j, j > i
}

// collector applies a Query's filters and bounds to entries offered newest
// first. Parse and Static share it, so the simulated board answers exactly
// as journalctl would be read.
type collector struct {
	q         Query
	grep      string // lower-cased
	grepASCII bool
	limit     int
	maxBytes  int
	scanLimit int
	bytes     int
	res       Result // entries newest first until result()
}

func newCollector(q Query) *collector {
	c := &collector{q: q, limit: limitOf(q), maxBytes: maxBytesOf(q), scanLimit: scanLimitOf(q)}
	c.grep = strings.ToLower(q.Grep)
	c.grepASCII = isASCII(q.Grep)
	return c
}

// scan counts one raw entry about to be examined; false means the scan
// limit was reached before it, which truncates the result.
func (c *collector) scan() bool {
	if c.res.Scanned >= c.scanLimit {
		c.res.Truncated = true
		c.res.ScanLimited = true
		return false
	}
	c.res.Scanned++
	return true
}

// offer considers one entry; false means the answer is complete.
func (c *collector) offer(e Entry) bool {
	if !c.inRange(e) {
		return true
	}
	if c.grep != "" && !c.matches(e.Message) {
		return true
	}
	e.Message = capMessage(e.Message)
	cost := len(e.Message) + len(e.Unit) + entryOverhead
	if c.bytes+cost > c.maxBytes {
		c.res.Truncated = true
		return false
	}
	c.bytes += cost
	c.res.Entries = append(c.res.Entries, e)
	return len(c.res.Entries) < c.limit
}

// inRange applies the priority and time filters.
func (c *collector) inRange(e Entry) bool {
	if c.q.Priority >= 0 && c.q.Priority <= 7 && e.Priority > c.q.Priority {
		return false
	}
	if !c.q.Since.IsZero() && e.Time.Before(c.q.Since) {
		return false
	}
	if !c.q.Until.IsZero() && e.Time.After(c.q.Until) {
		return false
	}
	return true
}

func (c *collector) matches(msg string) bool {
	if c.grepASCII {
		return containsFoldASCII(msg, c.grep)
	}
	return strings.Contains(strings.ToLower(msg), c.grep)
}

// result returns the entries oldest first.
func (c *collector) result() Result {
	r := c.res
	for i, j := 0, len(r.Entries)-1; i < j; i, j = i+1, j-1 {
		r.Entries[i], r.Entries[j] = r.Entries[j], r.Entries[i]
	}
	return r
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether lowerSub (ASCII, lower case) occurs in
// s ignoring ASCII case, without allocating: grep runs on every scanned
// entry, up to ScanLimit of them.
func containsFoldASCII[S ~string | ~[]byte](s S, lowerSub string) bool {
	n := len(lowerSub)
	if n == 0 {
		return true
	}
	first := lowerSub[0]
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == lowerSub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

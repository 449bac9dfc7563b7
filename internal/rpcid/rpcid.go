// Package rpcid finds the id of a newline-delimited JSON-RPC message without
// decoding the message, and says whether go-sdk v1.8.0 can carry that id
// back unchanged.
//
// go-sdk decodes every request id into a Go float64 and answers with it
// converted to int64: 1.5 comes back as 1, 9007199254740993 as
// 9007199254740992 and 123456789012345678901234567890 as
// -9223372036854775808, and 1e400 ends the session as a parse error. A
// client cannot match such an answer and waits for it forever. The agent
// (in front of the SDK) and `raspi-mcp stdio` (which waits for answers
// after its input ends) both use this package, so they agree on which
// requests will be answered with the id they were sent with.
//
// The scan is one pass over the line that skips nested values by counting
// brackets outside strings; it does not check what it skips, which the
// SDK's own decoder does next.
package rpcid

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// MaxLine bounds one JSON-RPC message (its newline included) on the agent
// socket and in the bridge.
const MaxLine = 4 << 20

// Message is what the top level of one JSON-RPC object holds.
type Message struct {
	ID     []byte // the raw value of the last "id" member, as the SDK would take it; nil if none
	Method bool   // a "method" member is present: a request or notification, not a response
	Name   []byte // the raw value of the last "method" member; nil if none
}

// Request reports whether m is a request that expects an answer: it has a
// method and an id member (a null id included, which MCP forbids).
func (m Message) Request() bool { return m.Method && m.ID != nil }

// listenMethod is the one open-ended request go-sdk v1.8.0 serves.
const listenMethod = "subscriptions/listen"

// OpenEnded reports whether m is a request that runs until the client
// cancels it or leaves: subscriptions/listen (2026-07-28, SEP-2575), whose
// handler parks until then and whose answer, if it ever comes, only marks
// the subscription's end. A client that has closed its input waits for no
// such answer (go-sdk's own client never awaits it).
func (m Message) OpenEnded() bool {
	if !m.Request() || len(m.Name) < 2 || m.Name[0] != '"' {
		return false
	}
	name := m.Name[1 : len(m.Name)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		// An escaped name ("subscriptions\/listen") is the same method to
		// the SDK's decoder.
		var s string
		if json.Unmarshal(m.Name, &s) != nil {
			return false
		}
		return s == listenMethod
	}
	return string(name) == listenMethod
}

// Scan returns the messages of one line: one for an object, one per element
// for a batch (an array of objects). ok is false for anything else — empty,
// not JSON, an empty batch, a batch element that is not an object, several
// values on one line, a message split over lines — which the caller leaves
// for the SDK to refuse. Messages are appended to buf, which may be nil.
func Scan(line []byte, buf []Message) (msgs []Message, batch, ok bool) {
	msgs = buf[:0]
	i := skipWS(line, 0)
	if i == len(line) {
		return msgs, false, false
	}
	if line[i] == '{' {
		m, end := scanObject(line, i)
		if end < 0 || skipWS(line, end) != len(line) {
			return msgs, false, false
		}
		return append(msgs, m), false, true
	}
	if line[i] != '[' {
		return msgs, false, false
	}
	i = skipWS(line, i+1)
	for i < len(line) {
		m, end := scanObject(line, i)
		if end < 0 {
			return msgs, true, false
		}
		msgs = append(msgs, m)
		i = skipWS(line, end)
		if i < len(line) && line[i] == ',' {
			i = skipWS(line, i+1)
			continue
		}
		if i < len(line) && line[i] == ']' {
			return msgs, true, skipWS(line, i+1) == len(line)
		}
		break
	}
	return msgs, true, false
}

// Split reports whether line starts an object or array that does not end
// on it: a message broken over lines, or one cut short. MCP messages are one
// line each, and a stream decoder handed such a line waits for the rest.
func Split(line []byte) bool {
	i := skipWS(line, 0)
	return i < len(line) && (line[i] == '{' || line[i] == '[') && skipValue(line, i) < 0
}

// scanObject reads the object starting at b[i] == '{' and returns its
// members of interest and the index just past it, or -1.
func scanObject(b []byte, i int) (Message, int) {
	var m Message
	if i >= len(b) || b[i] != '{' {
		return m, -1
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, i + 1
	}
	for i < len(b) {
		if b[i] != '"' {
			return m, -1
		}
		ke := endString(b, i)
		if ke < 0 {
			return m, -1
		}
		key := b[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// An escaped name ("\u0069d") is still "id" to the SDK's decoder.
			var s string
			if json.Unmarshal(b[i:ke], &s) != nil {
				return m, -1
			}
			key = []byte(s)
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return m, -1
		}
		vs := skipWS(b, i+1)
		ve := skipValue(b, vs)
		if ve < 0 {
			return m, -1
		}
		// Member names match exactly: the SDK's decoder is case-sensitive,
		// and the last of repeated members wins, as there.
		switch string(key) {
		case "id":
			m.ID = b[vs:ve]
		case "method":
			m.Method = true
			m.Name = b[vs:ve]
		}
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return m, i + 1
		}
		return m, -1
	}
	return m, -1
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endString returns the index just past the string that starts at
// b[i] == '"', or -1 if it does not end: the next quote not escaped by an
// odd run of backslashes.
func endString(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		q += i
		n := 0
		for k := q - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skipValue returns the index just past the value starting at b[i], or -1.
// Containers are skipped by counting brackets outside strings, without
// recursion, so deep nesting costs nothing extra.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return endString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				e := endString(b, i)
				if e < 0 {
					return -1
				}
				i = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	s := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if i == s {
				return -1
			}
			return i
		}
		i++
	}
	if i == s {
		return -1
	}
	return i
}

// Verdict is what go-sdk v1.8.0 does with a request id.
type Verdict int

const (
	// Echoed: the answer carries the same JSON value (a string may come back
	// with its escapes spelled differently, an integer byte for byte).
	Echoed Verdict = iota
	// Refused: the SDK would answer with another id or end the session; the
	// caller answers -32600 itself, carrying the id as sent.
	Refused
	// RefusedNull: as Refused, but the id is a string that is not valid
	// UTF-8, so it cannot be put in a valid answer; the answer's id is null.
	RefusedNull
	// Invalid: the id is not valid JSON, so neither is the message; the SDK
	// refuses it as a parse error.
	Invalid
)

// maxExact is the largest integer magnitude a float64 holds exactly: go-sdk
// decodes ids to float64, so only these come back as they were sent.
const maxExact = 1 << 53

// Check says what happens to id (a raw JSON value from Scan) and, unless
// it is Echoed, why, in words fit for an error message.
func Check(id []byte) (Verdict, string) {
	if len(id) == 0 {
		return Invalid, "an empty id"
	}
	switch c := id[0]; {
	case c == '"':
		return checkString(id)
	case c == '-' || c >= '0' && c <= '9':
		return checkNumber(id)
	case string(id) == "null":
		return Refused, "the id is null; an MCP request id is a string or an integer"
	case string(id) == "true" || string(id) == "false" || (c == '{' || c == '[') && json.Valid(id):
		return Refused, "the id is neither a string nor an integer"
	}
	return Invalid, "the id is not JSON"
}

func checkNumber(id []byte) (Verdict, string) {
	if !validNumber(id) {
		return Invalid, "the id is not a JSON number"
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if bytes.ContainsAny(digits, ".eE") {
		return Refused, "the id " + string(id) + " has a fraction or exponent; an MCP request id is an integer, written without either"
	}
	if string(id) == "-0" {
		return Refused, "the id -0 would come back as 0; write it 0"
	}
	if len(digits) > 15 { // 10^15 < 2^53: shorter ones always fit
		if v, err := strconv.ParseUint(string(digits), 10, 64); err != nil || v > maxExact {
			return Refused, "the id " + string(id) + " is beyond ±2^53, the integers this server carries exactly"
		}
	}
	return Echoed, ""
}

// validNumber is the JSON number grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// checkString accepts a JSON string the SDK decodes to the same text: valid
// UTF-8 and no lone surrogate escape, both of which it would replace with
// U+FFFD.
func checkString(id []byte) (Verdict, string) {
	if len(id) < 2 || id[len(id)-1] != '"' {
		return Invalid, "the id is an unterminated string"
	}
	body := id[1 : len(id)-1]
	pendingHigh := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c < 0x20 {
			return Invalid, "the id holds a control character"
		}
		if c != '\\' {
			if pendingHigh {
				return Refused, "the id holds a lone UTF-16 surrogate escape"
			}
			continue
		}
		if i+1 >= len(body) {
			return Invalid, "the id ends in a backslash"
		}
		i++
		switch body[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			if pendingHigh {
				return Refused, "the id holds a lone UTF-16 surrogate escape"
			}
		case 'u':
			if i+5 > len(body) {
				return Invalid, "the id holds a short \\u escape"
			}
			v, err := strconv.ParseUint(string(body[i+1:i+5]), 16, 16)
			if err != nil {
				return Invalid, "the id holds a bad \\u escape"
			}
			i += 4
			switch {
			case v >= 0xD800 && v < 0xDC00:
				if pendingHigh {
					return Refused, "the id holds a lone UTF-16 surrogate escape"
				}
				pendingHigh = true
			case v >= 0xDC00 && v < 0xE000:
				if !pendingHigh {
					return Refused, "the id holds a lone UTF-16 surrogate escape"
				}
				pendingHigh = false
			default:
				if pendingHigh {
					return Refused, "the id holds a lone UTF-16 surrogate escape"
				}
			}
		default:
			return Invalid, "the id holds a bad escape"
		}
	}
	if pendingHigh {
		return Refused, "the id holds a lone UTF-16 surrogate escape"
	}
	if !utf8.Valid(body) {
		return RefusedNull, "the id is a string that is not valid UTF-8"
	}
	return Echoed, ""
}

// Key is id in a form two spellings of the same id share: a string's
// decoded text (escapes may come back spelled differently), any other
// value as written (the agent answers those byte for byte).
func Key(id []byte) string {
	if len(id) < 2 || id[0] != '"' {
		return "v" + string(id)
	}
	if bytes.IndexByte(id, '\\') < 0 {
		return "s" + string(id[1:len(id)-1])
	}
	var s string
	if json.Unmarshal(id, &s) != nil {
		return "v" + string(id)
	}
	return "s" + s
}

// AppendError appends a JSON-RPC error answer to the request with id (nil
// for a null id) to dst, without a newline. data, if not nil, must be valid
// JSON.
func AppendError(dst, id []byte, code int, message string, data []byte) []byte {
	if id == nil {
		id = []byte("null")
	}
	msg, _ := json.Marshal(message)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, id...)
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = append(dst, msg...)
	if data != nil {
		dst = append(dst, `,"data":`...)
		dst = append(dst, data...)
	}
	return append(dst, "}}"...)
}

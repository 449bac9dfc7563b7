// Package canon is the one byte form of a JSON value that raspi-mcp hashes:
// audit records, their chain, tool inputs and outputs, change plans. It is
// here, apart from the store that keeps the hashes, so the call pipeline
// (agent/tool) hashes what it audits without a store.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"
)

// JSON returns the one byte form of v that hashes are computed over,
// so that the same logical value always gets the same hash no matter which
// map order, indentation or escaping produced it.
//
// The form is: object keys sorted by their UTF-8 bytes (recursively); no
// insignificant whitespace; numbers exactly as written (never re-formatted, so
// 1.0 and 1e3 stay 1.0 and 1e3 and large integers do not lose precision);
// strings escaping only '"', '\\' and U+0000..U+001F (\b \t \n \f \r, the rest
// as \u00xx), so "<>&" and non-ASCII text appear literally. Invalid UTF-8 in
// input strings becomes U+FFFD, as encoding/json decodes it. The rules are
// written out here so another implementation (a Python audit checker, say) can
// reproduce a hash.
//
// v is any value json.Marshal accepts. A json.RawMessage is taken as JSON
// text; a plain []byte is, as with json.Marshal, a base64 string.
func JSON(v any) ([]byte, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case *json.RawMessage:
		if x != nil {
			raw = *x
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("canon: %w", err)
		}
		raw = b
	}
	if raw == nil {
		// A nil RawMessage marshals as null in encoding/json; keep that.
		raw = []byte("null")
	}
	val, err := Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("canon: %w", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	Encode(&buf, val)
	return buf.Bytes(), nil
}

// Hash is "sha256:" + hex(sha256(JSON(v))): the form used for
// in_hash, out_hash and plan hashes so they can be compared across processes.
func Hash(v any) (string, error) {
	b, err := JSON(v)
	if err != nil {
		return "", err
	}
	return SHA256(b), nil
}

// SHA256 is "sha256:" + hex(sha256(b)), the form of every hash kept.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Decode parses exactly one JSON value, keeping numbers as json.Number so
// they are re-emitted as written.
func Decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

// Encode writes the canonical form of v, a value as Decode returns it
// (json.Number for numbers), to buf.
func Encode(buf *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case json.Number:
		buf.WriteString(string(x))
	case string:
		writeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			Encode(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			Encode(buf, x[k])
		}
		buf.WriteByte('}')
	default:
		// decodeJSON with UseNumber yields only the types above.
		panic(fmt.Sprintf("store: canonical json: unexpected type %T", v))
	}
}

const hexDigits = "0123456789abcdef"

func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf.WriteString(s[start:i])
				buf.WriteString("\uFFFD")
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case '\b':
			buf.WriteString(`\b`)
		case '\t':
			buf.WriteString(`\t`)
		case '\n':
			buf.WriteString(`\n`)
		case '\f':
			buf.WriteString(`\f`)
		case '\r':
			buf.WriteString(`\r`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xF])
		}
		i++
		start = i
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

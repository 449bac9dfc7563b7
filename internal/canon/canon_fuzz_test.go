package canon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// FuzzJSON checks the properties an audit chain relies on, for any
// JSON text: the canonical form is valid JSON with the same value; it is a
// fixed point; the same value written another way (keys in the opposite
// order, other whitespace, other string escapes) has the same canonical form
// and the same hash; and hashing the text or the decoded Go value agrees.
// Input that is not one JSON value must be an error, never a panic.
func FuzzJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		canon, err := JSON(json.RawMessage(data))
		if err != nil {
			if json.Valid(data) && !tooDeep(data) {
				t.Fatalf("valid JSON %q refused: %v", data, err)
			}
			return
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form of %q is not JSON: %q", data, canon)
		}
		// Same value: decoding either gives equal Go values.
		var orig, back any
		if err := unmarshalNumbers(data, &orig); err != nil {
			t.Fatalf("canonicalized %q, which encoding/json refuses: %v", data, err)
		}
		if err := unmarshalNumbers(canon, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(orig, back) {
			t.Fatalf("canonical form changed the value:\n in  %q\n out %q", data, canon)
		}
		// Fixed point.
		again, err := JSON(json.RawMessage(canon))
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("not idempotent: %q -> %q (%v)", canon, again, err)
		}
		// Key order, layout and escaping do not matter.
		var other bytes.Buffer
		writeShuffled(&other, orig, 0)
		alt, err := JSON(json.RawMessage(other.Bytes()))
		if err != nil || !bytes.Equal(alt, canon) {
			t.Fatalf("same value, different canonical form:\n %q -> %q\n %q -> %q (%v)", data, canon, other.Bytes(), alt, err)
		}
		// Hash of the text equals hash of the decoded Go value.
		h1, err1 := Hash(json.RawMessage(data))
		h2, err2 := Hash(orig)
		if err1 != nil || err2 != nil || h1 != h2 {
			t.Fatalf("hash of text %s (%v) differs from hash of value %s (%v) for %q", h1, err1, h2, err2, data)
		}
	})
}

func unmarshalNumbers(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// tooDeep reports input nested past encoding/json's decoder limit, which
// is refused by design.
func tooDeep(data []byte) bool {
	return bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) >= 10000
}

// writeShuffled writes v as JSON with keys in reverse byte order, spaces and
// newlines between tokens, and strings escaped by encoding/json (which
// escapes <, > and & and the line separators where CanonicalJSON does not).
func writeShuffled(buf *bytes.Buffer, v any, depth int) {
	pad := "\n" + strings.Repeat(" ", depth%4)
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		buf.WriteString("{" + pad)
		for i, k := range keys {
			if i > 0 {
				buf.WriteString(" ," + pad)
			}
			kj, _ := json.Marshal(k)
			buf.Write(kj)
			buf.WriteString(" :\t")
			writeShuffled(buf, x[k], depth+1)
		}
		buf.WriteString(pad + "}")
	case []any:
		buf.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				buf.WriteString("\r\n, ")
			}
			writeShuffled(buf, e, depth+1)
		}
		buf.WriteString(" ]")
	default:
		js, _ := json.Marshal(x) // json.Number is written as it came
		buf.Write(js)
	}
}

package canon

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestJSON(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"key order", map[string]any{"b": 1, "a": 2, "c": 3}, `{"a":2,"b":1,"c":3}`},
		{"nested", json.RawMessage(`{"z":{"y":[{"b":1,"a":null}],"x":true},"a":[3,2,1]}`),
			`{"a":[3,2,1],"z":{"x":true,"y":[{"a":null,"b":1}]}}`},
		{"whitespace", json.RawMessage(" {\n\t\"b\" : [ 1 , 2 ] ,\r\n \"a\" : { } }\n"), `{"a":{},"b":[1,2]}`},
		{"html not escaped", map[string]string{"q": "<a href='x'>&amp;</a>"}, `{"q":"<a href='x'>&amp;</a>"}`},
		{"html escapes undone", json.RawMessage(`"\u003c\u003e\u0026"`), `"<>&"`},
		{"unicode literal", json.RawMessage(`{"k":"gr\u00fc\u00DF \ud83d\ude00 日本"}`), `{"k":"grüß 😀 日本"}`},
		{"line separators literal", "a\u2028b\u2029c", "\"a\u2028b\u2029c\""},
		{"escapes", "q\"b\\s/\b\f\n\r\t\x00\x1f\x7f", `"q\"b\\s/\b\f\n\r\t\u0000\u001f` + "\x7f\""},
		{"numbers as written", json.RawMessage(`[1.0,1e3,1E+03,-0,0.10,12345678901234567890123,-1.5e-7]`),
			`[1.0,1e3,1E+03,-0,0.10,12345678901234567890123,-1.5e-7]`},
		{"go numbers", map[string]any{"i": 42, "f": 1.5, "u": uint64(1 << 63)}, `{"f":1.5,"i":42,"u":9223372036854775808}`},
		{"struct", struct {
			Z string `json:"z"`
			A int    `json:"a,omitempty"`
			M string `json:"m"`
		}{Z: "z", M: "m"}, `{"m":"m","z":"z"}`},
		{"null raw", json.RawMessage(nil), `null`},
		{"nil", nil, `null`},
		{"scalars", []any{true, false, "", 0}, `[true,false,"",0]`},
		{"unicode keys sort by bytes", map[string]int{"é": 1, "z": 2, "A": 3, "a": 4}, `{"A":3,"a":4,"z":2,"é":1}`},
		{"bytes are base64", []byte("hi"), `"aGk="`},
		{"time", time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC), `"2025-01-02T03:04:05.0000006Z"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := JSON(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			// Canonical form is a fixed point.
			again, err := JSON(json.RawMessage(got))
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s -> %s (%v)", got, again, err)
			}
			if !json.Valid(got) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

func TestJSONInvalidUTF8(t *testing.T) {
	got, err := JSON("a\xffb")
	if err != nil || string(got) != "\"a\uFFFDb\"" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestJSONErrors(t *testing.T) {
	for name, in := range map[string]any{
		"invalid raw":  json.RawMessage(`{"a":`),
		"trailing raw": json.RawMessage(`{"a":1} {"b":2}`),
		"channel":      make(chan int),
		"nan":          math.NaN(),
	} {
		if _, err := JSON(in); err == nil || !strings.HasPrefix(err.Error(), "canon: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestHashStable(t *testing.T) {
	const want = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" // sha256("{}")
	if h, err := Hash(map[string]any{}); err != nil || h != want {
		t.Errorf("Hash({}) = %s, %v", h, err)
	}

	keys := []string{"pin", "mode", "value", "label", "ünï", "<tag>", "nested"}
	build := func(order []string) map[string]any {
		m := make(map[string]any, len(order))
		for _, k := range order {
			if k == "nested" {
				inner := map[string]any{}
				for _, k2 := range order {
					inner[k2] = len(k2)
				}
				m[k] = inner
				continue
			}
			m[k] = k + "!"
		}
		return m
	}
	ref, err := Hash(build(keys))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 50; i++ {
		order := append([]string(nil), keys...)
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		if h, _ := Hash(build(order)); h != ref {
			t.Fatalf("hash differs for insertion order %v", order)
		}
		// The same object as hand-written JSON text in this order.
		var sb strings.Builder
		sb.WriteString("{ ")
		for j, k := range order {
			if j > 0 {
				sb.WriteString(" , ")
			}
			kb, _ := json.Marshal(k)
			if k == "nested" {
				sb.WriteString(string(kb) + ":{")
				for j2, k2 := range order {
					if j2 > 0 {
						sb.WriteString(",")
					}
					k2b, _ := json.Marshal(k2)
					fmt.Fprintf(&sb, "%s:%d", k2b, len(k2))
				}
				sb.WriteString("}")
				continue
			}
			vb, _ := json.Marshal(k + "!") // escapes <> as \u003c: must not matter
			sb.WriteString(string(kb) + ": " + string(vb))
		}
		sb.WriteString(" }")
		if h, err := Hash(json.RawMessage(sb.String())); err != nil || h != ref {
			t.Fatalf("hash of text %s = %s, %v; want %s", sb.String(), h, err, ref)
		}
	}
}

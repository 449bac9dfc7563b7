package rpcid

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	for _, tc := range []struct {
		line      string
		ids       []string // "-" for no id member
		method    []bool
		batch, ok bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"a"}` + "\n", []string{"1"}, []bool{true}, false, true},
		{` { "method" : "a" , "id" : "x\"y" } `, []string{`"x\"y"`}, []bool{true}, false, true},
		{`{"jsonrpc":"2.0","method":"notifications/x","params":{"id":5}}`, []string{"-"}, []bool{true}, false, true},
		{`{"id":1,"result":{"id":2,"s":"}{]["},"id":3}`, []string{"3"}, []bool{false}, false, true},
		{`{"\u0069d":4,"ID":5,"method":null}`, []string{"4"}, []bool{true}, false, true},
		{`{"id":"a\\","method":"m"}`, []string{`"a\\"`}, []bool{true}, false, true},
		{`[{"id":1,"method":"a"},{"method":"b"}, {"id":2.5,"result":1}]`, []string{"1", "-", "2.5"}, []bool{true, true, false}, true, true},
		{`{}`, []string{"-"}, []bool{false}, false, true},
		{`[]`, nil, nil, true, false},
		{`[1]`, nil, nil, true, false},
		{`{"id":1}{"id":2}`, nil, nil, false, false},
		{`{"id":1,`, nil, nil, false, false},
		{`{"id":}`, nil, nil, false, false},
		{`{"id":"abc}`, nil, nil, false, false},
		{"\x00\xff garbage", nil, nil, false, false},
		{``, nil, nil, false, false},
		{strings.Repeat("[", 100000), nil, nil, true, false},
		{`{"id":1,"p":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`, []string{"1"}, []bool{false}, false, true},
	} {
		msgs, batch, ok := Scan([]byte(tc.line), nil)
		if ok != tc.ok || batch != tc.batch {
			t.Errorf("Scan(%.60q): batch %v ok %v, want %v %v", tc.line, batch, ok, tc.batch, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if len(msgs) != len(tc.ids) {
			t.Errorf("Scan(%.60q): %d messages, want %d", tc.line, len(msgs), len(tc.ids))
			continue
		}
		for i, m := range msgs {
			id := "-"
			if m.ID != nil {
				id = string(m.ID)
			}
			if id != tc.ids[i] || m.Method != tc.method[i] {
				t.Errorf("Scan(%.60q)[%d] = id %s method %v, want %s %v", tc.line, i, id, m.Method, tc.ids[i], tc.method[i])
			}
		}
	}
}

func TestSplit(t *testing.T) {
	for line, want := range map[string]bool{
		`{"id":1,"method":` + "\n": true, `{"a":"b}` + "\n": true, strings.Repeat("[", 100000): true, `[{"id":1},` + "\n": true,
		`{"id":1}` + "\n": false, `[1,[2]]`: false, `garbage`: false, ``: false, `"abc`: false, `{"a":"}"}`: false,
	} {
		if got := Split([]byte(line)); got != want {
			t.Errorf("Split(%.40q) = %v, want %v", line, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want Verdict
	}{
		{`0`, Echoed}, {`7`, Echoed}, {`-12`, Echoed}, {`9007199254740992`, Echoed}, {`-9007199254740992`, Echoed},
		{`999999999999999`, Echoed},
		{`9007199254740993`, Refused}, {`123456789012345678901234567890`, Refused}, {`-99999999999999999999`, Refused},
		{`1.5`, Refused}, {`1.0`, Refused}, {`1e400`, Refused}, {`1E2`, Refused}, {`-0`, Refused},
		{`null`, Refused}, {`true`, Refused}, {`false`, Refused}, {`{"a":1}`, Refused}, {`[1,2]`, Refused},
		{`"x"`, Echoed}, {`""`, Echoed}, {`"\u00e9"`, Echoed}, {`"\ud83d\ude00"`, Echoed}, {`"\/\n\"\\"`, Echoed}, {"\"é😀\"", Echoed},
		{`"\ud800"`, Refused}, {`"\udc00"`, Refused}, {`"\ud800x"`, Refused}, {`"\ud800\ud800"`, Refused}, {`"\ud800\n"`, Refused},
		{"\"a\xffb\"", RefusedNull},
		{`01`, Invalid}, {`1.`, Invalid}, {`-`, Invalid}, {`1e`, Invalid}, {`+1`, Invalid}, {`nul`, Invalid}, {`{`, Invalid},
		{`"\x"`, Invalid}, {`"\u12"`, Invalid}, {`"\u12g4"`, Invalid}, {"\"a\x01\"", Invalid}, {`"`, Invalid}, {``, Invalid},
	} {
		got, why := Check([]byte(tc.id))
		if got != tc.want {
			t.Errorf("Check(%s) = %d (%s), want %d", tc.id, got, why, tc.want)
		}
		if got != Echoed && why == "" {
			t.Errorf("Check(%s): no reason", tc.id)
		}
	}
}

func TestKey(t *testing.T) {
	same := [][2]string{{`"A"`, `"\u0041"`}, {`"a/b"`, `"a\/b"`}, {"\"\u2028\"", `"\u2028"`}, {`7`, `7`}}
	for _, p := range same {
		if Key([]byte(p[0])) != Key([]byte(p[1])) {
			t.Errorf("Key(%s) != Key(%s)", p[0], p[1])
		}
	}
	differ := [][2]string{{`"1"`, `1`}, {`1`, `1.0`}, {`"a"`, `"b"`}}
	for _, p := range differ {
		if Key([]byte(p[0])) == Key([]byte(p[1])) {
			t.Errorf("Key(%s) == Key(%s)", p[0], p[1])
		}
	}
}

func TestAppendError(t *testing.T) {
	for _, id := range [][]byte{nil, []byte(`123456789012345678901234567890`), []byte(`"\ud800"`), []byte(`{"a":[1]}`)} {
		out := AppendError(nil, id, -32600, "bad \"id\"\n", []byte(`{"error_code":"invalid_argument"}`))
		var a struct {
			ID    json.RawMessage
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(out, &a); err != nil || a.Error.Code != -32600 || a.Error.Message != "bad \"id\"\n" {
			t.Fatalf("%s: %v %+v", out, err, a)
		}
		want := "null"
		if id != nil {
			want = string(id)
		}
		if string(a.ID) != want {
			t.Errorf("id %s, want %s", a.ID, want)
		}
	}
}

// FuzzScan: wherever Scan accepts a valid JSON object, the id it reports is
// the one a decoder matching names exactly (as go-sdk's does) finds.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"id":1,"id":"two"}`, `{"\u0069d":4}`, `{"ID":1}`,
		`[{"id":1,"method":"a"},{"id":2}]`, `{"id":{"id":1},"x":"\"}"}`, `{"id":"\\"}`, `{"a":[[[]]],"id":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		msgs, batch, ok := Scan(line, nil)
		for _, m := range msgs {
			Check(m.ID) // must not panic on anything Scan returns
		}
		if !ok || batch || !json.Valid(line) {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(line, &obj) != nil {
			t.Fatalf("valid object %q not decoded", line)
		}
		id, has := obj["id"]
		if has != (msgs[0].ID != nil) || has && !bytes.Equal(compact(t, id), compact(t, msgs[0].ID)) {
			t.Fatalf("Scan(%q) id %s, decoder says %s (present %v)", line, msgs[0].ID, id, has)
		}
		if _, m := obj["method"]; m != msgs[0].Method {
			t.Fatalf("Scan(%q) method %v, decoder says %v", line, msgs[0].Method, m)
		}
	})
}

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return out.Bytes()
}

// BenchmarkScanCheck is the per-line cost the agent adds in front of
// go-sdk, for a typical tools/call line.
func BenchmarkScanCheck(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"process_list_processes","arguments":{"sort_by":"cpu","limit":20,"filter":"py\"thon"},"_meta":{"progressToken":42}}}` + "\n")
	var buf []Message
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		msgs, _, _ := Scan(line, buf)
		for _, m := range msgs {
			Check(m.ID)
		}
		buf = msgs
	}
}

func TestOpenEnded(t *testing.T) {
	for line, want := range map[string]bool{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`:           true,
		`{"jsonrpc":"2.0","id":"a","method":"subscriptions\/listen"}`:                    true,
		`{"jsonrpc":"2.0","id":2,"method":"\u0073ubscriptions/listen"}`:                  true,
		`{"jsonrpc":"2.0","method":"subscriptions/listen"}`:                              false, // a notification: nothing owed
		`{"jsonrpc":"2.0","id":3,"method":"ping","p":{"method":"subscriptions/listen"}}`: false,
		`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","method":"ping"}`:       false, // the last member wins
		`{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen2"}`:                      false,
		`{"jsonrpc":"2.0","id":6,"method":"Subscriptions/listen"}`:                       false,
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/\x"}`:                           false,
		`{"jsonrpc":"2.0","id":8,"result":{}}`:                                           false,
		`{"jsonrpc":"2.0","id":9,"method":null}`:                                         false,
	} {
		msgs, _, ok := Scan([]byte(line), nil)
		if !ok || len(msgs) != 1 {
			t.Fatalf("Scan(%s): %v %v", line, msgs, ok)
		}
		if got := msgs[0].OpenEnded(); got != want {
			t.Errorf("OpenEnded(%s) = %v, want %v", line, got, want)
		}
	}
}

// An open-ended request counts as in flight but is not awaited: the last
// ordinary answer drains the set while a listen is still open.
func TestOwedOpenEnded(t *testing.T) {
	o := NewOwed()
	o.AddOpenEnded([]byte(`"listen"`))
	o.Add([]byte(`1`))
	if c, a := o.Count(), o.Awaited(); c != 2 || a != 1 {
		t.Fatalf("Count %d Awaited %d, want 2 1", c, a)
	}
	o.Answered([]byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}`))
	select {
	case <-o.Drained():
		t.Fatal("drained by a notification")
	default:
	}
	o.Answered([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	select {
	case <-o.Drained():
	default:
		t.Fatal("not drained once only the listen is left")
	}
	if c, a := o.Count(), o.Awaited(); c != 1 || a != 0 {
		t.Fatalf("Count %d Awaited %d, want 1 0", c, a)
	}
	o.Answered([]byte(`{"jsonrpc":"2.0","id":"listen","result":{}}`))
	if c, a := o.Count(), o.Awaited(); c != 0 || a != 0 {
		t.Fatalf("after the listen's answer: Count %d Awaited %d, want 0 0", c, a)
	}
	// An id reused for an ordinary request is awaited again.
	o.AddOpenEnded([]byte(`2`))
	o.Add([]byte(`2`))
	if c, a := o.Count(), o.Awaited(); c != 1 || a != 1 {
		t.Fatalf("reused id: Count %d Awaited %d, want 1 1", c, a)
	}
}

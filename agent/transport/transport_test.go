package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// transportCases are lines the transport must read as go-sdk's
// jsonrpc.DecodeMessage does.
var transportCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":"a<b>&\u2028é\"","method":"ping"}`,
	`{"jsonrpc":"2.0","id":-9007199254740991,"method":"ping","params":null}`,
	`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","method":"","id":3}`,
	`{"jsonrpc":"2.0","method":null,"id":3}`,
	`{"jsonrpc":"2.0","method":7,"id":3}`,
	`{"jsonrpc":"2.0","id":4,"result":{"x":[1,2,{"y":"z"}]}}`,
	`{"jsonrpc":"2.0","id":"r","error":{"code":-32601,"message":"no","data":{"a":1}}}`,
	`{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"both"}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	`{"JSONRPC":"2.0","ID":1,"Method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","extra":[1,{"b":null}]}`,
	`{"hello":"world"}`,
	`[1,2]`,
	`"2.0"`,
	`null`,
	`5`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"]`,
	`{"jsonrpc":"2.0","id":1,"method":`,
	"\x00\xff\xfe\x01garbage\x7f",
	`{"jsonrpc":"2.0","id":1,"method":"p\ud800ing"}`,
	`  {"jsonrpc":"2.0","id":2,"method":"ping"}`,
}

// sameMessage reports how a and b differ, or "".
func sameMessage(a, b jsonrpc.Message) string {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Sprintf("%T against %T", a, b)
	}
	switch a := a.(type) {
	case *jsonrpc.Request:
		b := b.(*jsonrpc.Request)
		if a.ID != b.ID || a.Method != b.Method || !bytes.Equal(a.Params, b.Params) {
			return fmt.Sprintf("%+v against %+v", *a, *b)
		}
	case *jsonrpc.Response:
		b := b.(*jsonrpc.Response)
		if a.ID != b.ID || !bytes.Equal(a.Result, b.Result) || !reflect.DeepEqual(a.Error, b.Error) {
			return fmt.Sprintf("%+v against %+v", *a, *b)
		}
	}
	return ""
}

func TestDecodeMessageAsGoSDK(t *testing.T) {
	for _, line := range transportCases {
		want, wantErr := jsonrpc.DecodeMessage([]byte(line))
		got, err := decodeMessage([]byte(line), false)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, go-sdk's %v", line, err, wantErr)
			continue
		}
		if err == nil {
			if d := sameMessage(got, want); d != "" {
				t.Errorf("%s: %s", line, d)
			}
		}
	}
}

// A line is one message: what follows it other than the line end ends the
// session, as go-sdk's reader has it; a blank tail does not.
func TestDecodeLineTrailingData(t *testing.T) {
	const m = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for line, ok := range map[string]bool{
		m + "\n":               true,
		m + "\r\n":             true,
		m:                      true,
		m + " \t\n":            true,
		m + `{"x":1}` + "\n":   false,
		m + " x\n":             false,
		`[` + m + `] 1` + "\n": false,
	} {
		_, _, err := decodeLine([]byte(line))
		if (err == nil) != ok {
			t.Errorf("%q: error %v, want ok=%v", line, err, ok)
		}
	}
}

func TestDecodeLineBlank(t *testing.T) {
	if msgs, batch, err := decodeLine([]byte(" \t\r\n")); len(msgs) != 0 || batch || err != nil {
		t.Errorf("blank line: %v %v %v, want nothing", msgs, batch, err)
	}
}

func TestDecodeLineBatch(t *testing.T) {
	msgs, batch, err := decodeLine([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"x","result":{}}]` + "\n"))
	if err != nil || !batch || len(msgs) != 3 {
		t.Fatalf("got %v %v %v", msgs, batch, err)
	}
	if r, ok := msgs[0].(*jsonrpc.Request); !ok || r.Method != "ping" || r.ID.Raw() != int64(1) {
		t.Errorf("first: %+v", msgs[0])
	}
	if r, ok := msgs[1].(*jsonrpc.Request); !ok || r.IsCall() {
		t.Errorf("second: %+v", msgs[1])
	}
	if r, ok := msgs[2].(*jsonrpc.Response); !ok || r.ID.Raw() != "x" {
		t.Errorf("third: %+v", msgs[2])
	}
	for _, bad := range []string{"[]", "[1]", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"x":1}]`, "[" + strings.Repeat("[", 1000) + strings.Repeat("]", 1001)} {
		if _, _, err := decodeLine([]byte(bad)); err == nil {
			t.Errorf("%.60s: no error", bad)
		}
	}
}

func TestDecodeLineDepth(t *testing.T) {
	nest := func(n int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + "}"
	}
	if _, _, err := decodeLine([]byte(nest(maxDepth))); err != nil {
		t.Errorf("depth %d: %v", maxDepth, err)
	}
	if _, _, err := decodeLine([]byte(nest(maxDepth + 1))); err == nil {
		t.Errorf("depth %d: no error", maxDepth+1)
	}
	// Brackets inside strings do not count.
	if _, _, err := decodeLine([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + strings.Repeat("[", 5000) + `\"` + `"}`)); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}

// An answer's envelope is written around its result: the bytes are the
// ones go-sdk's encoder makes.
func TestAppendResponseAsGoSDK(t *testing.T) {
	wrapped := fmt.Errorf("outer: %w", &jsonrpc.Error{Code: -32602, Message: "inner"})
	for _, r := range []*jsonrpc.Response{
		{ID: mustID(t, float64(1)), Result: []byte(`{"content":[{"type":"text","text":"a<b>&\u2028"}]}`)},
		{ID: mustID(t, "a<b>&\u2028é\"\\\x01"), Result: []byte(`{}`)},
		{ID: mustID(t, float64(-9007199254740991)), Error: &jsonrpc.Error{Code: -32601, Message: "no <such> method", Data: []byte(`{"a":"<&>"}`)}},
		{ID: mustID(t, "e"), Error: wrapped},
		{ID: mustID(t, "p"), Error: errors.New("plain \"error\"\n")},
		{ID: mustID(t, float64(7))},
		{ID: mustID(t, float64(9)), Result: []byte("{\"a\":\n [1,\r\n 2]}")},
		{ID: mustID(t, float64(8)), Result: []byte(`{}`), Error: &jsonrpc.Error{Code: 1, Message: "both"}},
	} {
		if d, ok := encodedAsGoSDK(t, r); !ok {
			t.Fatalf("go-sdk cannot encode %+v", r)
		} else if d != "" {
			t.Error(d)
		}
	}
}

// encodedAsGoSDK says how appendResponse's bytes for r differ from go-sdk's
// encoder's ("" if they do not); ok is false if go-sdk cannot encode r.
func encodedAsGoSDK(t testing.TB, r *jsonrpc.Response) (diff string, ok bool) {
	t.Helper()
	want, err := jsonrpc.EncodeMessage(r)
	if err != nil {
		return "", false
	}
	got, err := appendResponse(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Sprintf("got  %s\nwant %s", got, want), true
	}
	return "", true
}

// Under 2025-03-26 a batch's calls are answered as one array, in the
// batch's order; its notifications are owed nothing, so a batch of calls
// and notifications is answered (go-sdk's own transport waits for an
// answer to each notification too, and never answers such a batch) and a
// batch of notifications alone is not.
func TestBatchAnswers(t *testing.T) {
	r := newRig(t, nil)
	w := dialWire(t, r.listen())
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	if got := w.mustRecv(); !strings.Contains(got, `"protocolVersion":"2025-03-26"`) {
		t.Fatalf("initialize: %s", got)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	w.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"echo","arguments":{}}}]`)
	var batch []answer
	if err := json.Unmarshal([]byte(w.mustRecv()), &batch); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range batch {
		ids = append(ids, string(a.ID))
		if a.Error != nil || len(a.Result) == 0 {
			t.Errorf("answer %s: %+v", a.ID, a.Error)
		}
	}
	if !slices.Equal(ids, []string{"1", `"b"`}) {
		t.Errorf("batch answer ids %v, want [1 \"b\"]", ids)
	}
	w.send(`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
	w.send(`{"jsonrpc":"2.0","id":"probe","method":"ping"}`)
	if a := decodeAnswer(t, w.mustRecv()); string(a.ID) != `"probe"` {
		t.Errorf("after a batch of notifications: answer to %s, want the probe's", a.ID)
	}
	// A batch may not reuse an id of its own or of a request in flight.
	w.send(`[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	if s, err := w.recv(); err == nil {
		t.Errorf("duplicate ids in a batch: answered %s, want the session closed", s)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// FuzzDecodeMessage holds the transport's decoding to go-sdk's for any
// input: the same error or no error, the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, c := range transportCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := jsonrpc.DecodeMessage(data)
		got, err := decodeMessage(data, false)
		if checkDepth(data) != nil {
			return // refused before either decodes: the depth check is go-sdk's too
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, go-sdk's %v", data, err, wantErr)
		}
		if err == nil {
			if d := sameMessage(got, want); d != "" {
				t.Fatalf("%q: %s", data, d)
			}
		}
	})
}

// FuzzAppendResponse holds the transport's answers to go-sdk's encoder's
// bytes for any id and error message.
func FuzzAppendResponse(f *testing.F) {
	f.Add("a<b>&\u2028é\"", int64(-32601), "no <such> method", true)
	f.Add("", int64(0), "\x01\xff", false)
	f.Fuzz(func(t *testing.T, id string, code int64, msg string, isErr bool) {
		r := &jsonrpc.Response{ID: mustID(t, id), Result: []byte(`{"content":[]}`)}
		if isErr {
			r.Result, r.Error = nil, &jsonrpc.Error{Code: code, Message: msg}
		}
		if d, ok := encodedAsGoSDK(t, r); !ok {
			t.Skip("go-sdk cannot encode it")
		} else if d != "" {
			t.Fatal(d)
		}
	})
}

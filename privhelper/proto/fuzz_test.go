package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// requestTypes maps every wire name of the method table to a constructor of
// its parameter type, so the fuzzer decodes params exactly as the helper
// would. It is derived from the table (Info.NewRequest), so a method added
// to Methods is fuzzed without a row here.
var requestTypes = func() map[string]func() Validator {
	m := map[string]func() Validator{}
	for _, i := range Methods() {
		m[i.Name] = i.NewRequest
	}
	return m
}()

// Every method of the table makes a pointer to its parameter type,
// which decodes params and validates: the fuzzer reaches every Validate.
func TestRequestTypesCoverTable(t *testing.T) {
	names := Names()
	if len(requestTypes) != len(names) {
		t.Errorf("requestTypes has %d methods, the table %d", len(requestTypes), len(names))
	}
	for _, n := range names {
		mk := requestTypes[n]
		if mk == nil {
			t.Errorf("method %q has no entry in requestTypes: the fuzzer would not reach its Validate", n)
			continue
		}
		v := mk()
		if v == nil {
			t.Errorf("method %q: a pointer to its parameter type is not a Validator: the fuzzer would not reach its Validate", n)
			continue
		}
		if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
			t.Errorf("method %q: NewRequest gives %T, want a pointer to a struct params decode into", n, v)
			continue
		}
		checkParams(t, n, []byte("{}"))
	}
	var bare Info
	if bare.NewRequest() != nil {
		t.Error("an Info not from the table makes a request")
	}
}

// FuzzFrame feeds arbitrary bytes to the helper's side of the wire: a frame
// read as a Request, then its params decoded strictly into the method's
// parameter type and validated, as the helper does before it acts. Nothing
// may panic; every content error must wrap ErrMalformed (so the helper
// answers invalid_argument and closes); every Validate error must be an
// *Error with CodeInvalidArgument; and whatever decodes must survive a
// write and a re-read unchanged, so the two sides can never disagree about
// what a frame said.
func FuzzFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for i := 0; i < 4; i++ { // a stream may hold several frames
			var req Request
			err := ReadFrame(r, &req)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("ReadFrame error is neither malformed nor a short read: %v", err)
				}
				return
			}
			roundTrip(t, &req)
			checkParams(t, req.Method, req.Params)
		}
	})
}

// FuzzParams decodes fuzzed params for every method in the table: the
// method is picked by the first byte so one corpus reaches every Validate.
func FuzzParams(f *testing.F) {
	names := Names()
	f.Fuzz(func(t *testing.T, method uint8, params []byte) {
		checkParams(t, names[int(method)%len(names)], params)
	})
}

func checkParams(t *testing.T, method string, params []byte) {
	t.Helper()
	mk := requestTypes[method]
	if mk == nil {
		return // the helper answers an unknown method with not_found
	}
	if p := bytes.TrimSpace(params); len(p) == 0 || bytes.Equal(p, []byte("null")) {
		params = []byte("{}") // as the helper's decodeParams does
	}
	v := mk()
	if err := Decode(params, v); err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: Decode error does not wrap ErrMalformed: %v", method, err)
		}
		return
	}
	err := v.Validate()
	if err == nil {
		// What passed must pass again after a trip over the wire.
		again := mk()
		js, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("%s: a valid request does not encode: %v", method, merr)
		}
		if derr := Decode(js, again); derr != nil {
			t.Fatalf("%s: re-decoding %s: %v", method, js, derr)
		}
		if verr := again.Validate(); verr != nil {
			t.Fatalf("%s: valid before encoding, invalid after (%s): %v", method, js, verr)
		}
		return
	}
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeInvalidArgument {
		t.Fatalf("%s: Validate error is not invalid_argument: %#v", method, err)
	}
	if pe.Message == "" {
		t.Fatalf("%s: Validate error has no message", method)
	}
	if _, jerr := json.Marshal(pe); jerr != nil {
		t.Fatalf("%s: Validate error cannot cross the wire: %v", method, jerr)
	}
}

// roundTrip writes req back as a frame and reads it again: the result must
// be the same request.
func roundTrip(t *testing.T, req *Request) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteFrame(&buf, req); err != nil {
		// Re-encoding can grow a body past MaxMessage (json escapes <, >
		// and & in strings); that is a refusal, not a disagreement.
		return
	}
	var again Request
	if err := ReadFrame(&buf, &again); err != nil {
		t.Fatalf("a frame the helper accepted does not re-read: %v", err)
	}
	if again.ID != req.ID || again.Method != req.Method || !jsonEqual(again.Params, req.Params) {
		t.Fatalf("round trip changed the request: %+v became %+v", req, again)
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 {
		a = json.RawMessage("null") // an absent params is sent as null
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	params, _ := json.Marshal(PowerScheduleReq{Action: ActionReboot, DelaySeconds: 30, Reason: "kernel update ✓"})
	at := time.Date(2025, 3, 1, 12, 0, 0, 123, time.UTC)
	result, _ := json.Marshal(PowerScheduleResp{Action: ActionReboot, At: at})
	msgs := []any{
		&Request{ID: 1, Method: Hello.Name, Params: json.RawMessage(`{"version":1,"client":"raspi-mcp/0.1.0"}`)},
		&Request{ID: 2, Method: PowerSchedule.Name, Params: params},
		&Response{ID: 2, Result: result},
		&Response{ID: 3, Error: Errorf(CodePermissionDenied, "no").With("uid", 1000)},
	}
	var buf bytes.Buffer
	for _, m := range msgs {
		if err := WriteFrame(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range msgs {
		got := reflect.New(reflect.TypeOf(want).Elem()).Interface()
		if err := ReadFrame(&buf, got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		// Details numbers come back as float64; compare via JSON.
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("frame %d: got %s, want %s", i, gj, wj)
		}
	}
	if err := ReadFrame(&buf, &Request{}); err != io.EOF {
		t.Fatalf("ReadFrame at end of stream = %v, want io.EOF", err)
	}

	var r PowerScheduleResp
	if err := Decode(result, &r); err != nil || !r.At.Equal(at) {
		t.Fatalf("Decode result = %+v, %v", r, err)
	}
}

// bodyTrap fails the test if anything past the header is read.
type bodyTrap struct {
	hdr  []byte
	read bool
}

func (b *bodyTrap) Read(p []byte) (int, error) {
	if len(b.hdr) == 0 {
		b.read = true
		return 0, errors.New("body must not be read")
	}
	n := copy(p, b.hdr)
	b.hdr = b.hdr[n:]
	return n, nil
}

func TestReadFrameOversizeRejectedWithoutAllocating(t *testing.T) {
	for _, n := range []uint32{MaxMessage + 1, 1 << 31, 0xFFFFFFFF} {
		hdr := make([]byte, 4)
		binary.BigEndian.PutUint32(hdr, n)
		trap := &bodyTrap{hdr: hdr}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ReadFrame(trap, &Request{})
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("len %d: err = %v, want ErrMalformed about size", n, err)
		}
		if trap.read {
			t.Errorf("len %d: body was read", n)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 16<<10 {
			t.Errorf("len %d: allocated %d bytes rejecting an oversize frame", n, d)
		}
	}
	// Exactly MaxMessage is allowed in (and then fails only as JSON).
	body := `"` + strings.Repeat("a", MaxMessage-2) + `"`
	var s string
	if err := ReadFrame(bytes.NewReader(frame(body)), &s); err != nil || len(s) != MaxMessage-2 {
		t.Fatalf("frame of exactly MaxMessage: %v", err)
	}
}

func TestWriteFrameOversize(t *testing.T) {
	var buf bytes.Buffer
	err := WriteFrame(&buf, strings.Repeat("a", MaxMessage))
	if err == nil || buf.Len() != 0 {
		t.Fatalf("WriteFrame oversize = %v, wrote %d bytes", err, buf.Len())
	}
}

func TestReadFrameRejects(t *testing.T) {
	tests := []struct {
		name      string
		in        []byte
		malformed bool // else an I/O error
	}{
		{"unknown field", frame(`{"id":1,"method":"status","params":{},"extra":1}`), true},
		{"trailing value", frame(`{"id":1,"method":"status","params":{}}{"id":2}`), true},
		{"trailing garbage", frame(`{"id":1,"method":"status","params":{}}x`), true},
		{"trailing brace", frame(`{"id":1,"method":"status","params":{}}}`), true},
		{"wrong type", frame(`{"id":"1","method":"status","params":{}}`), true},
		{"negative id", frame(`{"id":-1,"method":"status"}`), true},
		{"not json", frame(`hello`), true},
		{"empty frame", frame(``), true},
		{"truncated body", frame(`{"id":1,"method":"status"}`)[:10], false},
		{"truncated header", []byte{0, 0}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadFrame(bytes.NewReader(tc.in), &Request{})
			if err == nil {
				t.Fatal("ReadFrame accepted it")
			}
			if got := errors.Is(err, ErrMalformed); got != tc.malformed {
				t.Fatalf("errors.Is(%v, ErrMalformed) = %v, want %v", err, got, tc.malformed)
			}
			if !tc.malformed && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("truncated frame: %v, want io.ErrUnexpectedEOF", err)
			}
		})
	}
	// Whitespace after the value is not trailing data.
	if err := ReadFrame(bytes.NewReader(frame(`{"id":1,"method":"status"} `+"\n")), &Request{}); err != nil {
		t.Fatalf("trailing whitespace rejected: %v", err)
	}
}

func TestDecodeParamsStrict(t *testing.T) {
	var r PowerScheduleReq
	if err := Decode([]byte(`{"action":"reboot","delay_seconds":5,"reason":"x","force":true}`), &r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown param field: %v", err)
	}
	if err := Decode([]byte(`{"action":"reboot","delay_seconds":"5"}`), &r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("string delay: %v", err)
	}
	if err := Decode([]byte(`{"action":"reboot","delay_seconds":1.5}`), &r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("fractional delay: %v", err)
	}
	if err := Decode([]byte(`{}`), &StatusReq{}); err != nil {
		t.Fatalf("empty status params: %v", err)
	}
}

func TestValidatePowerSchedule(t *testing.T) {
	ok := PowerScheduleReq{Action: ActionReboot, DelaySeconds: 60, Reason: "apply kernel update"}
	tests := []struct {
		name  string
		mut   func(*PowerScheduleReq)
		field string // "" = valid
	}{
		{"ok", func(*PowerScheduleReq) {}, ""},
		{"poweroff", func(r *PowerScheduleReq) { r.Action = ActionPoweroff }, ""},
		{"delay 0", func(r *PowerScheduleReq) { r.DelaySeconds = 0 }, ""},
		{"delay 600", func(r *PowerScheduleReq) { r.DelaySeconds = 600 }, ""},
		{"empty reason", func(r *PowerScheduleReq) { r.Reason = "" }, ""},
		{"reason 200 runes", func(r *PowerScheduleReq) { r.Reason = strings.Repeat("é", 200) }, ""},
		{"empty action", func(r *PowerScheduleReq) { r.Action = "" }, "action"},
		{"halt", func(r *PowerScheduleReq) { r.Action = "halt" }, "action"},
		{"case", func(r *PowerScheduleReq) { r.Action = "Reboot" }, "action"},
		{"delay -1", func(r *PowerScheduleReq) { r.DelaySeconds = -1 }, "delay_seconds"},
		{"delay 601", func(r *PowerScheduleReq) { r.DelaySeconds = 601 }, "delay_seconds"},
		{"reason 201 runes", func(r *PowerScheduleReq) { r.Reason = strings.Repeat("a", 201) }, "reason"},
		{"newline", func(r *PowerScheduleReq) { r.Reason = "a\nlevel=ERROR msg=forged" }, "reason"},
		{"nul", func(r *PowerScheduleReq) { r.Reason = "a\x00b" }, "reason"},
		{"escape", func(r *PowerScheduleReq) { r.Reason = "\x1b[2J" }, "reason"},
		{"del", func(r *PowerScheduleReq) { r.Reason = "a\x7f" }, "reason"},
		{"c1", func(r *PowerScheduleReq) { r.Reason = "a\u0085b" }, "reason"},
		{"bidi override", func(r *PowerScheduleReq) { r.Reason = "a\u202eb" }, "reason"},
		{"line separator", func(r *PowerScheduleReq) { r.Reason = "a\u2028b" }, "reason"},
		{"invalid utf8", func(r *PowerScheduleReq) { r.Reason = "a\xffb" }, "reason"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.mut(&r)
			err := r.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v", r, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Details["field"] != tc.field {
				t.Fatalf("Validate(%+v) = %#v, want invalid_argument on %s", r, err, tc.field)
			}
			if !strings.HasPrefix(e.Message, "proto: ") {
				t.Errorf("message %q does not name the package", e.Message)
			}
		})
	}
}

func TestValidateHello(t *testing.T) {
	if err := (HelloReq{Version: Version, Client: "raspi-mcp/0.1.0"}).Validate(); err != nil {
		t.Fatal(err)
	}
	// A wrong version is not Validate's business.
	if err := (HelloReq{Version: 99, Client: "x"}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"", strings.Repeat("a", MaxClientLen+1), "a\r\nb"} {
		if CodeOf((HelloReq{Version: Version, Client: c}).Validate()) != CodeInvalidArgument {
			t.Errorf("client %q accepted", c)
		}
	}
	for _, v := range []Validator{StatusReq{}, PowerCancelReq{}, PowerStateReq{}} {
		if err := v.Validate(); err != nil {
			t.Errorf("%T.Validate() = %v", v, err)
		}
	}
}

func TestNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range Names() {
		if n == "" || seen[n] {
			t.Fatalf("method name %q empty or duplicated", n)
		}
		seen[n] = true
	}
	Names()[0] = "mutated"
	if Names()[0] != Hello.Name {
		t.Fatal("Names exposes the table")
	}
}

func TestErrorString(t *testing.T) {
	e := Errorf(CodeUnavailable, "privhelper/client: helper unavailable at %s", "/run/x.sock")
	if got, want := e.Error(), "unavailable: privhelper/client: helper unavailable at /run/x.sock"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	wrapped := errors.Join(errors.New("ctx"), e)
	if CodeOf(wrapped) != CodeUnavailable || CodeOf(errors.New("plain")) != "" {
		t.Fatal("CodeOf")
	}
}

func BenchmarkFrameRoundTrip(b *testing.B) {
	req := &Request{ID: 7, Method: PowerSchedule.Name, Params: json.RawMessage(`{"action":"reboot","delay_seconds":60,"reason":"bench"}`)}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteFrame(&buf, req); err != nil {
			b.Fatal(err)
		}
		var got Request
		if err := ReadFrame(&buf, &got); err != nil {
			b.Fatal(err)
		}
	}
}

package journal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

// Fixtures, both newest first as `journalctl -r -o json` prints them:
//
//   - basic.jsonl: written for these tests in journalctl's format (cursor,
//     seqnum and boot fields included), with a byte-array MESSAGE, a missing
//     PRIORITY, a ~9 KB traceback, escapes and non-ASCII text, a
//     multi-valued field, a null MESSAGE and one malformed line.
//   - trixie.jsonl: real output of `journalctl -o json -r
//     --output-fields=... -n 40` on Debian trixie (systemd 257) in the
//     vmtest VM, fields in journalctl's own (hash) order, including a
//     byte-array MESSAGE printed by a unit.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var fixtureBase = time.UnixMicro(1767225600000000) // basic.jsonl's time 0

func at(sec float64) time.Time { return fixtureBase.Add(time.Duration(sec * float64(time.Second))) }

func TestParseBasic(t *testing.T) {
	res, err := Parse(bytes.NewReader(readFixture(t, "basic.jsonl")), Query{Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scanned != 13 || res.Skipped != 1 || res.Truncated {
		t.Fatalf("Scanned %d Skipped %d Truncated %v; want 13, 1, false", res.Scanned, res.Skipped, res.Truncated)
	}
	if len(res.Entries) != 12 {
		t.Fatalf("%d entries, want 12", len(res.Entries))
	}
	for i := 1; i < len(res.Entries); i++ {
		if res.Entries[i].Time.Before(res.Entries[i-1].Time) {
			t.Fatalf("entries not oldest first at %d: %v then %v", i, res.Entries[i-1].Time, res.Entries[i].Time)
		}
	}
	byIdent := map[string]Entry{}
	for _, e := range res.Entries {
		if !utf8.ValidString(e.Message) {
			t.Errorf("invalid UTF-8 in %q", e.Message)
		}
		byIdent[e.Identifier+"/"+e.Unit] = e
	}

	first := res.Entries[0]
	want := Entry{Time: at(1), Unit: "nginx.service", Identifier: "systemd", PID: 1, Priority: 6, Level: "info",
		Message: "Starting nginx.service - A high performance web server and a reverse proxy server..."}
	if first != want {
		t.Errorf("first entry\n got %+v\nwant %+v", first, want)
	}
	if e := byIdent["motion/motion.service"]; e.Message != "frame \uFFFD from camera 0" || e.PID != 903 {
		t.Errorf("byte-array message: %+v", e)
	}
	if e := byIdent["kernel/"]; e.Priority != 6 || e.Level != "info" || e.Unit != "" || e.PID != 0 {
		t.Errorf("entry without PRIORITY or unit: %+v", e)
	}
	if e := byIdent["backup.sh/backup.service"]; e.Priority != 3 || e.Level != "err" {
		t.Errorf("err entry: %+v", e)
	}
	if e := byIdent["systemd/backup.service"]; e.Level != "warning" {
		t.Errorf("systemd's message about backup.service: %+v", e)
	}
	huge := byIdent["python3/sensor-logger.service"]
	if len(huge.Message) != MaxMessage+len("…") || !strings.HasSuffix(huge.Message, "…") || !strings.HasPrefix(huge.Message, "Traceback") {
		t.Errorf("huge message: %d bytes, ends %q", len(huge.Message), huge.Message[max(0, len(huge.Message)-10):])
	}
	if e := byIdent["sensor/sensor.service"]; e.Message != "Température 21.5 °C, \"ok\"\tback\\slash" || e.Level != "notice" {
		t.Errorf("escaped message: %+v", e)
	}
	if e := byIdent["dup-a/dup.service"]; e.Message != "first value" {
		t.Errorf("multi-valued fields: %+v", e)
	}
	if e := byIdent["big/big.service"]; !strings.Contains(e.Message, "longer than 4096") {
		t.Errorf("null message: %+v", e)
	}
	last := res.Entries[len(res.Entries)-1]
	if last.Time != at(10) || last.Identifier != "sshd" {
		t.Errorf("last entry %+v", last)
	}
}

func TestParseTrixie(t *testing.T) {
	res, err := Parse(bytes.NewReader(readFixture(t, "trixie.jsonl")), Query{Priority: -1, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 40 || res.Skipped != 0 {
		t.Fatalf("%d entries, %d skipped; want 40, 0", len(res.Entries), res.Skipped)
	}
	var sawBytes, sawStarted bool
	for _, e := range res.Entries {
		if e.Time.Year() != 2026 {
			t.Errorf("time %v", e.Time)
		}
		switch {
		case e.Message == "bad \uFFFD bytes":
			sawBytes = e.Unit == "probe-ok.service" && e.Identifier == "sh" && e.PID == 300
		case e.Message == "Started probe-ok.service - probe ok.":
			// systemd's own line: _SYSTEMD_UNIT=init.scope, UNIT=probe-ok.service.
			sawStarted = e.Unit == "probe-ok.service" && e.PID == 1
		case e.Identifier == "kernel":
			if e.Unit != "" {
				t.Errorf("kernel line has unit %q", e.Unit)
			}
		}
	}
	if !sawBytes || !sawStarted {
		t.Errorf("byte-array line ok: %v; systemd's Started line attributed to the unit: %v", sawBytes, sawStarted)
	}
	if e := res.Entries[len(res.Entries)-1]; e.Message != "warn to stderr" {
		t.Errorf("newest entry is %+v", e)
	}
}

func TestParseFilters(t *testing.T) {
	fixture := readFixture(t, "basic.jsonl")
	messages := func(r Result) []string {
		var out []string
		for _, e := range r.Entries {
			out = append(out, e.Identifier)
		}
		return out
	}
	for _, tc := range []struct {
		name               string
		q                  Query
		want               []string
		trunc, scanLimited bool
		scanned            int
	}{
		{name: "limit keeps the newest", q: Query{Priority: -1, Limit: 2}, want: []string{"sshd", "sshd"}, scanned: 2},
		{name: "priority err", q: Query{Priority: 3}, want: []string{"backup.sh"}, scanned: 13},
		{name: "priority warning", q: Query{Priority: 4}, want: []string{"backup.sh", "systemd"}, scanned: 13},
		{name: "priority 8 is no filter", q: Query{Priority: 8, Limit: 3}, want: []string{"big", "sshd", "sshd"}, scanned: 4},
		{name: "grep ascii fold", q: Query{Priority: -1, Grep: "NGINX.service - a HIGH"}, want: []string{"systemd", "systemd"}, scanned: 13},
		{name: "grep non-ascii fold", q: Query{Priority: -1, Grep: "TEMPÉRATURE"}, want: []string{"sensor"}, scanned: 13},
		{name: "grep in a byte-array message", q: Query{Priority: -1, Grep: "from camera"}, want: []string{"motion"}, scanned: 13},
		{name: "grep finds text past the 4 KiB cut", q: Query{Priority: -1, Grep: "Remote I/O error"}, want: []string{"python3"}, scanned: 13},
		{name: "since and until exact", q: Query{Priority: -1, Since: at(4), Until: at(6)}, want: []string{"backup.sh", "systemd", "python3", "sensor"}, scanned: 13},
		// The newest entries cost 84+11+64 (Accepted...), 30+11+64 (debug1...),
		// then 57+11+64 (big's placeholder); the malformed line is between.
		{name: "byte budget", q: Query{Priority: -1, MaxBytes: 159 + 105 + 131}, want: []string{"sshd", "sshd"}, trunc: true, scanned: 4},
		{name: "byte budget exactly met", q: Query{Priority: -1, MaxBytes: 159 + 105 + 132, Limit: 3}, want: []string{"big", "sshd", "sshd"}, scanned: 4},
		{name: "budget smaller than one entry", q: Query{Priority: -1, MaxBytes: 10}, want: nil, trunc: true, scanned: 1},
		{name: "scan limit", q: Query{Priority: -1, Grep: "nothing like this", ScanLimit: 5}, want: nil, trunc: true, scanLimited: true, scanned: 5},
		{name: "scan limit equal to the input is not truncation", q: Query{Priority: -1, Grep: "zzz", ScanLimit: 13}, want: nil, scanned: 13},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Parse(bytes.NewReader(fixture), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := messages(res); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if res.Truncated != tc.trunc || res.ScanLimited != tc.scanLimited || res.Scanned != tc.scanned {
				t.Errorf("Truncated %v ScanLimited %v Scanned %d; want %v %v %d", res.Truncated, res.ScanLimited, res.Scanned, tc.trunc, tc.scanLimited, tc.scanned)
			}
		})
	}
}

func TestParseByteBudgetCountsCappedMessage(t *testing.T) {
	res, err := Parse(bytes.NewReader(readFixture(t, "basic.jsonl")), Query{Priority: -1, Grep: "traceback", MaxBytes: MaxMessage + 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 1 || res.Truncated {
		t.Fatalf("a 9 KB message costs its capped size: %d entries, truncated %v", len(res.Entries), res.Truncated)
	}
}

func TestParseLongLines(t *testing.T) {
	// A line over 1 MiB is skipped without being held; the lines around it,
	// one of them longer than the read buffer, still parse whatever the
	// reader's chunking.
	long := `{"__REALTIME_TIMESTAMP":"2","MESSAGE":"` + strings.Repeat("x", maxLine+10) + `"}`
	mid := `{"__REALTIME_TIMESTAMP":"3","MESSAGE":"` + strings.Repeat("y", 200<<10) + `"}`
	in := `{"__REALTIME_TIMESTAMP":"4","MESSAGE":"newest"}` + "\n" + mid + "\n" + long + "\n" + `{"__REALTIME_TIMESTAMP":"1","MESSAGE":"oldest"}`
	for name, r := range map[string]io.Reader{
		"plain":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
	} {
		res, err := Parse(r, Query{Priority: -1, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if res.Scanned != 4 || res.Skipped != 1 || len(res.Entries) != 3 {
			t.Fatalf("%s: scanned %d skipped %d entries %d; want 4, 1, 3", name, res.Scanned, res.Skipped, len(res.Entries))
		}
		if res.Entries[0].Message != "oldest" || len(res.Entries[1].Message) != MaxMessage+len("…") || res.Entries[2].Message != "newest" {
			t.Errorf("%s: entries %q, %d bytes, %q", name, res.Entries[0].Message, len(res.Entries[1].Message), res.Entries[2].Message)
		}
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	res, err := Parse(io.MultiReader(strings.NewReader(`{"__REALTIME_TIMESTAMP":"1","MESSAGE":"a"}`+"\n"), iotest.ErrReader(boom)), Query{Priority: -1})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "journal: ") {
		t.Fatalf("Parse(failing reader) error %v", err)
	}
	if len(res.Entries) != 1 {
		t.Errorf("entries read before the error: %+v", res.Entries)
	}
}

func TestFieldString(t *testing.T) {
	for raw, want := range map[string]string{
		`"plain"`:         "plain",
		`"a\u00e9\n"`:     "aé\n",
		`[104,105]`:       "hi",
		`[ 104 , 105 ]`:   "hi",
		`[]`:              "",
		`["x","y"]`:       "x",
		`[[104,105],"y"]`: "hi",
		`[255]`:           "\uFFFD",
		`"\ud800"`:        "\uFFFD", // lone surrogate
		`6`:               "6",
	} {
		got, ok := fieldString([]byte(raw))
		if !ok || got != want {
			t.Errorf("fieldString(%s) = %q, %v; want %q", raw, got, ok, want)
		}
	}
	for _, raw := range []string{``, `null`, `[300]`, `[1,"a"]`} {
		if got, ok := fieldString([]byte(raw)); ok {
			t.Errorf("fieldString(%s) = %q, true; want not ok", raw, got)
		}
	}
}

func TestCapMessage(t *testing.T) {
	s := strings.Repeat("a", MaxMessage-1) + "é" + "tail" // é straddles the cut
	got := capMessage(s)
	if got != strings.Repeat("a", MaxMessage-1)+"…" {
		t.Errorf("cut inside a rune: %q", got[len(got)-8:])
	}
	if short := "short"; capMessage(short) != short {
		t.Error("short message changed")
	}
	if exact := strings.Repeat("b", MaxMessage); capMessage(exact) != exact {
		t.Error("message of exactly MaxMessage bytes changed")
	}
}

func TestContainsFoldASCII(t *testing.T) {
	for _, tc := range []struct {
		s, sub string
		want   bool
	}{
		{"Hello World", "world", true},
		{"Hello World", "hello world", true},
		{"Hello", "hello!", false},
		{"", "", true},
		{"abc", "", true},
		{"ERRor: x", "error", true},
		{"héllo", "llo", true},
	} {
		if got := containsFoldASCII(tc.s, tc.sub); got != tc.want {
			t.Errorf("containsFoldASCII(%q, %q) = %v", tc.s, tc.sub, got)
		}
	}
}

package applog

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"
)

func TestRingKeepsTheNewestInOrder(t *testing.T) {
	r := NewRing(3)
	for i, m := range []string{"a", "b", "c", "d"} {
		r.Add(Entry{Time: time.Unix(int64(i), 0), Source: "agent", Level: slog.LevelInfo, Message: m})
	}
	got := r.Entries(slog.LevelDebug, "", 10)
	if len(got) != 3 || got[0].Message != "b" || got[2].Message != "d" {
		t.Fatalf("entries = %+v, want b c d", got)
	}
	if got := r.Entries(slog.LevelDebug, "", 2); len(got) != 2 || got[0].Message != "c" {
		t.Fatalf("limit 2 = %+v, want c d", got)
	}
	if got := r.Entries(slog.LevelWarn, "", 10); len(got) != 0 {
		t.Fatalf("warn and above = %+v, want none", got)
	}
}

func TestHandlerRecordsAndPassesOn(t *testing.T) {
	var out bytes.Buffer
	r := NewRing(10)
	log := slog.New(r.Handler(slog.NewTextHandler(&out, nil), "agent")).With("pin", 17)
	log.Warn("gpio write failed", "err", "busy line")
	log.Debug("not enabled")
	got := r.Entries(slog.LevelDebug, "agent", 10)
	if len(got) != 1 || got[0].Message != "gpio write failed" || got[0].Level != slog.LevelWarn || got[0].Attrs != `pin=17 err="busy line"` {
		t.Fatalf("entries = %+v", got)
	}
	if !bytes.Contains(out.Bytes(), []byte("gpio write failed")) {
		t.Fatalf("next handler did not get the record: %q", out.String())
	}
}

func TestWriterParsesTheHelpersTextLines(t *testing.T) {
	r := NewRing(10)
	var copyTo bytes.Buffer
	w := r.Writer("helper", &copyTo)
	io.WriteString(w, `time=2026-11-22T10:00:00.000Z level=WARN msg="privhelper: refused peer" uid=65534 pid=12`+"\n")
	io.WriteString(w, "panic: something not slog\n")
	w.Close()
	// The lines are parsed on the writer's goroutine: wait for them, with a
	// deadline that only guards against a hang (a busy machine is slow).
	var got []Entry
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = r.Entries(slog.LevelDebug, "helper", 10); len(got) == 2 {
			break
		}
	}
	if len(got) != 2 {
		t.Fatalf("entries = %+v", got)
	}
	if got[0].Level != slog.LevelWarn || got[0].Message != "privhelper: refused peer" || got[0].Attrs != "uid=65534 pid=12" ||
		!got[0].Time.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("first = %+v", got[0])
	}
	if got[1].Message != "panic: something not slog" || got[1].Level != slog.LevelInfo {
		t.Fatalf("second = %+v", got[1])
	}
	if copyTo.Len() == 0 {
		t.Fatal("lines were not copied on")
	}
}

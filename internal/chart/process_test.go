package chart

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "raspi-mcp-chart")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func okRequest() *Request {
	return &Request{Width: 400, Height: 300, Start: 0, End: 10, Series: []Series{{Name: "x", Times: []int64{1}, Vals: []float64{1}}}}
}

// The child's answer is the chart; a child that fails, writes too much or
// hangs is an unavailable chart, and a bad request starts no child.
func TestProcessBounds(t *testing.T) {
	got, err := Process{Bin: script(t, `cat >/dev/null; printf PNG`)}.Render(context.Background(), okRequest())
	if err != nil || string(got) != "PNG" {
		t.Fatalf("%q, %v", got, err)
	}
	for name, p := range map[string]Process{
		"fails":           {Bin: script(t, `cat >/dev/null; echo broken >&2; exit 1`)},
		"writes too much": {Bin: script(t, `cat >/dev/null; head -c 3000000 /dev/zero`)},
		"hangs":           {Bin: script(t, `exec sleep 60`), Timeout: 100 * time.Millisecond},
		"missing":         {Bin: filepath.Join(t.TempDir(), "nope")},
	} {
		got, err := p.Render(context.Background(), okRequest())
		if !errors.Is(err, ErrUnavailable) || got != nil {
			t.Errorf("%s: %d bytes, %v; want ErrUnavailable", name, len(got), err)
		}
		if name == "fails" && !strings.Contains(err.Error(), "broken") {
			t.Errorf("the child's stderr is not in %v", err)
		}
	}
	bad := okRequest()
	bad.Width = 1
	ran := filepath.Join(t.TempDir(), "ran")
	if _, err := (Process{Bin: script(t, "touch "+ran)}).Render(context.Background(), bad); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("bad request: %v", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("a bad request started the child")
	}
}

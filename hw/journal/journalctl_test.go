//go:build unix

package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeJournalctl writes a shell script standing in for journalctl; it
// records its arguments in dir/args, one a line. Query gives journalctl an
// environment of its own, so everything the script needs is baked in.
func fakeJournalctl(t *testing.T, body string) (path, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	fixture, err := filepath.Abs("testdata/basic.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	argsFile = filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > '" + argsFile + "'\nFIXTURE='" + fixture + "'\n" + body + "\n"
	path = filepath.Join(dir, "journalctl")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

func TestJournalctlQuery(t *testing.T) {
	bin, argsFile := fakeJournalctl(t, `cat "$FIXTURE"`)
	q := Query{Units: []string{"ssh.service"}, Priority: 6, Limit: 3}
	res, err := Journalctl{Path: bin}.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	// The fake ignores the filters; Parse applies priority (dropping the
	// debug line) and limit.
	if len(res.Entries) != 3 || res.Entries[2].Identifier != "sshd" || res.Entries[0].Identifier != "dup-a" {
		t.Errorf("entries %+v", res.Entries)
	}
	args, _ := os.ReadFile(argsFile)
	if got := strings.Split(strings.TrimSpace(string(args)), "\n"); !slices.Equal(got, Args(q)) {
		t.Errorf("journalctl got %q, want %q", got, Args(q))
	}
}

func TestJournalctlStopsEarly(t *testing.T) {
	// An endless journal: Query must return once it has enough, killing the
	// process instead of waiting for it.
	// The journal never ends, so only stopping early returns without an
	// error; the minute is only a hang guard.
	bin, _ := fakeJournalctl(t, `while :; do cat "$FIXTURE"; done`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Journalctl{Path: bin}.Query(ctx, Query{Priority: -1, Grep: "publickey", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 5 {
		t.Errorf("%d entries, want 5", len(res.Entries))
	}
	// The scan limit bounds a grep that never matches.
	res, err = Journalctl{Path: bin}.Query(ctx, Query{Priority: -1, Grep: "no such text", ScanLimit: 2000})
	if err != nil || !res.Truncated || !res.ScanLimited || res.Scanned != 2000 {
		t.Errorf("scan limit: %+v, %v", res, err)
	}
}

func TestJournalctlErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		is         error
		contains   string
	}{
		{"insufficient permissions", `echo "No journal files were opened due to insufficient permissions." >&2; exit 1`,
			ErrNotReadable, "add the user to group systemd-journal"},
		{"hint with some entries", `cat "$FIXTURE"; printf 'Hint: You are currently not seeing messages from other users and the system.\n      Users in groups '"'"'adm'"'"', '"'"'systemd-journal'"'"' can see all messages.\n' >&2`,
			ErrNotReadable, "journal: not readable by uid"},
		{"no journal", `echo "No journal files were found." >&2`, ErrNoJournal, "systemd-journald"},
		{"failure", `echo "Failed to parse timestamp: @x" >&2; exit 1`, nil, "Failed to parse timestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, _ := fakeJournalctl(t, tc.body)
			_, err := Journalctl{Path: bin}.Query(context.Background(), Query{Priority: -1, Grep: "x"})
			if err == nil || !strings.Contains(err.Error(), tc.contains) || !strings.HasPrefix(err.Error(), "journal: ") {
				t.Fatalf("error %v; want one containing %q", err, tc.contains)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}

	t.Run("missing binary", func(t *testing.T) {
		_, err := Journalctl{Path: filepath.Join(t.TempDir(), "journalctl")}.Query(context.Background(), Query{})
		if err == nil || !strings.HasPrefix(err.Error(), "journal: ") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("not in PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, err := Journalctl{}.Query(context.Background(), Query{})
		if err == nil || !strings.Contains(err.Error(), "journalctl not found") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("invalid query never runs", func(t *testing.T) {
		bin, argsFile := fakeJournalctl(t, `cat "$FIXTURE"`)
		if _, err := (Journalctl{Path: bin}).Query(context.Background(), Query{Units: []string{"--since=0"}}); err == nil {
			t.Fatal("accepted an option as a unit")
		}
		if _, err := os.Stat(argsFile); !errors.Is(err, os.ErrNotExist) {
			t.Error("journalctl ran for an invalid query")
		}
	})
	t.Run("context", func(t *testing.T) {
		// The journal would take ten minutes: only the deadline ends it.
		bin, _ := fakeJournalctl(t, `exec sleep 600`)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { _, err := Journalctl{Path: bin}.Query(ctx, Query{}); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want the deadline's", err)
			}
		case <-time.After(2 * time.Minute): // a hang guard
			t.Fatal("Query outlived its context by two minutes")
		}
	})
}

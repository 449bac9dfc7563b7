package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type counter struct {
	N     int      `json:"n"`
	Notes []string `json:"notes"`
}

func counterFile(path string) JSON[counter] {
	return JSON[counter]{File: File{path, "test"}, Check: func(c *counter) error {
		if c.N < 0 {
			return errors.New("n must not be negative")
		}
		if c.Notes == nil {
			c.Notes = []string{}
		}
		return nil
	}}
}

// Open seeds a missing or empty file, keeps a good one, and reports (never
// overwrites) one that does not decode or fails Check; Change writes back
// only what fn accepted.
func TestJSONSeedsChecksAndChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	j := counterFile(path)
	if ro, err := j.Open(func() *counter { return &counter{N: 1} }); ro || err != nil {
		t.Fatalf("open: read-only %v, %v", ro, err)
	}
	if err := j.Change(func(c *counter) error { c.N++; return nil }); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("no")
	if err := j.Change(func(c *counter) error { c.N = 100; return refused }); err != refused {
		t.Fatalf("fn's error came back as %v", err)
	}
	if ro, err := j.Open(func() *counter { return &counter{N: 50} }); ro || err != nil {
		t.Fatalf("reopen: %v %v", ro, err)
	}
	var got counter
	if err := j.Read(func(c *counter) error { got = *c; return nil }); err != nil || got.N != 2 || got.Notes == nil {
		t.Fatalf("read %+v, %v: want n 2 and Check's filled notes", got, err)
	}
	for body, want := range map[string]string{"{not json": "remove it to start from the seeded board", `{"n": -3}`: "n must not be negative"} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := j.Open(func() *counter { return &counter{} }); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%q: %v, want an error naming the file and %q", body, err, want)
		}
		if b, _ := os.ReadFile(path); string(b) != body {
			t.Fatalf("a bad file was overwritten: %q", b)
		}
	}
}

package config

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad writes a fuzzed config.toml and two fuzzed drop-ins and loads
// them as the agent and helper do at start. Load must never panic and must
// either return an error or a config that validates; what it accepts must
// survive Encode and Parse unchanged (so `raspi-mcp config` shows what is in
// force), and a file without drop-ins loads as Parse reads it.
func FuzzLoad(f *testing.F) {
	f.Fuzz(func(t *testing.T, main, dropA, dropB []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.toml")
		write(t, path, main)
		alone, aloneErr := Load(path)
		parsed, parseErr := Parse(main)
		if (aloneErr == nil) != (parseErr == nil) {
			t.Fatalf("Load and Parse disagree on the same file: %v / %v", aloneErr, parseErr)
		}
		if aloneErr == nil {
			if a, b := encode(t, alone), encode(t, parsed); !bytes.Equal(a, b) {
				t.Fatalf("Load and Parse read the same file differently:\n%s\n---\n%s", a, b)
			}
			checkAccepted(t, alone)
		}
		if len(dropA) == 0 && len(dropB) == 0 {
			return
		}
		if err := os.Mkdir(filepath.Join(dir, "config.d"), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "config.d", "10-a.toml"), dropA)
		write(t, filepath.Join(dir, "config.d", "20-b.toml"), dropB)
		if c, err := Load(path); err == nil {
			checkAccepted(t, c)
		}
	})
}

// checkAccepted holds for every config Load returns.
func checkAccepted(t *testing.T, c Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("Load returned a config that does not validate: %v", err)
	}
	enc := encode(t, c)
	back, err := Parse(enc)
	if err != nil {
		t.Fatalf("an accepted config, encoded, does not parse: %v\n%s", err, enc)
	}
	if again := encode(t, back); !bytes.Equal(again, enc) {
		t.Fatalf("encode/parse changed the config:\n%s\n---\n%s", enc, again)
	}
}

func encode(t *testing.T, c Config) []byte {
	t.Helper()
	b, err := c.Encode()
	if err != nil {
		t.Fatalf("an accepted config does not encode: %v", err)
	}
	return b
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

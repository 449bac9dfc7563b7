package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config check prints every problem, one a line with file and line, exits
// 1 with their count; a file that loads prints ok and the pin warnings.
func TestConfigCheckEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[sytem]\nreboot = true\n[system]\nmin_power_interval = 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := runConfig([]string{"check", bad}, &out, &errOut)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(ee.msg, "2 problems") {
		t.Fatalf("err = %v, want exit 1 naming 2 problems", err)
	}
	want := bad + ":1: unknown table [sytem]: did you mean [system]?\n" +
		bad + ":4: system.min_power_interval: want a duration like \"10m\", got the number 5\n"
	if errOut.String() != want || out.Len() != 0 {
		t.Errorf("stderr:\n%s\nwant:\n%s\nstdout: %q", errOut.String(), want, out.String())
	}

	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("[gpio]\nenabled = true\npins = [{ pin = 2, name = \"lamp\", mode = \"output\" }]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runConfig([]string{"check", good}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, good+": ok") || !strings.Contains(s, `warning: gpio.pins[0] ("lamp", output) is GPIO2, which carries I²C1 SDA`) {
		t.Errorf("stdout:\n%s", s)
	}
}

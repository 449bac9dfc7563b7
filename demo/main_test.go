package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/raspi-mcp/raspi-mcp/internal/tmuxtest"
)

// TestDemo runs the demo as `make demo` does, on binaries built for the
// test: piped (80 columns), where its own check must find every step's
// outcome as its title says, and in a real 80-column terminal, whose
// screen is the golden file testdata/demo-80.txt.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and runs the whole demo (about 10 s)")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", ".",
		"../cmd/raspi-mcp", "../cmd/raspi-mcp-simhelper", "../cmd/raspi-mcp-stdio")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	demo := filepath.Join(dir, "bin", "demo")

	t.Run("piped", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(demo, "--bin", "bin")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("demo: %v\nstderr: %s\nstdout:\n%s", err, stderr.String(), out)
		}
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		checkScreen(t, lines)
		if !strings.Contains(string(out), "\n== Checked: each of the ") {
			t.Errorf("the demo did not report its check:\n%s", out)
		}
	})
	t.Run("terminal80", func(t *testing.T) {
		t.Parallel()
		s := tmuxtest.Run(t, tmuxtest.Options{Width: 80, Height: 50, Dir: dir}, demo, "--bin", "bin")
		if s.Exit != 0 {
			t.Fatalf("demo exited %d:\n%s", s.Exit, s.Text())
		}
		checkScreen(t, s.Lines)
		tmuxtest.Golden(t, "demo-80.txt", maskRun(s.Text()))
	})
}

// checkScreen asserts what a person must be able to rely on: no line
// wider than 80 columns, no step whose outcome betrays its title, and a
// last line that says what to type next.
func checkScreen(t *testing.T, lines []string) {
	t.Helper()
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
		if strings.HasPrefix(strings.TrimSpace(l), "MISMATCH ") && !strings.Contains(l, "the demo fails") {
			t.Errorf("line %d: a step showed something else than its title: %q", i+1, l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "Next, type: bin/raspi-mcp serve --sim") {
		t.Errorf("last line %q does not say what to type next", last)
	}
}

// maskRun replaces what differs from run to run (times, ids, pids, the
// simulated board's jittering readings) with fixed marks, and the output of
// `raspi-mcp status`, which cmd/raspi-mcp's own golden tests check, with one
// line.
func maskRun(screen string) string {
	lines := strings.Split(screen, "\n")
	var out []string
	inStatus := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "  $ raspi-mcp status"):
			inStatus = true
			out = append(out, l, "    <raspi-mcp status>")
			continue
		case inStatus && (strings.HasPrefix(l, "    ") || l == ""):
			continue // status's blank line between the device and the agent too
		case inStatus:
			out = append(out, "") // the blank line before the next step
		}
		inStatus = false
		out = append(out, l)
	}
	s := strings.Join(out, "\n")
	for _, m := range []struct{ re, with string }{
		{`DIR=\S+`, "DIR=<tmp>"},
		{`ready in \d+ ms`, "ready in <n> ms"},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`, "<time>"},
		{`\b\d\d:\d\d:\d\d\b`, "<hh:mm:ss>"},
		{`\bjob-[0-9a-f]{8}\b`, "job-<id>"},
		{`\bos-update-[0-9a-f]{12}\b`, "os-update-<id>"},
		{`token [A-Za-z0-9_-]{22}\b`, "token <token>"},
		{`"token":"[A-Za-z0-9_-]{22}"`, `"token":"<token>"`},
		{`held \d+ ms`, "held <n> ms"},
		// The simulated board's readings jitter a little.
		// The simulated board's processes take turns below the top one.
		{`(?m)^ +\d+ \S+ +\d+\.\d +\d+\.\d\d  \S+$`, "    <pid user cpu mem command>"},
		{`\d+(\.\d)?% CPU`, "<cpu>% CPU"},
		{`cpu( avg)? \d+%`, "cpu$1 <n>%"},
		{`max \d+%`, "max <n>%"},
		{`\d+\.\d°C`, "<t>°C"},
		{`"(uptime_s|temp_c|cpu_pct|mem_pct)":[\d.]+`, `"$1":<n>`},
		{`\d+ samples`, "<n> samples"},
	} {
		s = regexp.MustCompile(m.re).ReplaceAllString(s, m.with)
	}
	return s
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/tmuxtest"
)

// callSim is a laptop-mode agent (`raspi-mcp serve --sim`) for the tests of
// what `raspi-mcp call` prints, and the built binary that talks to it. The
// agent's directory is the default one under XDG_RUNTIME_DIR, so that the
// command lines call prints carry no --dir whose length would change the
// wrapping from run to run.
type callSim struct {
	bin string   // the raspi-mcp binary
	env []string // XDG_RUNTIME_DIR=…, for every command
}

func startCallSim(t *testing.T) callSim {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("laptop mode's directory follows XDG_RUNTIME_DIR on Linux only")
	}
	if _, err := os.Stat(new(where).fileConfig().Agent.Socket); err == nil {
		t.Skip("a Pi agent runs on this machine: call without --dir would talk to it")
	}
	helper, err := helperBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "raspi-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// serve --sim finds raspi-mcp-simhelper beside itself (libBinary).
	if err := os.Symlink(helper, filepath.Join(dir, "raspi-mcp-simhelper")); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	s := callSim{bin: bin, env: []string{"XDG_RUNTIME_DIR=" + run}}
	log := startServe(t, bin, s.env)
	// Ready when status says so, the documented check; the bound only
	// keeps a broken build from hanging the test.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st := exec.Command(bin, "status")
		st.Env = append(os.Environ(), s.env...)
		if st.Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("laptop mode not ready:\n%s", log.String())
		}
	}
	return s
}

// startServe starts `BIN serve --sim ARGS` with env added, stops it with
// SIGTERM when the test ends (showing its log if the test failed), and
// returns its log; each caller waits for the readiness it needs.
func startServe(t *testing.T, bin string, env []string, args ...string) *syncLog {
	t.Helper()
	log := &syncLog{}
	serve := exec.Command(bin, append([]string{"serve", "--sim"}, args...)...)
	serve.Env = append(os.Environ(), env...)
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})
	return log
}

// syncLog is the agent's output, written by exec's copier while a test may read it.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// masks replace what changes from run to run with a placeholder of the
// same width, so that the wrapping stays what the test saw.
var callMasks = []*regexp.Regexp{
	regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`),       // times
	regexp.MustCompile(`token[:=] *[A-Za-z0-9_-]{16,}`),         // change tokens
	regexp.MustCompile(`sha256:[0-9a-f]{8,}`),                   // plan hashes (bound to the caller)
	regexp.MustCompile(`(?:job|corr|ap)-[0-9a-f]{6,}`),          // ids
	regexp.MustCompile(`available to \S+ \(admin\)`),            // the test's user
	regexp.MustCompile(`uptime_seconds: +\d+|create_time +\d+`), // clocks
}

// hiddenFields is the count of a table's fields left out: which fields a
// service has depends on the clock (uptime_seconds is left out at 0 s, in
// the agent's first second; cpu_percent on a first listing).
var hiddenFields = regexp.MustCompile(`not shown: \d+ more fields`)

func callMask(s string) string {
	s = hiddenFields.ReplaceAllString(s, "not shown: NN more fields")
	for _, re := range callMasks {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			key := regexp.MustCompile(`^[a-z_]*[:=] *|^sha256:|^[a-z]+-`).FindString(m)
			return key + strings.Repeat("X", len([]rune(m))-len(key))
		})
	}
	return s
}

// On a terminal 80 columns wide, `raspi-mcp call` prints a list as a table,
// an error with its fix hint and the commands to try, and change_prepare's
// token as the command that commits it, in no line wider than the
// terminal: the golden files are the screens, masked where they change.
func TestCallGoldenTerminal(t *testing.T) {
	s := startCallSim(t)
	for _, c := range []struct {
		golden string
		args   []string
		exit   int
	}{
		{"call_list.txt", []string{"gpio_list_pins"}, 0},
		{"call_services.txt", []string{"service_list_services"}, 0},
		{"call_error.txt", []string{"gpio_write_pin", "pin=5", "value=high"}, 1},
		{"call_confirm.txt", []string{"process_send_signal", "pid=1342", "signal=SIGTERM"}, 1},
		{"call_prepare.txt", []string{"change_prepare", "tool=system_shutdown"}, 0},
	} {
		t.Run(c.golden, func(t *testing.T) {
			scr := tmuxtest.Run(t, tmuxtest.Options{Width: 80, Env: s.env}, append([]string{s.bin, "call"}, c.args...)...)
			if scr.Exit != c.exit {
				t.Errorf("exit %d, want %d:\n%s", scr.Exit, c.exit, scr.Text())
			}
			for i, l := range scr.Lines {
				if n := len([]rune(l)); n > 80 {
					t.Errorf("line %d is %d columns: %q", i+1, n, l)
				}
			}
			if strings.HasPrefix(strings.TrimSpace(scr.Text()), "{") {
				t.Errorf("JSON on a terminal:\n%s", scr.Text())
			}
			tmuxtest.Golden(t, c.golden, callMask(scr.Text()))
		})
	}
}

// Piped, call prints what scripts have always read: the summary line, then
// the result (or {"error": …}) as one line of JSON; --json the whole MCP
// result as one line of JSON. Exit status 1 for an error result.
func TestCallPipedIsJSON(t *testing.T) {
	s := startCallSim(t)
	call := func(args ...string) (string, int) {
		cmd := exec.Command(s.bin, append([]string{"call"}, args...)...)
		cmd.Env = append(os.Environ(), s.env...)
		out, err := cmd.Output() // stdout is a pipe
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	// Piped, with or without --json: the MCP result as one line of JSON,
	// nothing before or after it.
	type result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
		Meta              json.RawMessage `json:"_meta"` // an error's structured form
	}
	out, code := call("gpio_list_pins")
	var ok result
	var pins struct {
		Pins []struct{ Pin int } `json:"pins"`
	}
	if err := json.Unmarshal([]byte(out), &ok); err != nil || code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("gpio_list_pins piped: exit %d, %v:\n%s", code, err, out)
	}
	if err := json.Unmarshal(ok.StructuredContent, &pins); err != nil || len(pins.Pins) == 0 || len(ok.Content) == 0 ||
		!strings.HasPrefix(ok.Content[0].Text, fmt.Sprintf("%d allowed pins", len(pins.Pins))) {
		t.Errorf("gpio_list_pins piped: %v: %s", err, out)
	}

	out, code = call("gpio_write_pin", "pin=5", "value=high")
	var bad result
	var e struct {
		Error struct {
			Code string `json:"code"`
			Next []struct {
				Tool string `json:"tool"`
			} `json:"suggested_next_tool_calls"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &bad); err != nil || code != 1 || !bad.IsError || strings.Count(out, "\n") != 1 {
		t.Fatalf("error piped: exit %d, %v: %s", code, err, out)
	}
	if err := json.Unmarshal(bad.Meta, &e); err != nil || e.Error.Code != "permission_denied" || len(e.Error.Next) == 0 {
		t.Errorf("error piped: %v: %s", err, out)
	}
	if strings.Contains(out, "try:") || strings.Contains(out, "fix_hint:") {
		t.Errorf("the terminal's form when piped:\n%s", out)
	}

	out, code = call("--json", "gpio_list_pins")
	var whole struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(out), &whole); err != nil || code != 0 || strings.Count(out, "\n") != 1 || whole.StructuredContent["pins"] == nil {
		t.Errorf("--json piped: exit %d, %v:\n%s", code, err, out)
	}
}

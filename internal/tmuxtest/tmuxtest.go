// Package tmuxtest runs a command in a real terminal (a detached tmux
// session of a fixed size) and returns the screen as a person would see it,
// for golden-file tests of what the CLI prints to a terminal: line width,
// wrapping, colour and the "am I on a terminal" branch are all the real
// ones, which a bytes.Buffer cannot show.
package tmuxtest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// update rewrites golden files instead of comparing: go test -run X -update-golden.
var update = flag.Bool("update-golden", false, "rewrite the tmuxtest golden files")

// Screen is what a command left in the terminal.
type Screen struct {
	Lines []string // the pane's lines, history included, trailing blank lines dropped
	Exit  int      // the command's exit status
}

// Text is the screen as one string, a newline after each line.
func (s Screen) Text() string {
	if len(s.Lines) == 0 {
		return ""
	}
	return strings.Join(s.Lines, "\n") + "\n"
}

// Options say how big the terminal is and what the command sees.
type Options struct {
	Width, Height int      // columns and rows; 80 x 50 when zero
	Env           []string // extra KEY=VALUE for the command
	Dir           string   // working directory; the test's when empty
	Timeout       time.Duration
}

// Run starts argv in a detached tmux session of opts' size, waits for it
// to exit and captures the whole pane (scroll-back included). It skips
// the test when tmux is missing, except in CI, where it fails.
func Run(t testing.TB, opts Options, argv ...string) Screen {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("tmuxtest: tmux missing in CI: .ci/run must install it")
		}
		t.Skip("tmuxtest: tmux not installed")
	}
	if opts.Width == 0 {
		opts.Width = 80
	}
	if opts.Height == 0 {
		opts.Height = 50
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	done := filepath.Join(dir, "exit")
	// The command's exit status goes to a file; the pane's shell then
	// waits, silent, so that nothing it printed is lost before the capture.
	script := fmt.Sprintf("%s; echo $? > %s; exec sleep 3600", shellJoin(argv), shellQuote(done))
	env := append(os.Environ(), "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8")
	cmd := func(args ...string) *exec.Cmd {
		c := exec.Command(tmux, append([]string{"-S", sock, "-f", "/dev/null"}, args...)...)
		c.Env = env
		return c
	}
	newArgs := []string{"set-option", "-g", "history-limit", "10000", ";", "new-session", "-d", "-s", "t", "-x", fmt.Sprint(opts.Width), "-y", fmt.Sprint(opts.Height)}
	if opts.Dir != "" {
		newArgs = append(newArgs, "-c", opts.Dir)
	}
	for _, e := range opts.Env {
		newArgs = append(newArgs, "-e", e)
	}
	newArgs = append(newArgs, "sh", "-c", script)
	if out, err := cmd(newArgs...).CombinedOutput(); err != nil {
		t.Fatalf("tmuxtest: new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = cmd("kill-server").Run() })
	deadline := time.Now().Add(opts.Timeout)
	var code []byte
	for {
		if b, err := os.ReadFile(done); err == nil && len(bytes.TrimSpace(b)) > 0 {
			code = bytes.TrimSpace(b)
			break
		}
		if time.Now().After(deadline) {
			out, _ := cmd("capture-pane", "-p", "-t", "t", "-S", "-").Output()
			t.Fatalf("tmuxtest: %v did not exit within %v; screen:\n%s", argv, opts.Timeout, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, err := cmd("capture-pane", "-p", "-t", "t", "-S", "-", "-E", "-").Output()
	if err != nil {
		t.Fatalf("tmuxtest: capture-pane: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var exit int
	fmt.Sscan(string(code), &exit)
	return Screen{Lines: lines, Exit: exit}
}

// Golden compares got with testdata/NAME (the calling package's), or
// writes it there with -update-golden. The caller masks what changes from
// run to run (times, ids, versions) before it calls.
func Golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("tmuxtest: %v (run with -update-golden to write it)", err)
	}
	if string(want) != got {
		t.Errorf("tmuxtest: %s differs from the screen (run with -update-golden after checking it):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

package vmtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// run runs a host tool and, when it fails, returns an error that names the
// command and carries the tail of its output, which is where tools like
// debootstrap and mkfs say what went wrong.
func run(ctx context.Context, log io.Writer, dir string, name string, args ...string) error {
	_, err := output(ctx, log, dir, name, args...)
	return err
}

// output is run returning stdout. Stderr is only kept for the error.
func output(ctx context.Context, log io.Writer, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	fmt.Fprintf(log, "vmtest: $ %s %s\n", name, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		tail := lastLines(stderr.String()+stdout.String(), 20)
		return nil, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(shorten(args), " "), err, tail)
	}
	return stdout.Bytes(), nil
}

// shorten keeps an error's command line readable when it has many arguments.
func shorten(args []string) []string {
	if len(args) <= 8 {
		return args
	}
	return append(append([]string{}, args[:8]...), "...")
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fileTail returns at most n trailing lines of a file, for error messages
// about a guest that did not boot.
func fileTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	b = bytes.ReplaceAll(b, []byte("\r"), nil)
	return lastLines(string(b), n)
}

// consoleExcerpt is what to show of a guest's serial console when something
// went wrong: from just before the first oops or panic line if there is one
// (the register dump after it pushes the cause out of a plain tail), else
// the last n lines.
func consoleExcerpt(path string, n int) string {
	lines := strings.Split(fileTail(path, 400), "\n")
	if i := crashLine(lines); i >= 0 {
		start := max(i-5, 0)
		return strings.Join(lines[start:min(start+3*n, len(lines))], "\n")
	}
	return lastLines(strings.Join(lines, "\n"), n)
}

// crashLine returns the index of the first line that says the guest kernel
// crashed, or -1.
func crashLine(lines []string) int {
	for i, l := range lines {
		for _, m := range []string{"Kernel panic", "BUG:", "Oops:", "general protection fault", "KVM internal error"} {
			if strings.Contains(l, m) {
				return i
			}
		}
	}
	return -1
}

// guestCrashed reports whether the console log shows a kernel crash, and the
// line that says so.
func guestCrashed(path string) (bool, string) {
	lines := strings.Split(fileTail(path, 400), "\n")
	if i := crashLine(lines); i >= 0 {
		return true, strings.TrimSpace(lines[i])
	}
	return false, ""
}

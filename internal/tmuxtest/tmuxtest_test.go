package tmuxtest

import (
	"strings"
	"testing"
)

// The terminal is real: a long line wraps at the width, a command on a
// terminal sees one (test -t), and the exit status comes back.
func TestRunWrapsAtWidthAndSeesATerminal(t *testing.T) {
	s := Run(t, Options{Width: 20, Height: 10}, "sh", "-c", `printf '%s\n' 0123456789012345678901234; if [ -t 1 ]; then echo tty; fi; exit 3`)
	if s.Exit != 3 {
		t.Errorf("exit %d, want 3", s.Exit)
	}
	want := []string{"01234567890123456789", "01234", "tty"}
	if strings.Join(s.Lines, "|") != strings.Join(want, "|") {
		t.Errorf("screen %q, want %q", s.Lines, want)
	}
}

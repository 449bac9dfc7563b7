package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// pipedWidth is the width the demo writes to when its output is not a
// terminal (a file, a pager, a test): the classic terminal's.
const pipedWidth = 80

// terminalWidth is stdout's width in columns when it is a terminal, else
// pipedWidth: a person reads the demo in their own window, and a line
// longer than it wraps at the wrong place and breaks the tables.
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return pipedWidth // not a terminal
	}
	if ws.Col > 0 {
		return int(ws.Col)
	}
	// A terminal that does not know its size (a serial console): the
	// shell's idea of it, if any.
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return pipedWidth
}

// screen prints the demo for a person, every line wrapped to width. The
// client's handlers print from their own goroutines while a call waits,
// hence the lock.
type screen struct {
	mu    sync.Mutex
	w     io.Writer
	width int
}

// minWidth keeps the wrapping sane in a very narrow window: below it lines
// overflow instead of breaking into one word per line.
const minWidth = 40

func newScreen(w io.Writer, width int) *screen {
	return &screen{w: w, width: max(width, minWidth)}
}

// step starts a part of the story.
func (s *screen) step(title string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.w)
	s.put("== ", "   ", title)
}

// line prints text after indent, continued under it (two columns further
// in) when it is too long.
func (s *screen) line(indent int, format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pad := strings.Repeat(" ", indent)
	s.put(pad, pad+"  ", fmt.Sprintf(format, args...))
}

// mark prints a line that starts with a mark (✓, ✗, →, $, ?, !, …) and
// continues under the text after it, so that the mark stands alone.
func (s *screen) mark(indent int, m, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := strings.Repeat(" ", indent) + m + " "
	s.put(first, strings.Repeat(" ", utf8.RuneCountInString(first)), text)
}

// block prints another program's output after indent, line by line; a line
// too long continues two columns further in than where it started, so its
// own indentation (a table's, a list's) still shows.
func (s *screen) block(indent int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pad := strings.Repeat(" ", indent)
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.TrimRight(l, " \r")
		own := len(l) - len(strings.TrimLeft(l, " "))
		s.put(pad+l[:own], pad+strings.Repeat(" ", own+2), l[own:])
	}
}

// put writes text after first, wrapped at the width at spaces, continued
// after cont.
func (s *screen) put(first, cont, text string) {
	own := len(text) - len(strings.TrimLeft(text, " ")) // a table's right-aligned column
	s.pieces(first+text[:own], cont, strings.Split(text[own:], " "), " ")
}

// json prints compact JSON after indent, broken after its commas rather
// than anywhere: it stays exactly what the client got, spaces and all.
func (s *screen) json(indent int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pad := strings.Repeat(" ", indent)
	s.pieces(pad, pad, strings.SplitAfter(text, ","), "")
}

// pieces writes the pieces joined by sep after first, a new line (after
// cont) where the next piece would not fit. A piece wider than a whole
// line (a hash, a long value) is cut.
func (s *screen) pieces(first, cont string, pieces []string, sep string) {
	prefix, line := first, ""
	emit := func() {
		fmt.Fprintln(s.w, strings.TrimRight(prefix+line, " "))
		prefix, line = cont, ""
	}
	for _, w := range pieces {
		for {
			room := max(s.width-runes(prefix), 1)
			glue := ""
			if line != "" {
				glue = sep
			}
			if runes(line)+runes(glue)+runes(w) <= room {
				line += glue + w
				break
			}
			if line != "" {
				emit()
				continue
			}
			// Alone too long for a line (JSON, a hash): cut it after
			// its last comma that fits, else where the line ends.
			r := []rune(w)
			cut := room
			if i := strings.LastIndex(string(r[:room]), ","); i > 0 {
				cut = runes(string(r[:room])[:i+1])
			}
			line, w = string(r[:cut]), string(r[cut:])
			emit()
			if w == "" {
				break
			}
		}
	}
	if line != "" || prefix == first {
		emit()
	}
}

func runes(s string) int { return utf8.RuneCountInString(s) }

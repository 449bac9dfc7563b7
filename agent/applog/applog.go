// Package applog keeps raspi-mcp's own latest log records in memory: the
// agent's, and in laptop mode the helper child's, so
// logs.get_recent_app_logs can answer without a readable journal. It is a
// fixed ring: a Pi Zero never pays for more than its capacity.
package applog

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entry is one log record.
type Entry struct {
	Time    time.Time
	Source  string // "agent" or "helper"
	Level   slog.Level
	Message string
	Attrs   string // key=value pairs as the text handler writes them
}

// Ring holds the latest records; safe for concurrent use.
type Ring struct {
	mu   sync.Mutex
	buf  []Entry
	next int
	full bool
}

// NewRing keeps the last n records (n >= 1).
func NewRing(n int) *Ring { return &Ring{buf: make([]Entry, max(n, 1))} }

// Add appends one record, dropping the oldest when full.
func (r *Ring) Add(e Entry) {
	if len(e.Message) > 2048 {
		e.Message = e.Message[:2048] + "…"
	}
	if len(e.Attrs) > 2048 {
		e.Attrs = e.Attrs[:2048] + "…"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = e
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// Entries returns up to limit of the newest records at or above min from
// source ("" for all), oldest first.
func (r *Ring) Entries(min slog.Level, source string, limit int) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := []Entry{}
	for i := 0; i < n && len(out) < limit; i++ {
		e := r.buf[(r.next-1-i+len(r.buf))%len(r.buf)]
		if e.Level >= min && (source == "" || e.Source == source) {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Handler returns a slog.Handler that records into the ring and passes every
// record on to next.
func (r *Ring) Handler(next slog.Handler, source string) slog.Handler {
	return &handler{ring: r, next: next, source: source}
}

type handler struct {
	ring   *Ring
	next   slog.Handler
	source string
	attrs  string // from WithAttrs, already formatted
	group  string
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(h.attrs)
	rec.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	h.ring.Add(Entry{Time: rec.Time, Source: h.source, Level: rec.Level, Message: rec.Message, Attrs: strings.TrimSpace(b.String())})
	return h.next.Handle(ctx, rec)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		writeAttr(&b, h.group, a)
	}
	return &handler{ring: h.ring, next: h.next.WithAttrs(as), source: h.source, attrs: b.String(), group: h.group}
}

func (h *handler) WithGroup(name string) slog.Handler {
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return &handler{ring: h.ring, next: h.next.WithGroup(name), source: h.source, attrs: h.attrs, group: g}
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	v := a.Value.Resolve().String()
	if strings.ContainsAny(v, " \"=") {
		v = strconv.Quote(v)
	}
	b.WriteString(" " + key + "=" + v)
}

// Writer returns a writer that records each line of a child's slog text
// output (time=... level=INFO msg="..." k=v) as an entry of source, and
// copies the bytes on to also (nil: nowhere).
func (r *Ring) Writer(source string, also io.Writer) io.WriteCloser {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 4096), 64<<10)
		for sc.Scan() {
			line := sc.Text()
			if also != nil {
				io.WriteString(also, line+"\n")
			}
			r.Add(ParseTextLine(line, source))
		}
		pr.CloseWithError(sc.Err())
	}()
	return pw
}

// ParseTextLine reads one line of slog's TextHandler. A line in another
// format becomes an info entry with the whole line as its message.
func ParseTextLine(line, source string) Entry {
	e := Entry{Time: time.Now(), Source: source, Level: slog.LevelInfo, Message: line}
	fields := splitFields(line)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "time=") {
		return e
	}
	var rest []string
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		switch k {
		case "time":
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				e.Time = t
			}
		case "level":
			_ = e.Level.UnmarshalText([]byte(v))
		case "msg":
			e.Message = v
		default:
			rest = append(rest, f)
		}
	}
	e.Attrs = strings.Join(rest, " ")
	return e
}

// splitFields splits on spaces outside double quotes.
func splitFields(s string) []string {
	var out []string
	start, quoted, esc := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case c == '\\' && quoted:
			esc = true
		case c == '"':
			quoted = !quoted
		case c == ' ' && !quoted:
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

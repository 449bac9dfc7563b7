package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callView renders a tool's result for a person at a terminal: the summary,
// the result's fields as aligned "key: value" lines, lists of objects as
// small tables, and an error as its code, message, fix hint and the next
// calls to try, written as `raspi-mcp call` command lines that can be pasted.
// Programs get the JSON instead (piped output or --json): what is printed
// here may change with the person's needs, the JSON does not.
//
// Its names are methods or start with "call" so that the package's other
// formatting helpers (status, metrics) cannot collide with them.
type callView struct {
	Width  int            // columns; no line printed is wider
	Tool   string         // the tool called, by its wire name
	Args   map[string]any // the call's arguments as sent
	Prefix string         // the command that calls a tool again, e.g. "raspi-mcp call --dir D"
}

// How much of a result a screen shows: --json shows all of it.
const (
	callMaxRows     = 12 // rows of a table before "(N more …)"
	callMaxKey      = 28 // key column of "key: value" lines
	callMaxCol      = 24 // a table column other than the first
	callMaxFirstCol = 36 // a table's first column, usually the name
	callMinWidth    = 40 // narrower terminals are treated as this wide
)

// render writes res as lines no wider than v.Width.
func (v callView) render(w io.Writer, res *mcp.CallToolResult) {
	if v.Width < callMinWidth {
		v.Width = callMinWidth
	}
	if v.Prefix == "" {
		v.Prefix = "raspi-mcp call"
	}
	var lines []string
	summary, rest, _ := strings.Cut(textOf(res), "\n")
	body, berr := callDecode([]byte(rest))
	if berr != nil && len(bytes.TrimSpace([]byte(rest))) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			body, berr = callDecode(b)
		}
	}
	switch {
	case res.IsError:
		lines = v.errorLines(summary, rest, body, berr)
	case berr != nil:
		// Not ours (an upstream's plain text): the text as it came.
		lines = callWrap(strings.TrimRight(textOf(res), "\n"), v.Width, "")
	default:
		lines = callWrap(summary, v.Width, "")
		lines = append(lines, v.value(body, 0)...)
		lines = append(lines, v.nextLines(body)...)
	}
	for _, c := range res.Content {
		if im, ok := c.(*mcp.ImageContent); ok {
			lines = append(lines, fmt.Sprintf("(and an image: %s, %d bytes; --json has it)", im.MIMEType, len(im.Data)))
		}
	}
	for _, l := range lines {
		fmt.Fprintln(w, callTrunc(l, v.Width))
	}
}

// errorLines are an error result: what failed, how to fix it, and the
// calls to make next.
func (v callView) errorLines(summary, rest string, body any, berr error) []string {
	e, _ := callField(body, "error").(callObject)
	if berr != nil || e == nil {
		return callWrap(strings.TrimRight(summary+"\n"+rest, "\n"), v.Width, "")
	}
	str := func(k string) string { s, _ := callField(e, k).(string); return s }
	lines := callWrap("error: "+str("code")+": "+str("message"), v.Width, "       ")
	if h := str("fix_hint"); h != "" {
		lines = append(lines, callWrap("fix_hint: "+h, v.Width, "          ")...)
	}
	if r, _ := callField(e, "retryable").(bool); r {
		lines = append(lines, "retryable: the same call may work in a moment")
	}
	if d, ok := callField(e, "details").(callObject); ok && len(d) > 0 {
		lines = append(lines, "details:")
		lines = append(lines, v.value(d, 1)...)
	}
	next, _ := callField(e, "suggested_next_tool_calls").([]any)
	for _, n := range next {
		tool, _ := callField(n, "tool").(string)
		if tool == "" {
			continue
		}
		args, _ := callField(n, "arguments").(callObject)
		lines = append(lines, v.command("try: ", tool, args)...)
		if why, _ := callField(n, "why").(string); why != "" {
			lines = append(lines, callWrap("     ("+why+")", v.Width, "      ")...)
		}
	}
	// A high-risk call refused for want of confirm and reason: the same
	// call again with them, for the person to fill in the reason.
	if missing, ok := callField(callField(e, "details"), "missing").([]any); ok && v.Tool != "" {
		need := map[string]bool{}
		for _, m := range missing {
			if s, ok := m.(string); ok {
				need[s] = true
			}
		}
		if need["confirm"] || need["reason"] {
			args := callSorted(v.Args)
			args = callDrop(args, "dry_run", "confirm", "reason")
			args = append(args, callPair{"confirm", true}, callPair{"reason", "…"})
			lines = append(lines, v.command("then: ", v.Tool, args)...)
		}
	}
	return lines
}

// nextLines is what a result asks the person to run next: change_prepare's
// token is committed with change_commit.
func (v callView) nextLines(body any) []string {
	if v.Tool != "change_prepare" {
		return nil
	}
	tok, _ := callField(body, "token").(string)
	if tok == "" {
		return nil
	}
	lines := v.command("next: ", "change_commit", callObject{{"token", tok}})
	if exp, _ := callField(body, "expires_at").(string); exp != "" {
		lines = append(lines, "      (the token works once, until "+exp+")")
	}
	return lines
}

// command is a `raspi-mcp call` line for tool and args, after label, broken
// with " \" where it is wider than the screen (a command is never cut).
func (v callView) command(label, tool string, args callObject) []string {
	words := append(strings.Fields(v.Prefix), tool)
	for _, p := range args {
		if p.val == nil {
			continue
		}
		words = append(words, callArg(p.key, p.val))
	}
	indent := strings.Repeat(" ", len(label)+2)
	var lines []string
	line := label + words[0]
	for _, w := range words[1:] {
		if callLen(line)+1+callLen(w)+2 > v.Width && callLen(line) > len(indent) {
			lines = append(lines, line+" \\")
			line = indent + w
			continue
		}
		line += " " + w
	}
	return append(lines, line)
}

// callPair is one field of a JSON object, in the order the object had.
type callPair struct {
	key string
	val any
}

// callObject is a JSON object with its fields in order: a person reads a
// result in the order its author wrote it, not sorted.
type callObject []callPair

// callDecode reads JSON keeping the order of object fields and the text of
// numbers: values are callObject, []any, string, json.Number, bool or nil.
func callDecode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := callRead(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("render: more than one JSON value")
	}
	return v, nil
}

func callRead(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		o := callObject{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			val, err := callRead(d)
			if err != nil {
				return nil, err
			}
			o = append(o, callPair{k.(string), val})
		}
		_, err = d.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for d.More() {
			val, err := callRead(d)
			if err != nil {
				return nil, err
			}
			a = append(a, val)
		}
		_, err = d.Token()
		return a, err
	}
	return tok, nil
}

// callField is o's field k, nil when o is not an object or has none.
func callField(o any, k string) any {
	obj, _ := o.(callObject)
	for _, p := range obj {
		if p.key == k {
			return p.val
		}
	}
	return nil
}

// callSorted is a map's fields sorted by key: the order of the call's own
// arguments is lost in the map, and sorted is at least stable.
func callSorted(m map[string]any) callObject {
	o := make(callObject, 0, len(m))
	for k, v := range m {
		o = append(o, callPair{k, v})
	}
	sort.Slice(o, func(i, j int) bool { return o[i].key < o[j].key })
	return o
}

func callDrop(o callObject, keys ...string) callObject {
	var out callObject
	for _, p := range o {
		drop := false
		for _, k := range keys {
			drop = drop || p.key == k
		}
		if !drop {
			out = append(out, p)
		}
	}
	return out
}

// value is the lines of one value at depth (two columns of indent each).
// An object shows its scalar fields first, aligned, then each nested
// object or list under its key.
func (v callView) value(val any, depth int) []string {
	ind := strings.Repeat("  ", depth)
	avail := v.Width - len(ind)
	switch x := val.(type) {
	case callObject:
		if avail < 30 { // too deep to lay out: one line of JSON
			return []string{ind + callCompact(x)}
		}
		var scalars, nested callObject
		keyw := 0
		for _, p := range x {
			if callProse(p.val) {
				nested = append(nested, p) // one item a line, wrapped
			} else if s, ok := callInline(p.key, p.val); ok {
				scalars = append(scalars, callPair{p.key, s})
				keyw = max(keyw, min(callLen(p.key)+1, callMaxKey))
			} else {
				nested = append(nested, p)
			}
		}
		var lines []string
		for _, p := range scalars {
			k := p.key + ":"
			lines = append(lines, ind+callPad(callTrunc(k, callMaxKey), keyw)+" "+p.val.(string))
		}
		for _, p := range nested {
			if a, ok := p.val.([]any); ok {
				lines = append(lines, fmt.Sprintf("%s%s (%d):", ind, p.key, len(a)))
				lines = append(lines, v.list(p.key, a, depth+1)...)
				continue
			}
			lines = append(lines, ind+p.key+":")
			lines = append(lines, v.value(p.val, depth+1)...)
		}
		return lines
	case []any:
		return v.list("items", x, depth)
	}
	s, _ := callInline("", val)
	return []string{ind + s}
}

// list is a list of objects as a table of their first scalar fields that
// fit the width, at most callMaxRows rows; any other list one per line.
func (v callView) list(name string, a []any, depth int) []string {
	ind := strings.Repeat("  ", depth)
	avail := v.Width - len(ind)
	rows := make([]callObject, 0, len(a))
	for _, x := range a {
		o, ok := x.(callObject)
		if !ok {
			rows = nil
			break
		}
		rows = append(rows, o)
	}
	if rows == nil || avail < 30 {
		var lines []string
		for i, x := range a {
			if i == callMaxRows {
				lines = append(lines, fmt.Sprintf("%s(%d more %s; --json shows all)", ind, len(a)-i, name))
				break
			}
			if s, ok := x.(string); ok {
				lines = append(lines, callWrap(ind+"- "+s, v.Width, ind+"  ")...)
				continue
			}
			lines = append(lines, ind+"- "+callCompact(x))
		}
		return lines
	}
	shown := rows[:min(len(rows), callMaxRows)]
	// Columns: the scalar fields in the order they first appear.
	var keys []string
	cells := map[string][]string{}
	for i, r := range shown {
		for _, p := range r {
			if _, list := p.val.([]any); list {
				continue // a table cell holds one value
			}
			s, ok := callInline(p.key, p.val)
			if !ok {
				continue
			}
			if _, seen := cells[p.key]; !seen {
				keys = append(keys, p.key)
				cells[p.key] = make([]string, len(shown))
			}
			cells[p.key][i] = s
		}
	}
	var cols []string
	widths := map[string]int{}
	used := 0
	for i, k := range keys {
		w := callLen(k)
		for _, c := range cells[k] {
			w = max(w, callLen(c))
		}
		limit := callMaxCol
		if i == 0 {
			limit = callMaxFirstCol
		}
		w = min(w, limit)
		gap := 0
		if len(cols) > 0 {
			gap = 2
		}
		if used+gap+w > avail {
			continue // a narrower field further on may still fit
		}
		cols = append(cols, k)
		widths[k] = w
		used += gap + w
	}
	var lines []string
	row := func(get func(k string) string) {
		var b strings.Builder
		for i, k := range cols {
			if i > 0 {
				b.WriteString("  ")
			}
			cell := callTrunc(get(k), widths[k])
			if i < len(cols)-1 {
				cell = callPad(cell, widths[k])
			}
			b.WriteString(cell)
		}
		lines = append(lines, ind+strings.TrimRight(b.String(), " "))
	}
	row(func(k string) string { return strings.ToUpper(k) })
	for i := range shown {
		row(func(k string) string { return cells[k][i] })
	}
	if n := len(rows) - len(shown); n > 0 {
		lines = append(lines, fmt.Sprintf("%s(%d more %s; --json shows all)", ind, n, name))
	}
	if hidden := len(keys) - len(cols) + callNested(shown); hidden > 0 {
		lines = append(lines, fmt.Sprintf("%s(not shown: %d more fields of each; --json shows all)", ind, hidden))
	}
	return lines
}

// callProse reports whether val is a list of sentences (strings with
// spaces), shown one a line rather than joined and cut.
func callProse(val any) bool {
	a, ok := val.([]any)
	if !ok || len(a) == 0 {
		return false
	}
	for _, x := range a {
		if s, ok := x.(string); ok && strings.Contains(strings.TrimSpace(s), " ") {
			return true
		}
	}
	return false
}

// callNested counts the fields of a table's first row that are not
// scalars, which a table cannot show.
func callNested(rows []callObject) int {
	if len(rows) == 0 {
		return 0
	}
	n := 0
	for _, p := range rows[0] {
		_, list := p.val.([]any)
		if _, ok := callInline(p.key, p.val); !ok || list {
			n++
		}
	}
	return n
}

// callInline is a value that fits on one line: a scalar, or a list of
// scalars joined with ", ". Byte counts (keys ending in _bytes) are shown
// in KiB/MiB/GiB.
func callInline(key string, val any) (string, bool) {
	switch x := val.(type) {
	case nil:
		return "-", true
	case string:
		return strings.Join(strings.Fields(x), " "), true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		if strings.HasSuffix(key, "_bytes") {
			if f, err := x.Float64(); err == nil {
				return callBytes(f), true
			}
		}
		return x.String(), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case []any:
		if len(x) == 0 {
			return "(none)", true
		}
		parts := make([]string, len(x))
		for i, e := range x {
			switch e.(type) {
			case callObject, []any:
				return "", false
			}
			parts[i], _ = callInline(key, e)
		}
		return strings.Join(parts, ", "), true
	case callObject:
		if len(x) == 0 {
			return "(none)", true
		}
	}
	return "", false
}

// callBytes is a byte count as a person reads it: 512 B, 14.0 MiB.
func callBytes(f float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(f, 'f', -1, 64) + " B"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}

// callCompact is a value as one line of JSON, fields in their order.
func callCompact(val any) string {
	var b strings.Builder
	callJSON(&b, val)
	return b.String()
}

func callJSON(b *strings.Builder, val any) {
	switch x := val.(type) {
	case callObject:
		b.WriteByte('{')
		for i, p := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(p.key)
			b.Write(k)
			b.WriteByte(':')
			callJSON(b, p.val)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			callJSON(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		callJSON(b, callSorted(x))
	default:
		j, _ := json.Marshal(x)
		b.Write(j)
	}
}

// callSafe are argument values a shell passes as they are.
var callSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+,=-]+$`)

// callArg is key=value in the syntax `raspi-mcp call` parses (see
// parseArguments), quoted for a POSIX shell: strings bare when safe, else
// in double quotes, else single; a list of plain values comma-separated;
// objects and other lists as JSON in single quotes.
func callArg(key string, val any) string {
	var s string
	switch x := val.(type) {
	case string:
		switch {
		case x != "" && callSafe.MatchString(x):
			return key + "=" + x
		case !strings.ContainsAny(x, "\"$`\\!\n"):
			return key + `="` + x + `"`
		}
		return key + "=" + callShellQuote(x)
	case bool, json.Number, float64, int:
		return fmt.Sprintf("%s=%v", key, x)
	case []any:
		parts := make([]string, 0, len(x))
		for _, e := range x {
			str := ""
			switch y := e.(type) {
			case string:
				str = y
			case json.Number, float64, bool:
				str = fmt.Sprint(y)
			}
			if str == "" || !callSafe.MatchString(str) || strings.Contains(str, ",") {
				parts = nil
				break
			}
			parts = append(parts, str)
		}
		if len(parts) == len(x) && len(x) > 0 {
			return key + "=" + strings.Join(parts, ",")
		}
		s = callCompact(x)
	default:
		s = callCompact(x)
	}
	return key + "=" + callShellQuote(s)
}

func callShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// callLen is the columns s takes (one per rune: what this CLI prints).
func callLen(s string) int { return utf8.RuneCountInString(s) }

// callTrunc cuts s to n columns, ending it with … when it was longer.
func callTrunc(s string, n int) string {
	if callLen(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

func callPad(s string, n int) string {
	if d := n - callLen(s); d > 0 {
		return s + strings.Repeat(" ", d)
	}
	return s
}

// callWrap breaks text into lines of at most width columns at spaces, the
// lines after the first starting with indent (the first keeps its own);
// a word longer than a line
// is cut by the caller's callTrunc.
func callWrap(text string, width int, indent string) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		lead := para[:len(para)-len(strings.TrimLeft(para, " "))]
		line := ""
		for _, w := range strings.Fields(para) {
			switch {
			case line == "":
				line = lead + w
				if len(lines) > 0 {
					line = indent + w
				}
			case callLen(line)+1+callLen(w) > width:
				lines = append(lines, line)
				line = indent + w
			default:
				line += " " + w
			}
		}
		lines = append(lines, line)
	}
	return lines
}

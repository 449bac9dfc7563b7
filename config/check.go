package config

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Problem is one thing wrong with a configuration: where it is, when the
// TOML decoder can say, the dotted key it concerns, and what is wrong, in
// words an owner editing the file understands.
type Problem struct {
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"` // 0: not known (a value merged from several files, a whole table)
	Key  string `json:"key,omitempty"`
	Msg  string `json:"message"`
}

func (p Problem) Error() string {
	var b strings.Builder
	switch {
	case p.File != "" && p.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", p.File, p.Line)
	case p.File != "":
		b.WriteString(p.File + ": ")
	case p.Line > 0:
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is everything Load, Parse or Validate found wrong, in file and
// line order: the owner fixes the file once, not once per run. Its Error
// names every problem, one a line.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = "config: " + p.Error()
	}
	return strings.Join(lines, "\n")
}

// problems collects what a validator finds instead of stopping at the first.
type problems struct{ list Problems }

// add records err, whose message starts with the dotted key it names
// ("gpio.revert: want ...") when there is one.
func (p *problems) add(err error) {
	if err == nil {
		return
	}
	var ps Problems
	if errors.As(err, &ps) {
		p.list = append(p.list, ps...)
		return
	}
	p.list = append(p.list, splitKey(err.Error()))
}

func (p *problems) addf(format string, args ...any) { p.add(fmt.Errorf(format, args...)) }

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return p.list
}

// splitKey takes the dotted key validators put first in a message
// ("gpio.pins[0].pin: ...", "guard.button: ...", "profiles: ...") off
// it. Hand-written rather than a regexp: config is linked into the root
// helper, which regexp and its tables would grow by 130 KB on armv6.
func splitKey(msg string) Problem {
	if key, rest, ok := strings.Cut(msg, ": "); ok && keyPath(key) {
		return Problem{Key: key, Msg: rest}
	}
	return Problem{Msg: msg}
}

// keyPath reports whether key is segments joined by '.', each of letters,
// digits, '_' and '-' with an optional [N] index; the first starts with a
// lower-case letter or '_' and has no upper case or '-'.
func keyPath(key string) bool {
	for i, seg := range strings.Split(key, ".") {
		name, idx, indexed := strings.Cut(seg, "[")
		if name == "" || (indexed && (!strings.HasSuffix(idx, "]") || !digits(strings.TrimSuffix(idx, "]")))) {
			return false
		}
		for j, r := range name {
			lower := r >= 'a' && r <= 'z' || r == '_'
			switch {
			case j == 0 && i == 0 && !lower:
				return false
			case i == 0 && !lower && !(r >= '0' && r <= '9'):
				return false
			case !lower && !(r >= '0' && r <= '9') && !(r >= 'A' && r <= 'Z') && r != '-':
				return false
			}
		}
	}
	return true
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// baseKey is key without list indexes: gpio.pins[0].pin -> gpio.pins.pin.
func baseKey(key string) string {
	var b strings.Builder
	depth := 0
	for _, r := range key {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// where is the file and line of a key, from the last file that set it.
type spot struct {
	file string
	line int
}

// located are the keys the files set, to name the line a validation
// problem comes from.
type located map[string]spot

// place gives p the file and line of its key, or of the nearest enclosing
// key a file set, else the main file.
func (l located) place(p Problem, main string) Problem {
	if p.File != "" {
		return p
	}
	p.File = main
	for k := baseKey(p.Key); k != ""; {
		if w, ok := l[k]; ok {
			p.File, p.Line = w.file, w.line
			break
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return p
}

// sortProblems puts problems in the order of files (main first), then
// of lines; problems without a line come last of their file.
func sortProblems(ps Problems, files []string) {
	order := map[string]int{}
	for i, f := range files {
		order[f] = i
	}
	line := func(p Problem) int {
		if p.Line == 0 {
			return int(^uint(0) >> 1)
		}
		return p.Line
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if order[ps[i].File] != order[ps[j].File] {
			return order[ps[i].File] < order[ps[j].File]
		}
		return line(ps[i]) < line(ps[j])
	})
}

// failedUnder reports whether key, or a key it is part of, was reported
// by the decoder: its value is then the default and not worth a second
// message.
func failedUnder(failed map[string]bool, key string) bool {
	k := baseKey(key)
	for {
		if failed[k] {
			return true
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return false
		}
		k = k[:i]
	}
}

// probe asks the decoder where a key is: MetaData keeps every key's
// position but does not export it, and reports it in the ParseError of an
// Unmarshaler that refuses the value.
type probe struct{}

var errProbe = errors.New("probe")

func (probe) UnmarshalTOML(any) error { return errProbe }

func lineOf(md *toml.MetaData, p toml.Primitive) int {
	var perr toml.ParseError
	if errors.As(md.PrimitiveDecode(p, &probe{}), &perr) {
		return perr.Position.Line
	}
	return 0
}

// decodeFile reads one TOML document over c key by key, so that one wrong
// type does not hide the next, and returns every problem with its line:
// syntax errors (then nothing of the file is read), unknown tables and
// keys with the nearest known name, and values of the wrong type. It
// records in at where each key it read is, and in failed the keys it
// reported (their values stay the defaults). syntax reports a document that
// could not be parsed at all.
func decodeFile(c *Config, file string, data []byte, at located, failed map[string]bool) (probs Problems, syntax bool) {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		p := Problem{File: file, Msg: err.Error()}
		var perr toml.ParseError
		if errors.As(err, &perr) {
			p.Msg = positioned(perr, data)
			if l := perr.Position.Line; l >= 1 && l <= strings.Count(string(data), "\n")+1 {
				p.Line = l
			}
		}
		return Problems{p}, true
	}
	d := &decoder{md: &md, file: file, at: at, bad: map[string]bool{}}
	d.table(top, reflect.ValueOf(c).Elem(), "")
	// Keys below the tables walked (a pin's, an upstream's, a profile's)
	// were decoded whole: the decoder knows which it did not use.
	for _, k := range md.Undecoded() {
		if d.under(k) {
			continue
		}
		d.bad[k.String()] = true
		// The line of the nearest enclosing key the walk saw: the
		// decoder keeps no position for a key inside a list element.
		line := 0
		for i := len(k) - 1; i > 0 && line == 0; i-- {
			if w, ok := at[k[:i].String()]; ok && w.file == file {
				line = w.line
			}
		}
		d.unknown(k.String(), line, typeAt(reflect.TypeOf(Config{}), k[:len(k)-1]))
	}
	for k := range d.bad {
		failed[k] = true
	}
	return d.probs, false
}

type decoder struct {
	md    *toml.MetaData
	file  string
	at    located
	bad   map[string]bool // keys already reported: nothing below them is
	probs Problems
}

// under reports whether k is a key already reported, or below one.
func (d *decoder) under(k toml.Key) bool {
	for i := 1; i <= len(k); i++ {
		if d.bad[k[:i].String()] {
			return true
		}
	}
	return false
}

// table decodes the keys of one TOML table into struct v.
func (d *decoder) table(m map[string]toml.Primitive, v reflect.Value, prefix string) {
	for k, prim := range m {
		key := prefix + k
		line := lineOf(d.md, prim)
		d.at[key] = spot{d.file, line}
		f := fieldFor(v, k)
		if !f.IsValid() {
			d.bad[key] = true
			d.unknown(key, line, v.Type())
			continue
		}
		var raw any
		_ = d.md.PrimitiveDecode(prim, &raw) // into any: decodes nothing, never fails
		if _, ok := raw.(map[string]any); ok && f.Kind() == reflect.Struct && !textual(f) {
			var inner map[string]toml.Primitive
			if err := d.md.PrimitiveDecode(prim, &inner); err == nil {
				d.table(inner, f, key+".")
				continue
			}
		}
		if tables, ok := raw.(map[string]any); ok && f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.Struct {
			// [profiles.NAME]: each a struct of its own, as the decoder
			// would make it (a fresh value per name).
			var inner map[string]toml.Primitive
			if err := d.md.PrimitiveDecode(prim, &inner); err == nil {
				if f.IsNil() {
					f.Set(reflect.MakeMapWithSize(f.Type(), len(tables)))
				}
				for name, ep := range inner {
					ekey := key + "." + name
					d.at[ekey] = spot{d.file, lineOf(d.md, ep)}
					ev := reflect.New(f.Type().Elem()).Elem()
					var eraw any
					_ = d.md.PrimitiveDecode(ep, &eraw)
					var fields map[string]toml.Primitive
					if _, isTable := eraw.(map[string]any); !isTable || d.md.PrimitiveDecode(ep, &fields) != nil {
						d.bad[ekey] = true
						d.probs = append(d.probs, d.typeProblem(ekey, d.at[ekey].line, ev.Type(), eraw, errProbe))
						continue
					}
					d.table(fields, ev, ekey+".")
					f.SetMapIndex(reflect.ValueOf(name), ev)
				}
				continue
			}
		}
		if err := d.md.PrimitiveDecode(prim, f.Addr().Interface()); err != nil {
			d.bad[key] = true
			d.probs = append(d.probs, d.typeProblem(key, line, f.Type(), raw, err))
		}
	}
}

// unknown reports key, which no field of parent holds, with the nearest
// name that one does.
func (d *decoder) unknown(key string, line int, parent reflect.Type) {
	name := key[strings.LastIndexByte(key, '.')+1:]
	var msg string
	table := !strings.Contains(key, ".")
	if table {
		msg = fmt.Sprintf("unknown table [%s]", key)
	} else {
		msg = fmt.Sprintf("unknown key %q", key)
	}
	if near := nearest(name, tagsOf(parent)); near != "" {
		if table {
			msg += fmt.Sprintf(": did you mean [%s]?", near)
		} else {
			msg += fmt.Sprintf(": did you mean %q?", strings.TrimSuffix(key, name)+near)
		}
	} else {
		msg += " (config.example.toml has every key)"
	}
	d.probs = append(d.probs, Problem{File: d.file, Line: line, Msg: msg})
}

// libraryType reads the decoder's "incompatible types" message for a value
// deeper than the key decoded (a pin's value, an upstream's timeout):
// `[line N ](last key "K"): incompatible types: TOML value has type T;
// destination has type D`.
func libraryType(msg string) (line int, key, have, dest string, ok bool) {
	head, tail, found := strings.Cut(msg, `(last key "`)
	if !found {
		return 0, "", "", "", false
	}
	key, tail, found = strings.Cut(tail, `"): incompatible types: TOML value has type `)
	if !found || key == "" {
		return 0, "", "", "", false
	}
	have, dest, found = strings.Cut(tail, "; destination has type ")
	if !found || have == "" || dest == "" {
		return 0, "", "", "", false
	}
	if n, ok := strings.CutPrefix(strings.TrimSpace(head[max(0, strings.LastIndex(head, "line ")):]), "line "); ok {
		line, _ = strconv.Atoi(n)
	}
	return line, key, have, dest, true
}

// typeProblem says in plain words what key wants and what it got.
func (d *decoder) typeProblem(key string, line int, t reflect.Type, raw any, err error) Problem {
	p := Problem{File: d.file, Line: line, Key: key}
	if !sameShape(t, raw) {
		p.Msg = fmt.Sprintf("want %s, got %s", want(t, key), got(raw))
		return p
	}
	// Right shape, wrong inside: a list or table element, or a string the
	// type's own parser refused (a duration): name what the decoder names.
	var perr toml.ParseError
	if errors.As(err, &perr) && !errors.Is(err, errProbe) {
		if perr.LastKey != "" && perr.LastKey != key {
			p.Key = perr.LastKey
		}
		if perr.Position.Line > 0 {
			p.Line = perr.Position.Line
		}
		p.Msg = perr.Message
		return p
	}
	if line, key, have, dest, ok := libraryType(err.Error()); ok {
		if line > 0 {
			p.Line = line
		}
		p.Key = key
		p.Msg = fmt.Sprintf("want %s, got %s", libraryName(dest), libraryName(have))
		return p
	}
	p.Msg = err.Error()
	return p
}

var (
	durationType = reflect.TypeOf(Duration(0))
	textType     = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// textual reports whether v decodes from a TOML string (a Duration).
func textual(v reflect.Value) bool { return v.Addr().Type().Implements(textType) }

// sameShape reports whether a TOML value is a list where t is a list and a
// table where t is a table: then the problem is inside it.
func sameShape(t reflect.Type, raw any) bool {
	switch raw.(type) {
	case []any, []map[string]any:
		return t.Kind() == reflect.Slice
	case map[string]any:
		return t.Kind() == reflect.Map || t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textType)
	case string:
		return t.Kind() == reflect.String || reflect.PointerTo(t).Implements(textType)
	}
	return false
}

// want describes what a field of type t takes.
func want(t reflect.Type, key string) string {
	if t == durationType {
		return `a duration like "10m"`
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return `a string in quotes, like "name"`
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.String:
			return `a list of strings, like ["a", "b"]`
		case reflect.Struct:
			return fmt.Sprintf("a list of tables, like [[%s]]", key)
		}
		return "a list, like [1, 2]"
	case reflect.Map, reflect.Struct:
		return fmt.Sprintf("a table, like [%s]", key)
	}
	return t.String()
}

// got describes a TOML value as the owner wrote it.
func got(v any) string {
	switch v := v.(type) {
	case int64:
		return fmt.Sprintf("the number %d", v)
	case float64:
		return fmt.Sprintf("the number %g", v)
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("%t", v)
	case []any, []map[string]any:
		return "a list"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date"
	}
	return fmt.Sprintf("%v", v)
}

// libraryName turns the decoder's type names into the owner's words.
func libraryName(s string) string {
	switch s {
	case "int64", "integer", "int", "int32", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float64", "float", "float32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "[]interface {}", "slice", "array":
		return "a list"
	case "map[string]interface {}", "map":
		return "a table"
	}
	return s
}

// fieldFor is the field of struct v that TOML key k fills, as the decoder
// matches it: the exact tag, else one equal but for case.
func fieldFor(v reflect.Value, k string) reflect.Value {
	if f := fieldByTag(v, k); f.IsValid() {
		return f
	}
	t := v.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); strings.EqualFold(name, k) {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// tagsOf are the TOML keys of struct type t; none for another type.
func tagsOf(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// typeAt is the Go type that holds the TOML table at path below t: list
// elements and map values are looked through (a map's key is a name the
// owner chose: profiles.NAME).
func typeAt(t reflect.Type, path toml.Key) reflect.Type {
	for _, k := range path {
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
		case reflect.Struct:
			f := fieldFor(reflect.New(t).Elem(), k)
			if !f.IsValid() {
				return nil
			}
			t = f.Type()
		default:
			return nil
		}
	}
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// pinUses are the BCM pins that carry a bus on a Raspberry Pi, and which.
var pinUses = map[int]string{
	0: "I²C0 SDA (the HAT ID EEPROM)", 1: "I²C0 SCL (the HAT ID EEPROM)",
	2: "I²C1 SDA", 3: "I²C1 SCL",
	7: "SPI0 CE1", 8: "SPI0 CE0", 9: "SPI0 MISO", 10: "SPI0 MOSI", 11: "SPI0 SCLK",
	14: "UART TX", 15: "UART RX",
	16: "SPI1 CE2 (when SPI1 is on)", 17: "SPI1 CE1 (when SPI1 is on)", 18: "SPI1 CE0 (when SPI1 is on)",
	19: "SPI1 MISO (when SPI1 is on)", 20: "SPI1 MOSI (when SPI1 is on)", 21: "SPI1 SCLK (when SPI1 is on)",
}

// PinUse is the bus a BCM pin carries ("I²C1 SDA"), or "".
func PinUse(pin int) string { return pinUses[pin] }

// pinWarnings are the configured pins that carry I²C, SPI or UART: driving
// one as an output (or holding it as a button) fights the bus, and a pin
// can look free in the file while a HAT uses it. SPI1's pins are only
// named when the pin is an output: 17 and 18 are the usual relay and fan
// pins of boards without SPI1. A warning, not an error: the owner may have
// turned the bus off on purpose.
func (c Config) pinWarnings() []string {
	var w []string
	warn := func(what string, pin int) {
		use := PinUse(pin)
		if use == "" || (pin >= 16 && pin <= 21) {
			return
		}
		w = append(w, fmt.Sprintf("%s is GPIO%d, which carries %s: it fights the bus while that is on (dtparam in /boot/firmware/config.txt); pick another pin, or ignore this if the bus is off", what, pin, use))
	}
	for i, p := range c.GPIO.Pins {
		switch {
		case p.PWM:
			warn(fmt.Sprintf("gpio.pins[%d] (%q, pwm)", i, p.Name), p.Pin)
		case p.Mode == "output":
			warn(fmt.Sprintf("gpio.pins[%d] (%q, output)", i, p.Name), p.Pin)
		}
	}
	if c.Guard.Button.Wired() {
		warn("guard.button.pin", c.Guard.Button.Pin)
		if c.Guard.Button.LED >= 0 {
			warn("guard.button.led", c.Guard.Button.LED)
		}
	}
	return w
}

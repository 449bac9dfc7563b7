// Package promtext writes the Prometheus text exposition format (version
// 0.0.4), which every Prometheus, VictoriaMetrics and Grafana Agent scrapes.
//
// It exists instead of a metrics library because of what each costs on a
// Pi, measured on the stripped armv6 build of raspi-mcp (13,435,042 bytes
// before): client_golang v1.25 adds 2,097,152 bytes (+15.6%, protobuf and
// client_model come along) and would raise the module to go 1.26;
// VictoriaMetrics/metrics v1.44 adds 65,536 bytes but writes "# HELP name"
// with no text, which `promtool check metrics` rejects, so its output would
// need a writer like this one anyway. The format is small and fixed, the
// agent's counters are plain atomics, and the output is checked by promtool
// and scraped by a real Prometheus in the tests.
//
// A Writer appends to one buffer and allocates nothing per sample once the
// buffer has grown, so a scrape on a Pi Zero costs little more than reading
// the values.
package promtext

import (
	"math"
	"strconv"
)

// ContentType is the media type of what a Writer produces.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Metric types, as the TYPE line spells them.
const (
	Gauge   = "gauge"
	Counter = "counter"
)

// Writer builds one exposition. The zero value is ready to use.
type Writer struct {
	b []byte
}

// Reset empties the buffer and keeps its memory for the next scrape.
func (w *Writer) Reset() { w.b = w.b[:0] }

// Bytes is what was written since the last Reset.
func (w *Writer) Bytes() []byte { return w.b }

// Family starts a metric family: its HELP and TYPE lines. Every sample of
// the family must follow before the next Family, and a family must appear
// once, as the format requires. name is a constant of the caller's and is
// not checked here; the tests run promtool over the whole output.
func (w *Writer) Family(name, typ, help string) {
	w.b = append(w.b, "# HELP "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = appendEscaped(w.b, help, false)
	w.b = append(w.b, "\n# TYPE "...)
	w.b = append(w.b, name...)
	w.b = append(w.b, ' ')
	w.b = append(w.b, typ...)
	w.b = append(w.b, '\n')
}

// Float writes one sample. labels are name, value pairs; values are
// escaped, names must be valid label names.
func (w *Writer) Float(name string, v float64, labels ...string) {
	w.sampleName(name, labels)
	switch {
	case math.IsNaN(v):
		w.b = append(w.b, "NaN"...)
	case math.IsInf(v, 1):
		w.b = append(w.b, "+Inf"...)
	case math.IsInf(v, -1):
		w.b = append(w.b, "-Inf"...)
	default:
		w.b = strconv.AppendFloat(w.b, v, 'g', -1, 64)
	}
	w.b = append(w.b, '\n')
}

// Uint writes one sample of an integer value, exact however large (a
// float64 would round a byte counter past 2^53).
func (w *Writer) Uint(name string, v uint64, labels ...string) {
	w.sampleName(name, labels)
	w.b = strconv.AppendUint(w.b, v, 10)
	w.b = append(w.b, '\n')
}

// Bool writes 1 for true and 0 for false, the format's way to say yes or no.
func (w *Writer) Bool(name string, v bool, labels ...string) {
	var n uint64
	if v {
		n = 1
	}
	w.Uint(name, n, labels...)
}

func (w *Writer) sampleName(name string, labels []string) {
	w.b = append(w.b, name...)
	if len(labels) >= 2 {
		w.b = append(w.b, '{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, labels[i]...)
			w.b = append(w.b, `="`...)
			w.b = appendEscaped(w.b, labels[i+1], true)
			w.b = append(w.b, '"')
		}
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ' ')
}

// appendEscaped escapes backslash and newline, and in label values the
// double quote too, as the format wants.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

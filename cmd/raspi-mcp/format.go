package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The CLI's human output formats every value the same way, whichever
// command prints it: a unit after a space, three significant digits and no
// exponent ("10.2 KB/s", "48.3 °C", "37 %", "0.52"). Rates are decimal
// (KB/s = 1000 B/s, as network tools count); sizes in memory and on disk are
// binary (GiB, as free -h and df -h print them on the Pi).

// metricUnit is what a metric's value counts, from its name; "" for load
// averages, counts and flags.
func metricUnit(metric string) string {
	switch {
	case strings.HasSuffix(metric, "_percent"):
		return "%"
	case strings.HasSuffix(metric, "_celsius"):
		return "°C"
	case strings.HasSuffix(metric, "_per_sec") && strings.Contains(metric, "bytes"):
		return "B/s" // bytes_per_sec, net's bytes_recv_per_sec and bytes_sent_per_sec
	case strings.HasSuffix(metric, "_mbps"):
		return "Mbit/s"
	case strings.HasSuffix(metric, "_mb_per_sec"), strings.HasSuffix(metric, "mb_s"):
		return "MB/s"
	case strings.HasSuffix(metric, "_per_sec"), strings.HasSuffix(metric, "iops"):
		return "/s"
	case strings.HasSuffix(metric, "_mb"):
		return "MB"
	case strings.HasSuffix(metric, "_bytes"):
		return "B"
	case strings.HasSuffix(metric, "_seconds"):
		return "s"
	case strings.HasSuffix(metric, "_mhz"):
		return "MHz"
	case strings.HasSuffix(metric, "_volts"):
		return "V"
	}
	return ""
}

// formatMetric is v in metric's unit: formatValue(v, metricUnit(metric)).
func formatMetric(v float64, metric string) string { return formatValue(v, metricUnit(metric)) }

// formatValue formats v for a person in unit: byte counts and rates are
// scaled (B/s to KB/s, MB/s, GB/s; B to KiB, MiB, GiB), temperatures keep
// one decimal, percentages none from 10 up and one below, everything else three
// significant digits. unit "" prints the bare number.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	switch unit {
	case "B/s":
		return scaled(v, 1000, []string{"B/s", "KB/s", "MB/s", "GB/s"})
	case "MB/s":
		return scaled(v*1e6, 1000, []string{"B/s", "KB/s", "MB/s", "GB/s"})
	case "B":
		return scaled(v, 1024, []string{"B", "KiB", "MiB", "GiB", "TiB"})
	case "MB":
		return scaled(v*(1<<20), 1024, []string{"B", "KiB", "MiB", "GiB", "TiB"})
	case "°C":
		return strconv.FormatFloat(v, 'f', 1, 64) + " °C"
	case "%":
		if math.Abs(v) >= 10 {
			return strconv.FormatFloat(v, 'f', 0, 64) + " %"
		}
		return sig3(math.Round(v*10)/10) + " %"
	}
	s := sig3(v)
	if unit != "" {
		s += " " + unit
	}
	return s
}

// scaled divides v by step until it is below step and names the unit.
func scaled(v, step float64, units []string) string {
	i := 0
	for math.Abs(v) >= step && i < len(units)-1 {
		v /= step
		i++
	}
	if i == 0 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " " + units[0]
	}
	return sig3(v) + " " + units[i]
}

// sig3 is v with three significant digits and no exponent, without
// trailing zeros: 1800, 48.3, 0.52, 0.00123.
func sig3(v float64) string {
	a := math.Abs(v)
	var d int
	switch {
	case a == 0 || a >= 100:
		d = 0
	case a >= 10:
		d = 1
	case a >= 1:
		d = 2
	default:
		d = 2 - int(math.Floor(math.Log10(a)))
	}
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// formatUptime is a duration as a person says it: "45s", "12m", "3h 05m",
// "4d 2h".
func formatUptime(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatSpan is a chart's span or step, shortest first: "6h", "90m", "4m30s", "10s".
func formatSpan(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// bar is frac (0..1) of width cells, in eighths: "█████▍░░░░".
func bar(frac float64, width int) string {
	if width <= 0 {
		return ""
	}
	frac = math.Max(0, math.Min(1, frac))
	eighths := int(math.Round(frac * float64(width*8)))
	full, part := eighths/8, eighths%8
	var b strings.Builder
	b.WriteString(strings.Repeat("█", full))
	n := full
	if part > 0 {
		b.WriteRune([]rune(" ▏▎▍▌▋▊▉")[part])
		n++
	}
	b.WriteString(strings.Repeat("░", width-n))
	return b.String()
}

// sparkLevels are a sparkline's eight heights, lowest first.
var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// sparkRune is v's height between lo (▁) and hi (█); all ▁ when hi <= lo.
func sparkRune(v, lo, hi float64) rune {
	if !(hi > lo) {
		return sparkLevels[0]
	}
	k := int(math.Round((v - lo) / (hi - lo) * float64(len(sparkLevels)-1)))
	return sparkLevels[max(0, min(len(sparkLevels)-1, k))]
}

// opensslFingerprint turns the agent's "sha256:16abed…" into the form
// openssl x509 -fingerprint -sha256 prints, "16:AB:ED:…", so a person can
// compare the two by eye; ok is false for anything else.
func opensslFingerprint(fp string) (string, bool) {
	hexs, ok := strings.CutPrefix(strings.TrimSpace(fp), "sha256:")
	if !ok || len(hexs) != 64 {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(hexs); i += 2 {
		if _, err := strconv.ParseUint(hexs[i:i+2], 16, 8); err != nil {
			return "", false
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strings.ToUpper(hexs[i : i+2]))
	}
	return b.String(), true
}

// wrapText breaks s into lines of at most width columns at spaces (a word
// longer than width stands alone on its line).
func wrapText(s string, width int) []string {
	if width < 1 {
		width = 1
	}
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}

// padRight pads s with spaces to n columns (runes: the CLI prints no wide characters).
func padRight(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// output is how a command prints for a person: how wide, and whether it may colour.
type output struct {
	width int  // columns
	color bool // ANSI colours
}

// stdoutOutput is stdout's: its terminal's width (def when it is not a
// terminal or says nothing), colour only on a terminal and when NO_COLOR
// is unset or empty (no-color.org).
func stdoutOutput(def int) output {
	w, tty := termWidth(os.Stdout)
	o := output{width: def}
	switch c, err := strconv.Atoi(os.Getenv("COLUMNS")); {
	case tty && w > 0:
		o.width = w
	case !tty && err == nil && c >= 40:
		// Piped into something that says how wide it shows the output
		// (a script, the demo's indented block): as wide as that.
		o.width = c
	}
	o.color = tty && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
	return o
}

// ANSI colours for paint.
const (
	red    = "31"
	yellow = "33"
	green  = "32"
	bold   = "1"
	dim    = "2"
)

// paint wraps s in an SGR colour when o may colour.
func (o output) paint(code, s string) string {
	if !o.color || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

package sysinfo

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Meminfo holds the /proc/meminfo fields the agent uses, in bytes.
type Meminfo struct {
	MemTotal, MemFree, MemAvailable, Buffers, Cached uint64
	SwapTotal, SwapFree                              uint64
	// HasMemAvailable is false on kernels before 3.14, which lack the
	// field; Available then estimates it.
	HasMemAvailable bool
}

// Available is MemAvailable, or MemFree+Buffers+Cached (capped at MemTotal)
// on kernels that do not report it.
func (m Meminfo) Available() uint64 {
	if m.HasMemAvailable {
		return m.MemAvailable
	}
	return min(addSat(addSat(m.MemFree, m.Buffers), m.Cached), m.MemTotal)
}

// Used is what free(1) calls used: MemTotal minus Available.
func (m Meminfo) Used() uint64 { return subSat(m.MemTotal, m.Available()) }

// SwapUsed is SwapTotal minus SwapFree.
func (m Meminfo) SwapUsed() uint64 { return subSat(m.SwapTotal, m.SwapFree) }

// ParseMeminfo parses /proc/meminfo. Unknown fields are ignored so new
// kernels do not break it; MemTotal is required.
func ParseMeminfo(b []byte) (Meminfo, error) {
	var m Meminfo
	haveTotal := false
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			return Meminfo{}, fmt.Errorf("sysinfo: parse /proc/meminfo: line %d %q: no ':'", n, line)
		}
		var dst *uint64
		switch key {
		case "MemTotal":
			dst, haveTotal = &m.MemTotal, true
		case "MemFree":
			dst = &m.MemFree
		case "MemAvailable":
			dst, m.HasMemAvailable = &m.MemAvailable, true
		case "Buffers":
			dst = &m.Buffers
		case "Cached":
			dst = &m.Cached
		case "SwapTotal":
			dst = &m.SwapTotal
		case "SwapFree":
			dst = &m.SwapFree
		default:
			continue
		}
		v, err := parseKB(rest)
		if err != nil {
			return Meminfo{}, fmt.Errorf("sysinfo: parse /proc/meminfo: field %q: %w", key, err)
		}
		*dst = v
	}
	if !haveTotal {
		return Meminfo{}, errors.New(`sysinfo: parse /proc/meminfo: field "MemTotal" missing`)
	}
	return m, nil
}

// parseKB turns "  3884432 kB" into bytes.
func parseKB(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("value %q: want \"<n> kB\"", strings.TrimSpace(s))
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, err
	}
	if v > math.MaxUint64/1024 {
		return 0, fmt.Errorf("value %q kB overflows bytes", f[0])
	}
	return v * 1024, nil
}

// CPUTimes is the aggregate "cpu" line of /proc/stat, in USER_HZ ticks.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
	// Guest and GuestNice are already included in User and Nice by the
	// kernel; they are kept for completeness and never added again.
	Guest, GuestNice uint64
}

// Busy is all non-idle time; idle and iowait are both waiting. The sum
// saturates instead of wrapping, so absurd input cannot make a later reading
// look smaller than an earlier one.
func (c CPUTimes) Busy() uint64 {
	return addSat(addSat(addSat(addSat(addSat(c.User, c.Nice), c.System), c.IRQ), c.SoftIRQ), c.Steal)
}

// Total is Busy plus idle and iowait, saturating like Busy.
func (c CPUTimes) Total() uint64 { return addSat(addSat(c.Busy(), c.Idle), c.IOWait) }

// ParseStat parses the aggregate "cpu" line of /proc/stat. Kernels before
// 2.6 have only four columns; missing later columns read as zero.
func ParseStat(b []byte) (CPUTimes, error) {
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		f = f[1:]
		if len(f) < 4 {
			return CPUTimes{}, fmt.Errorf("sysinfo: parse /proc/stat: cpu line has %d fields, want at least 4", len(f))
		}
		var c CPUTimes
		names := [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"}
		dst := [...]*uint64{&c.User, &c.Nice, &c.System, &c.Idle, &c.IOWait, &c.IRQ, &c.SoftIRQ, &c.Steal, &c.Guest, &c.GuestNice}
		for i := 0; i < len(dst) && i < len(f); i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("sysinfo: parse /proc/stat: field %q: %w", names[i], err)
			}
			*dst[i] = v
		}
		return c, nil
	}
	return CPUTimes{}, errors.New(`sysinfo: parse /proc/stat: no "cpu" line`)
}

// CPUUsagePercent is the busy share of the time between two readings, like
// top. ok is false when the counters went backwards as a whole (a reading
// from another boot), in which case the pair is useless. Single columns that
// step back, as iowait does on NO_HZ kernels, count as zero.
func CPUUsagePercent(prev, cur CPUTimes) (pct float64, ok bool) {
	if cur.Total() < prev.Total() {
		return 0, false
	}
	busy := subSat(cur.User, prev.User)
	for _, d := range [...]uint64{
		subSat(cur.Nice, prev.Nice), subSat(cur.System, prev.System),
		subSat(cur.IRQ, prev.IRQ), subSat(cur.SoftIRQ, prev.SoftIRQ), subSat(cur.Steal, prev.Steal),
	} {
		busy = addSat(busy, d)
	}
	idle := addSat(subSat(cur.Idle, prev.Idle), subSat(cur.IOWait, prev.IOWait))
	total := addSat(busy, idle)
	if total == 0 {
		return 0, true
	}
	return min(max(100*float64(busy)/float64(total), 0), 100), true
}

// Loadavg is the first three fields of /proc/loadavg.
type Loadavg struct {
	Load1, Load5, Load15 float64
}

// ParseLoadavg parses /proc/loadavg ("0.42 0.35 0.30 1/312 4821").
func ParseLoadavg(b []byte) (Loadavg, error) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return Loadavg{}, fmt.Errorf("sysinfo: parse /proc/loadavg: %d fields, want at least 3", len(f))
	}
	var l Loadavg
	for i, dst := range [...]*float64{&l.Load1, &l.Load5, &l.Load15} {
		v, err := parseNonNegFloat(f[i])
		if err != nil {
			return Loadavg{}, fmt.Errorf("sysinfo: parse /proc/loadavg: field %q: %w", [...]string{"load1", "load5", "load15"}[i], err)
		}
		*dst = v
	}
	return l, nil
}

// ParseUptime parses /proc/uptime and returns the first field, seconds
// since boot.
func ParseUptime(b []byte) (float64, error) {
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, errors.New("sysinfo: parse /proc/uptime: empty")
	}
	v, err := parseNonNegFloat(f[0])
	if err != nil {
		return 0, fmt.Errorf("sysinfo: parse /proc/uptime: field \"uptime\": %w", err)
	}
	return v, nil
}

// parseNonNegFloat rejects what ParseFloat accepts but no kernel prints:
// NaN, infinities and negatives.
func parseNonNegFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("value %q out of range", s)
	}
	return v, nil
}

// CPUInfo is what /proc/cpuinfo says about the board.
type CPUInfo struct {
	Cores     int    // number of "processor" lines
	ModelName string // first "model name" (x86, 32-bit ARM); "" if absent
	Hardware  string // "BCM2835" on Pi kernels; "" if absent
	Revision  string // Pi board revision code, e.g. "d03114"
	Serial    string
	Model     string // "Raspberry Pi 4 Model B Rev 1.4" on Pi kernels
}

// ParseCPUInfo parses /proc/cpuinfo. Keys are matched case-sensitively
// because x86 has an unrelated lower-case "model" (a number). Lines without
// a colon are skipped: the format differs per architecture.
func ParseCPUInfo(b []byte) (CPUInfo, error) {
	var c CPUInfo
	fields := 0
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		fields++
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "processor":
			c.Cores++
		case "model name":
			if c.ModelName == "" {
				c.ModelName = val
			}
		case "Hardware":
			c.Hardware = val
		case "Revision":
			c.Revision = val
		case "Serial":
			c.Serial = val
		case "Model":
			c.Model = val
		}
	}
	if fields == 0 {
		return CPUInfo{}, errors.New(`sysinfo: parse /proc/cpuinfo: no "key: value" lines`)
	}
	return c, nil
}

// ParseOSRelease parses os-release(5): KEY=value lines, values optionally
// in single or double quotes (with \" \\ \$ \` escapes inside double
// quotes), '#' comments. A bad line does not hide the good ones: the pairs
// that parsed are returned together with an error naming the first bad line.
func ParseOSRelease(b []byte) (map[string]string, error) {
	m := make(map[string]string)
	var firstErr error
	n := 0
	for line := range strings.Lines(string(b)) {
		n++
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, err := parseOSReleaseLine(line)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("sysinfo: parse os-release: line %d: %w", n, err)
			}
			continue
		}
		m[key] = val
	}
	return m, firstErr
}

func parseOSReleaseLine(line string) (key, val string, err error) {
	key, raw, ok := strings.Cut(line, "=")
	if !ok {
		return "", "", errors.New("no '='")
	}
	if !validEnvKey(key) {
		return "", "", fmt.Errorf("key %q invalid", key)
	}
	if raw == "" || (raw[0] != '"' && raw[0] != '\'') {
		return key, raw, nil
	}
	q := raw[0]
	var sb strings.Builder
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == q:
			if i != len(raw)-1 {
				return "", "", fmt.Errorf("key %q: text after closing quote", key)
			}
			return key, sb.String(), nil
		case c == '\\' && q == '"' && i+1 < len(raw) && strings.IndexByte("\"\\$`", raw[i+1]) >= 0:
			i++
			sb.WriteByte(raw[i])
		default:
			sb.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("key %q: unterminated quote", key)
}

func validEnvKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range []byte(k) {
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseThrottled accepts both the sysfs form ("50005\n": hex without 0x)
// and vcgencmd's "throttled=0x50005". Source is left for the caller, which
// knows where s came from.
func ParseThrottled(s string) (Throttle, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(t, "throttled=")
	if len(t) > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X') {
		t = t[2:]
	}
	v, err := strconv.ParseUint(t, 16, 32)
	if err != nil {
		return Throttle{}, fmt.Errorf("sysinfo: parse get_throttled %q: %w", s, err)
	}
	return ThrottleFromRaw(uint32(v)), nil
}

// ParseVcgencmdTemp parses `vcgencmd measure_temp` output ("temp=47.2'C").
func ParseVcgencmdTemp(s string) (float64, error) {
	t := strings.TrimSpace(s)
	t, ok := strings.CutPrefix(t, "temp=")
	if ok {
		t, ok = strings.CutSuffix(t, "'C")
	}
	if !ok {
		return 0, fmt.Errorf("sysinfo: parse vcgencmd measure_temp %q: want \"temp=<n>'C\"", s)
	}
	v, err := strconv.ParseFloat(t, 64)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = errors.New("not finite")
	}
	if err != nil {
		return 0, fmt.Errorf("sysinfo: parse vcgencmd measure_temp %q: %w", s, err)
	}
	return v, nil
}

// parseMilliCelsius parses thermal_zone and hwmon temperatures, which the
// kernel reports in millidegrees.
func parseMilliCelsius(s string) (float64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, err
	}
	return float64(v) / 1000, nil
}

// parseCPUList counts the CPUs in a kernel cpu list such as "0-3,6".
func parseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("sysinfo: parse cpu list: empty")
	}
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		// The bound keeps n from overflowing; no kernel has a million CPUs.
		if err != nil || a < 0 || b < a || b-a >= 1<<20 || n >= 1<<20 {
			return 0, fmt.Errorf("sysinfo: parse cpu list %q: bad range %q", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

func subSat(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func addSat(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

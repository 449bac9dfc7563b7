package sysinfo

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// NetCounters are the cumulative /proc/net/dev counters of one interface.
type NetCounters struct {
	Name string
	// RxDrops is what the kernel prints: rx_dropped plus rx_missed_errors
	// (packets the NIC had no room for).
	RxBytes, RxPackets, RxErrors, RxDrops uint64
	TxBytes, TxPackets, TxErrors, TxDrops uint64
}

// DiskCounters are the cumulative /proc/diskstats counters of one block
// device.
type DiskCounters struct {
	Name string
	// Sectors are always 512 bytes in /proc/diskstats, whatever the
	// device's logical block size.
	ReadsCompleted, SectorsRead, WritesCompleted, SectorsWritten uint64
	IOTicksMs                                                    uint64 // "time spent doing I/Os (ms)", the 13th column of the line
	InFlight                                                     uint64 // I/Os in progress at the reading, the 12th column: a level, not a counter
}

// Counters is one reading of the network and disk counters. It is only
// useful paired with another reading: see [Rates].
type Counters struct {
	Time time.Time
	Net  []NetCounters  // sorted by name (naturally: eth2 before eth10); loopback "lo" excluded
	Disk []DiskCounters // whole disks only, sorted by name like Net; see [Linux.Counters] for which devices count
}

// CounterSource is implemented by [*Linux] and [*Sim]. It is separate from
// [Source] so that a Source need not provide counters: callers check for it
// with a type assertion.
type CounterSource interface {
	Counters(ctx context.Context) (Counters, error)
}

var (
	_ CounterSource = (*Linux)(nil)
	_ CounterSource = (*Sim)(nil)
)

// diskSectorBytes is the unit of the sector columns of /proc/diskstats,
// fixed by the kernel regardless of the device.
const diskSectorBytes = 512

// netDevColumns is the number of counters per interface in /proc/net/dev
// (8 receive, 8 transmit).
const netDevColumns = 16

// ParseNetDev parses /proc/net/dev. Interfaces are returned in file order
// (ifindex order), loopback included: choosing what to show is
// [Linux.Counters]' job. The two header lines are recognised by their '|'.
// Columns beyond the 16 the kernel has printed since 2.6 are ignored, so an
// extended future format still parses.
func ParseNetDev(b []byte) ([]NetCounters, error) {
	s := string(b)
	out := make([]NetCounters, 0, strings.Count(s, "\n"))
	n := 0
	for line := range strings.Lines(s) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// Old kernels printed "%6s:%8lu", so a long name can touch its
		// first number; cutting at ':' handles that, and Linux interface
		// names cannot contain ':' (dev_valid_name).
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			if strings.Contains(line, "|") {
				continue // "Inter-|   Receive ..." and " face |bytes ..."
			}
			return nil, fmt.Errorf("sysinfo: parse /proc/net/dev: line %d %q: no ':'", n, line)
		}
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("sysinfo: parse /proc/net/dev: line %d %q: bad interface name %q", n, line, name)
		}
		var v [netDevColumns]uint64
		if err := parseColumns(rest, v[:]); err != nil {
			return nil, fmt.Errorf("sysinfo: parse /proc/net/dev: line %d %q: %w", n, line, err)
		}
		// Columns: rx bytes packets errs drop fifo frame compressed
		// multicast, tx bytes packets errs drop fifo colls carrier
		// compressed.
		out = append(out, NetCounters{
			Name:    name,
			RxBytes: v[0], RxPackets: v[1], RxErrors: v[2], RxDrops: v[3],
			TxBytes: v[8], TxPackets: v[9], TxErrors: v[10], TxDrops: v[11],
		})
	}
	return out, nil
}

// diskstatsMinColumns is the number of counters on a line of the oldest
// format still in use (before 4.18). 4.18 appended 4 discard counters (18
// fields on the line with major, minor and name) and 5.5 two flush counters
// (20 fields). The kernel only ever appends, so more columns are accepted
// and ignored.
const diskstatsMinColumns = 11

// ParseDiskstats parses /proc/diskstats in any of its formats (14, 18 or 20
// fields per line). Every device is returned, in file order, partitions and
// virtual devices included: choosing what counts as a disk is
// [Linux.Counters]' job, since it needs sys/block.
func ParseDiskstats(b []byte) ([]DiskCounters, error) {
	s := string(b)
	out := make([]DiskCounters, 0, strings.Count(s, "\n"))
	n := 0
	for line := range strings.Lines(s) {
		n++
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		major, rest := nextField(line)
		minor, rest := nextField(rest)
		name, rest := nextField(rest)
		if name == "" {
			return nil, fmt.Errorf("sysinfo: parse /proc/diskstats: line %d %q: want \"<major> <minor> <name> <counters...>\"", n, line)
		}
		for _, f := range [...]struct{ what, v string }{{"major", major}, {"minor", minor}} {
			if _, err := strconv.ParseUint(f.v, 10, 32); err != nil {
				return nil, fmt.Errorf("sysinfo: parse /proc/diskstats: line %d %q: %s number %q not a number", n, line, f.what, f.v)
			}
		}
		// Columns: reads, reads merged, sectors read, ms reading,
		// writes, writes merged, sectors written, ms writing,
		// in flight, ms doing I/O, weighted ms doing I/O.
		var v [diskstatsMinColumns]uint64
		if err := parseColumns(rest, v[:]); err != nil {
			return nil, fmt.Errorf("sysinfo: parse /proc/diskstats: line %d %q: %w (a line has 14, 18 or 20 fields)", n, line, err)
		}
		out = append(out, DiskCounters{
			Name:           name,
			ReadsCompleted: v[0], SectorsRead: v[2],
			WritesCompleted: v[4], SectorsWritten: v[6],
			IOTicksMs: v[9], InFlight: v[8],
		})
	}
	return out, nil
}

// parseColumns fills dst from the first len(dst) whitespace-separated
// unsigned numbers of s, without allocating: this runs on every sample.
// Further columns are ignored.
func parseColumns(s string, dst []uint64) error {
	for i := range dst {
		var f string
		f, s = nextField(s)
		if f == "" {
			return fmt.Errorf("%d counters, want at least %d", i, len(dst))
		}
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return fmt.Errorf("counter %d %q not a number", i+1, f)
		}
		dst[i] = v
	}
	return nil
}

// nextField splits off the first space- or tab-separated field of s, like
// one step of strings.Fields.
func nextField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t")
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// isWholeDisk decides whether a /proc/diskstats device is reported; the
// rules and their reasons are in the doc of [Linux.Counters]. sysBlock is
// the set of sys/block names, nil when there is no sysfs to ask.
func isWholeDisk(name string, sysBlock map[string]bool) bool {
	if isVirtualDisk(name) {
		return false
	}
	if sysBlock != nil {
		return sysBlock[name]
	}
	return !looksLikePartition(name)
}

// isVirtualDisk matches the device families that are not storage.
func isVirtualDisk(name string) bool {
	for _, p := range [...]string{"loop", "ram", "zram"} {
		if rest, ok := strings.CutPrefix(name, p); ok && isDecimal(rest) {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(name, "mmcblk"); ok {
		num, area := splitDigits(rest)
		if num != "" && (area == "rpmb" || (strings.HasPrefix(area, "boot") && isDecimal(area[len("boot"):]))) {
			return true
		}
	}
	return false
}

// looksLikePartition knows the kernel's partition names: a "p" between two
// numbers for devices whose names end in a digit (mmcblk0p1, nvme0n1p2,
// md0p1, nbd0p1) and a plain number after the letters otherwise (sda1,
// vda15, xvda1, hda1).
func looksLikePartition(name string) bool {
	i := len(name)
	for i > 0 && isDigit(name[i-1]) {
		i--
	}
	if i == len(name) || i == 0 {
		return false
	}
	base := name[:i]
	if len(base) >= 2 && base[len(base)-1] == 'p' && isDigit(base[len(base)-2]) {
		return true
	}
	for _, p := range [...]string{"sd", "vd", "hd", "xvd"} {
		if letters, ok := strings.CutPrefix(base, p); ok && letters != "" && isLower(letters) {
			return true
		}
	}
	return false
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isLower(s string) bool {
	for i := range len(s) {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

// NetRates are per-second rates of one interface between two readings.
type NetRates struct {
	Name                             string
	RxBytesPerSec, TxBytesPerSec     float64
	RxPacketsPerSec, TxPacketsPerSec float64
	RxErrorsPerSec, TxErrorsPerSec   float64
	RxDropsPerSec, TxDropsPerSec     float64
}

// DiskRates are per-second rates of one disk between two readings.
type DiskRates struct {
	Name                              string
	ReadBytesPerSec, WriteBytesPerSec float64
	ReadIOPS, WriteIOPS               float64
	BusyPercent                       float64 // share of the interval with I/O in flight, 0..100
	QueueDepth                        float64 // I/Os in flight at the later reading (a level, not a rate)
}

// Rate limits beyond which a counter delta is taken for a reset rather than
// traffic. They are far above any Pi (or most servers) so real traffic is
// never discarded, yet far below what a misread wrap produces.
const (
	maxBytesPerSec = 100e9 / 8 // 100 Gbit/s
	maxCountPerSec = 1e9       // packets, errors, drops, I/Os, and I/O milliseconds
)

// Rates computes per-second rates between two readings of the same
// machine. The interval is cur.Time - prev.Time (using the monotonic clock
// when both readings carry it); when it is not positive there are no rates
// and both results are nil. Results follow cur's order. An interface or
// disk present in only one reading (it appeared or vanished) has no rate
// this time; it gets one from the next pair.
//
// A counter that went backwards is assumed to have wrapped once. The width
// is guessed from the values: when both readings fit in 32 bits it is a
// 32-bit wrap (32-bit ARM kernels keep many counters in an unsigned long,
// and some network drivers do on any kernel), otherwise a 64-bit one. If
// the resulting rate is absurd, more than 100 Gbit/s for bytes or 1e9/s for
// anything counted, the counter was reset instead (interface re-created,
// driver reloaded, disk re-plugged) and its rate is 0 for this interval.
// The limit applies to every delta, not only wrapped ones. A reset of a
// counter below 2^32 cannot be told from a 32-bit wrap once the interval is
// long enough for a 2^32 step to look plausible (about 4.3 s for counts,
// 0.35 s for bytes), so it yields one wrong rate; the next pair is right
// again.
//
// Disk bytes are sectors * 512. BusyPercent is the growth of the I/O time
// counter over the interval, clamped to 0..100 because the kernel accounts
// it in jiffies and can run slightly ahead of the wall clock.
func Rates(prev, cur Counters) (net []NetRates, disk []DiskRates) {
	secs := cur.Time.Sub(prev.Time).Seconds()
	if secs <= 0 {
		return nil, nil
	}
	net = make([]NetRates, 0, len(cur.Net))
	m := matcher{}
	for i, c := range cur.Net {
		j, ok := m.find(i, c.Name, len(prev.Net), func(j int) string { return prev.Net[j].Name })
		if !ok {
			continue
		}
		p := prev.Net[j]
		net = append(net, NetRates{
			Name:            c.Name,
			RxBytesPerSec:   rate(p.RxBytes, c.RxBytes, 1, secs, maxBytesPerSec),
			TxBytesPerSec:   rate(p.TxBytes, c.TxBytes, 1, secs, maxBytesPerSec),
			RxPacketsPerSec: rate(p.RxPackets, c.RxPackets, 1, secs, maxCountPerSec),
			TxPacketsPerSec: rate(p.TxPackets, c.TxPackets, 1, secs, maxCountPerSec),
			RxErrorsPerSec:  rate(p.RxErrors, c.RxErrors, 1, secs, maxCountPerSec),
			TxErrorsPerSec:  rate(p.TxErrors, c.TxErrors, 1, secs, maxCountPerSec),
			RxDropsPerSec:   rate(p.RxDrops, c.RxDrops, 1, secs, maxCountPerSec),
			TxDropsPerSec:   rate(p.TxDrops, c.TxDrops, 1, secs, maxCountPerSec),
		})
	}
	disk = make([]DiskRates, 0, len(cur.Disk))
	m = matcher{}
	for i, c := range cur.Disk {
		j, ok := m.find(i, c.Name, len(prev.Disk), func(j int) string { return prev.Disk[j].Name })
		if !ok {
			continue
		}
		p := prev.Disk[j]
		busyMsPerSec := rate(p.IOTicksMs, c.IOTicksMs, 1, secs, maxCountPerSec)
		disk = append(disk, DiskRates{
			Name:             c.Name,
			ReadBytesPerSec:  rate(p.SectorsRead, c.SectorsRead, diskSectorBytes, secs, maxBytesPerSec),
			WriteBytesPerSec: rate(p.SectorsWritten, c.SectorsWritten, diskSectorBytes, secs, maxBytesPerSec),
			ReadIOPS:         rate(p.ReadsCompleted, c.ReadsCompleted, 1, secs, maxCountPerSec),
			WriteIOPS:        rate(p.WritesCompleted, c.WritesCompleted, 1, secs, maxCountPerSec),
			BusyPercent:      min(max(busyMsPerSec/1000*100, 0), 100),
			QueueDepth:       float64(c.InFlight),
		})
	}
	return net, disk
}

// counterDelta is how far a counter moved from prev to cur, assuming at
// most one wrap; the width rule is explained at [Rates].
func counterDelta(prev, cur uint64) uint64 {
	switch {
	case cur >= prev:
		return cur - prev
	case prev <= math.MaxUint32 && cur <= math.MaxUint32:
		return cur + (1 << 32) - prev
	default:
		return cur - prev // modulo 2^64: the 64-bit wrap
	}
}

// rate is the counter's growth times unit per second, or 0 when that
// exceeds limit and so must be a reset. The product is taken in float64
// because a 64-bit wrap times 512 would overflow uint64.
func rate(prev, cur uint64, unit, secs, limit float64) float64 {
	r := float64(counterDelta(prev, cur)) * unit / secs
	if r > limit {
		return 0
	}
	return r
}

// matcher pairs entries of two readings by name. Consecutive readings
// nearly always list the same names in the same order, so it first tries
// the position that matched last time, shifted by any earlier insertion or
// removal, and only scans when that fails: linear in the usual case, with
// no map to allocate on every sample.
type matcher struct{ shift int }

func (m *matcher) find(i int, name string, n int, nameAt func(int) string) (int, bool) {
	if j := i + m.shift; j >= 0 && j < n && nameAt(j) == name {
		return j, true
	}
	for j := range n {
		if nameAt(j) == name {
			m.shift = j - i
			return j, true
		}
	}
	return 0, false
}

// Package journal reads the systemd journal for the agent.
//
// go-systemd's sdjournal binds libsystemd through cgo, which the ARM builds
// (CGO_ENABLED=0) cannot link, so [Journalctl] runs `journalctl -o json`
// and streams its output into the pure [Parse]. Everything a caller can
// influence is checked by [Query.Validate] and becomes a separate argument
// in [Args]; the text search ([Query.Grep]) is a plain substring match done
// here in Go, so neither journalctl's PCRE2 dependency nor a regular
// expression written by a model is ever involved. [Static] applies the same
// filters to entries held in memory (the simulated board and tests).
//
// The package is sized for a Pi Zero: journalctl is asked for the newest
// entries first and killed as soon as enough have been read, and every
// result is bounded by an entry count, a byte budget and a scan limit.
package journal

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Defaults and caps of a Query. The caps keep one call cheap on a Pi Zero
// and its answer small enough for a model's context.
const (
	DefaultLimit     = 100
	MaxLimit         = 1000
	DefaultMaxBytes  = 32 << 10
	DefaultScanLimit = 50000
	MaxUnits         = 16
	MaxGrep          = 200     // characters
	MaxMessage       = 4096    // bytes of one message before it is cut and "…" appended
	entryOverhead    = 64      // bytes counted per entry on top of message and unit, for MaxBytes
	maxUnitName      = 256     // systemd's UNIT_NAME_MAX
	maxLine          = 1 << 20 // longer journalctl lines are skipped (see Result.Skipped)
)

// Query selects journal entries. Beware that Priority 0 means "emerg
// only", as `journalctl -p 0` does: pass -1 for every priority.
type Query struct {
	Units     []string  // systemd units (journalctl -u, globs allowed); empty = all
	Priority  int       // show entries with priority <= this (0 emerg .. 7 debug); values outside 0..7 mean no filter
	Since     time.Time // zero = open
	Until     time.Time // zero = open
	Grep      string    // case-insensitive substring on MESSAGE, matched in Go
	Limit     int       // newest N matching entries, returned oldest first; <=0 means 100
	MaxBytes  int       // cap on the sum of len(Message)+len(Unit)+64 per entry; <=0 means 32 KiB; when hit, stop and set Truncated
	ScanLimit int       // stop after reading this many raw entries; <=0 means 50000
}

// Entry is one journal entry, reduced to what the agent shows.
type Entry struct {
	Time       time.Time // __REALTIME_TIMESTAMP (microseconds)
	Unit       string    // _SYSTEMD_UNIT, else UNIT, else "" (UNIT wins over init.scope: see Parse)
	Identifier string    // SYSLOG_IDENTIFIER
	PID        int       // _PID
	Priority   int       // PRIORITY, 6 when absent
	Level      string    // "emerg","alert","crit","err","warning","notice","info","debug"
	Message    string    // MESSAGE, valid UTF-8, at most MaxMessage bytes plus "…"
}

// Result is the answer to a Query.
type Result struct {
	Entries []Entry // oldest first
	// Truncated is set when the byte budget (MaxBytes) or the scan limit
	// (ScanLimit) stopped the query before Limit entries were found or the
	// journal was exhausted: older matching entries may exist.
	Truncated bool
	// ScanLimited says the scan limit, not the byte budget, set Truncated:
	// narrowing the time range or the units helps, a smaller Limit does not.
	ScanLimited bool
	Scanned     int // raw entries read
	Skipped     int // raw lines that could not be decoded (malformed or longer than 1 MiB)
}

// Reader answers journal queries.
type Reader interface {
	Query(ctx context.Context, q Query) (Result, error)
}

// Level returns the name of a syslog priority ("err" for 3); out-of-range
// priorities are returned as digits so nothing is lost.
func Level(priority int) string {
	switch priority {
	case 0:
		return "emerg"
	case 1:
		return "alert"
	case 2:
		return "crit"
	case 3:
		return "err"
	case 4:
		return "warning"
	case 5:
		return "notice"
	case 6:
		return "info"
	case 7:
		return "debug"
	}
	return strconv.Itoa(priority)
}

// Validate checks everything in q that reaches journalctl or costs work, so
// that no text from a caller can become a journalctl option and one query
// stays bounded.
func (q Query) Validate() error {
	if len(q.Units) > MaxUnits {
		return fmt.Errorf("journal: %d units requested, at most %d", len(q.Units), MaxUnits)
	}
	for _, u := range q.Units {
		if err := checkUnitPattern(u); err != nil {
			return err
		}
	}
	if n := utf8.RuneCountInString(q.Grep); n > MaxGrep {
		return fmt.Errorf("journal: grep text is %d characters, at most %d", n, MaxGrep)
	}
	if !utf8.ValidString(q.Grep) {
		return fmt.Errorf("journal: grep text %q is not valid UTF-8", q.Grep)
	}
	if q.Limit > MaxLimit {
		return fmt.Errorf("journal: limit %d is above %d", q.Limit, MaxLimit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Since.After(q.Until) {
		return fmt.Errorf("journal: since %s is after until %s", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return nil
}

// checkUnitPattern accepts systemd unit name characters (including the
// backslash of escapes like \x2d) and the glob characters * ? [ ]. A leading
// '-' is refused even though Args passes each unit as its own argument:
// nothing that looks like an option should ever reach journalctl.
func checkUnitPattern(u string) error {
	if u == "" {
		return fmt.Errorf("journal: empty unit name")
	}
	if len(u) > maxUnitName {
		return fmt.Errorf("journal: unit name %.40q... is %d bytes, at most %d", u, len(u), maxUnitName)
	}
	if u[0] == '-' {
		return fmt.Errorf("journal: unit name %q starts with '-'", u)
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == ':' || c == '_' || c == '.' || c == '@' || c == '-' || c == '\\':
		case c == '*' || c == '?' || c == '[' || c == ']':
		default:
			return fmt.Errorf("journal: unit name %q has character %q; allowed are letters, digits, : _ . @ - \\ and the globs * ? [ ]", u, c)
		}
	}
	return nil
}

// outputFields are the only fields journalctl is asked to print (it adds
// __CURSOR, __REALTIME_TIMESTAMP, __MONOTONIC_TIMESTAMP and _BOOT_ID
// itself); a full entry is 20-40 fields, so this cuts the bytes piped
// through a Pi Zero several times over.
const outputFields = "MESSAGE,PRIORITY,_SYSTEMD_UNIT,UNIT,SYSLOG_IDENTIFIER,_PID"

// Args returns journalctl's arguments for q, which should have passed
// Validate. Newest entries come first (-r) so the reader can stop early.
// --all keeps messages longer than 4096 bytes (journalctl would print null
// for them); Parse cuts them to MaxMessage. Without Grep the newest Limit
// entries are exactly what is wanted, so -n lets journalctl stop by itself.
// Times are whole seconds, widened outwards (since rounds down, until up);
// Parse applies the exact bounds.
func Args(q Query) []string {
	args := []string{"-o", "json", "--no-pager", "-r", "--all", "--output-fields=" + outputFields}
	if q.Grep == "" {
		args = append(args, "-n", strconv.Itoa(limitOf(q)))
	}
	for _, u := range q.Units {
		args = append(args, "-u", u)
	}
	if q.Priority >= 0 && q.Priority <= 7 {
		args = append(args, "-p", strconv.Itoa(q.Priority))
	}
	if !q.Since.IsZero() {
		args = append(args, "--since", "@"+strconv.FormatInt(floorSec(q.Since), 10))
	}
	if !q.Until.IsZero() {
		args = append(args, "--until", "@"+strconv.FormatInt(ceilSec(q.Until), 10))
	}
	return args
}

// floorSec is t's second; Unix already rounds towards the past.
func floorSec(t time.Time) int64 { return t.Unix() }

func ceilSec(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func limitOf(q Query) int {
	if q.Limit <= 0 {
		return DefaultLimit
	}
	return q.Limit
}

func maxBytesOf(q Query) int {
	if q.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return q.MaxBytes
}

func scanLimitOf(q Query) int {
	if q.ScanLimit <= 0 {
		return DefaultScanLimit
	}
	return q.ScanLimit
}

package journal

import (
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Static is an in-memory Reader over fixed entries, for the simulated board
// and tests. Entries is called once per query, so it may read a file that
// another process changes.
type Static struct {
	Entries func() []Entry
}

var _ Reader = Static{}

// Query validates q as Journalctl does and answers it with Filter.
func (s Static) Query(ctx context.Context, q Query) (Result, error) {
	if err := q.Validate(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("journal: %w", err)
	}
	var es []Entry
	if s.Entries != nil {
		es = s.Entries()
	}
	return Filter(es, q), nil
}

// Filter applies q to entries in any order, exactly as Parse applies it to
// journalctl's output, plus the unit matching journalctl would have done:
// each pattern is a unit name ("nginx" meaning "nginx.service") or a glob
// matched against the whole name ("ngin*"). Level is filled in from
// Priority. The entries are not modified.
func Filter(entries []Entry, q Query) Result {
	sorted := slices.Clone(entries)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Time.Before(sorted[j].Time) })
	c := newCollector(q)
	for i := len(sorted) - 1; i >= 0; i-- {
		e := sorted[i]
		if !MatchUnit(q.Units, e.Unit) {
			continue
		}
		if !c.scan() {
			break
		}
		e.Level = Level(e.Priority)
		e.Message = validUTF8(e.Message)
		if !c.offer(e) {
			break
		}
	}
	return c.result()
}

// MatchUnit reports whether unit matches any of patterns the way
// `journalctl -u` matches them; no patterns match every unit.
func MatchUnit(patterns []string, unit string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if strings.ContainsAny(p, "*?[") {
			if ok, _ := path.Match(p, unit); ok {
				return true
			}
			continue
		}
		if !hasUnitSuffix(p) {
			p += ".service"
		}
		if p == unit {
			return true
		}
	}
	return false
}

// hasUnitSuffix reports whether name ends in one of systemd's unit types.
func hasUnitSuffix(name string) bool {
	ext := path.Ext(name)
	if len(ext) == len(name) {
		return false
	}
	switch ext {
	case ".service", ".socket", ".target", ".device", ".mount", ".automount",
		".swap", ".timer", ".path", ".slice", ".scope":
		return true
	}
	return false
}

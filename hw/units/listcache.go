package units

import (
	"context"
	"sync"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// List used to read every loaded unit's whole Unit interface on every call:
// ~100 properties each, dependency lists included, which took seconds on a
// slow Pi with a few dozen units. Most of what List shows of a unit is in
// ListUnits already (description, load, active and sub state) or in
// ListUnitFiles (the unit file state). The rest splits in two:
//   - properties systemd only changes when it loads unit files, which it
//     does at daemon-reload or when it loads a unit again after dropping
//     it: whether the unit can be started, stopped or reloaded, and its
//     preset. These are cached per unit, for as long as the manager's
//     UnitsLoadTimestampMonotonic (taken each time systemd starts loading
//     unit files) stays the same and the unit stays loaded;
//   - properties of a running unit that change without any reload: when it
//     became active, its main PID, memory, CPU time and restart count.
//     These are read on every call, one small property each, and only for
//     units that are not inactive.
// So a listing of a system whose unit files did not change costs the two
// list calls, one manager property, and nothing at all for inactive units.

// staticProps are the cached properties of one loaded unit.
type staticProps struct {
	fileState, preset            string
	canStart, canStop, canReload bool
}

// listCache holds staticProps for the units of one load of the unit files.
type listCache struct {
	mu    sync.Mutex
	conn  *sd.Conn // the connection the entries were read on
	load  string   // UnitsLoadTimestampMonotonic as read with them
	units map[string]staticProps
}

// loadStamp reads the manager's UnitsLoadTimestampMonotonic; ok is false
// when it cannot be read (an older systemd), and then nothing is cached.
// go-systemd has no context-taking form of this read, so it runs aside and
// a cancelled ctx stops the wait, not the call.
func (d *DBus) loadStamp(ctx context.Context, c *sd.Conn) (string, bool) {
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := c.GetManagerProperty("UnitsLoadTimestampMonotonic")
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err == nil && r.v != ""
	case <-ctx.Done():
		return "", false
	}
}

// begin returns the cached entries valid for this listing (nil when none
// are) and starts a new generation when the unit files were loaded again,
// the connection changed, or the stamp could not be read.
func (lc *listCache) begin(c *sd.Conn, stamp string, ok bool) map[string]staticProps {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if !ok {
		lc.conn, lc.load, lc.units = nil, "", nil
		return nil
	}
	if lc.conn != c || lc.load != stamp || lc.units == nil {
		lc.conn, lc.load, lc.units = c, stamp, map[string]staticProps{}
		return nil
	}
	return lc.units
}

// keep records the entries read in a listing (fresh, keyed by unit name)
// and drops those of units no longer loaded: systemd reads a unit's file
// again when it loads it again, so an entry must not outlive the unit.
// Nothing is stored when the generation changed meanwhile.
func (lc *listCache) keep(c *sd.Conn, stamp string, loaded []sd.UnitStatus, fresh map[string]staticProps) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.units == nil || lc.conn != c || lc.load != stamp {
		return
	}
	next := make(map[string]staticProps, len(loaded))
	for _, s := range loaded {
		if p, ok := fresh[s.Name]; ok {
			next[s.Name] = p
		} else if p, ok := lc.units[s.Name]; ok {
			next[s.Name] = p
		}
	}
	lc.units = next
}

func staticOf(u Unit) staticProps {
	return staticProps{fileState: u.UnitFileState, preset: u.Preset, canStart: u.CanStart, canStop: u.CanStop, canReload: u.CanReload}
}

// cachedUnit builds a loaded unit from its ListUnits line, its cached
// static properties and fresh reads of the properties that change while it
// runs (none when it is inactive).
func (d *DBus) cachedUnit(ctx context.Context, s sd.UnitStatus, p staticProps) Unit {
	u := Unit{Name: s.Name, Description: s.Description, LoadState: s.LoadState, ActiveState: s.ActiveState, SubState: s.SubState,
		UnitFileState: p.fileState, Preset: p.preset, CanStart: p.canStart, CanStop: p.canStop, CanReload: p.canReload}
	if s.ActiveState == "inactive" {
		return u
	}
	get := func(iface, key string) map[string]any {
		m := map[string]any{}
		_ = d.read(ctx, func(c *sd.Conn) error {
			var (
				p   *sd.Property
				err error
			)
			if iface == "" {
				p, err = c.GetUnitPropertyContext(ctx, s.Name, key)
			} else {
				p, err = c.GetUnitTypePropertyContext(ctx, s.Name, iface, key)
			}
			if err == nil {
				m[key] = p.Value.Value()
			}
			return err
		})
		return m
	}
	if isActive(s.ActiveState) {
		u.ActiveSince = propTime(get("", "ActiveEnterTimestamp"), "ActiveEnterTimestamp")
	}
	if typ := unitType(s.Name); typ != "" {
		t := map[string]any{}
		for _, k := range listKeys() {
			for k, v := range get(typ, k) {
				t[k] = v
			}
		}
		x := unitFromProps(s.Name, nil, t)
		u.MainPID, u.MemoryBytes, u.CPUNanos, u.Restarts = x.MainPID, x.MemoryBytes, x.CPUNanos, x.Restarts
	}
	return u
}

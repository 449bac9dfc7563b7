package units

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

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
//
// ListUnitFiles itself is most of what is left: systemd reads every unit
// directory and works out each file's enablement, 0.9 s of a 1.3 s listing
// in the emulated VM. Its answer only changes when an entry is added to or
// removed from a unit directory or one of its .wants/, .requires/ or .d/
// subdirectories (enabling, disabling, masking, linking, a new or deleted
// unit file, a transient unit), each of which changes that directory's
// modification time, or when systemd reloads. So List keeps the answer
// with a fingerprint of those directories' times (unitDirsPrint, a few
// dozen stat calls over the manager's UnitPath) and asks again only when
// the fingerprint or the load stamp changed. Editing a unit file in place
// changes no directory; its [Install] section counts once systemd reloads.
//
// So a listing of a system whose unit files did not change costs one list
// call, one manager property, and nothing at all for inactive units.

// staticProps are the cached properties of one loaded unit.
type staticProps struct {
	fileState, preset            string
	canStart, canStop, canReload bool
}

// listCache holds staticProps for the units of one load of the unit files,
// the manager's unit directories and the last ListUnitFiles answer.
type listCache struct {
	mu    sync.Mutex
	conn  *sd.Conn // the connection the entries were read on
	load  string   // UnitsLoadTimestampMonotonic as read with them
	units map[string]staticProps

	dirs      []string // the manager's UnitPath; nil until read
	files     []sd.UnitFile
	filesSeen uint64 // unitDirsPrint when files was asked for
	filesOK   bool   // files is valid for filesSeen
}

// loadStamp reads the manager's UnitsLoadTimestampMonotonic; ok is false
// when it cannot be read (an older systemd), and then nothing is cached.
func (d *DBus) loadStamp(ctx context.Context, c *sd.Conn) (string, bool) {
	v, err := managerProperty(ctx, c, "UnitsLoadTimestampMonotonic")
	return v, err == nil && v != ""
}

// managerProperty reads one of the manager's properties in its text form.
// go-systemd has no context-taking form of this read, so it runs aside and
// a cancelled ctx stops the wait, not the call.
func managerProperty(ctx context.Context, c *sd.Conn, name string) (string, error) {
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := c.GetManagerProperty(name)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// unitPath reads the manager's unit search path (UnitPath).
func unitPath(ctx context.Context, c *sd.Conn) ([]string, error) {
	s, err := managerProperty(ctx, c, "UnitPath")
	if err != nil {
		return nil, err
	}
	dirs, err := parseStrings(s)
	if err != nil {
		return nil, fmt.Errorf("units: UnitPath %q: %w", s, err)
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("units: UnitPath is empty")
	}
	return dirs, nil
}

// parseStrings reads back a string array as go-systemd hands it over, in
// godbus's text form: ["a", "b"], each element quoted by strconv.Quote,
// and "@as []" when empty. godbus.ParseVariant would do, but brings a
// whole variant parser (44 KB of armv6 code) for this one property.
func parseStrings(s string) ([]string, error) {
	if s == "@as []" || s == "[]" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(s, "[")
	if !ok || !strings.HasSuffix(rest, "]") {
		return nil, errors.New("not a string array")
	}
	var out []string
	for {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil, errors.New("not a string array")
		}
		v, _ := strconv.Unquote(q)
		out = append(out, v)
		rest = rest[len(q):]
		if rest == "]" {
			return out, nil
		}
		if rest, ok = strings.CutPrefix(rest, ", "); !ok {
			return nil, errors.New("not a string array")
		}
	}
}

// racyWindow is how recent a directory's modification time may be for
// unitDirsPrint to vouch for it: file systems keep coarse times (ext4 one
// kernel tick), so a second change within the same tick as the one before
// a listing would leave the time as it was.
const racyWindow = time.Second

// unitDirsPrint fingerprints the unit directories dirs (absolute paths) in
// fsys: each one's modification time and those of its subdirectories
// (x.wants/, x.requires/, x.d/), whose entries are what enablement is made
// of; a missing directory counts as missing. ok is false when a directory
// cannot be read or changed within racyWindow of now, and then the
// fingerprint vouches for nothing.
func unitDirsPrint(fsys fs.FS, dirs []string, now time.Time) (print uint64, ok bool) {
	h := fnv.New64a()
	ok = true
	mark := func(p string, fi fs.FileInfo) {
		h.Write([]byte(p))
		h.Write([]byte{0})
		if fi == nil {
			h.Write([]byte("-"))
			return
		}
		t := fi.ModTime()
		if now.Sub(t) < racyWindow {
			ok = false
		}
		h.Write(strconv.AppendInt(nil, t.UnixNano(), 10))
		h.Write([]byte{0})
	}
	for _, dir := range dirs {
		p := fsPath(dir)
		fi, err := fs.Stat(fsys, p)
		if errors.Is(err, fs.ErrNotExist) {
			mark(p, nil)
			continue
		}
		if err != nil || !fi.IsDir() {
			return 0, false
		}
		mark(p, fi)
		entries, err := fs.ReadDir(fsys, p)
		if err != nil {
			return 0, false
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			sub := path.Join(p, e.Name())
			fi, err := fs.Stat(fsys, sub)
			if err != nil {
				return 0, false
			}
			mark(sub, fi)
		}
	}
	return h.Sum64(), ok
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
	if !lc.current(c, stamp) {
		lc.conn, lc.load, lc.units = c, stamp, map[string]staticProps{}
		lc.dirs, lc.files, lc.filesOK = nil, nil, false
		return nil
	}
	return lc.units
}

// current reports whether the cache holds generation (c, stamp): entries
// read on connection c while the unit files' load stamp was stamp. The
// caller holds lc.mu.
func (lc *listCache) current(c *sd.Conn, stamp string) bool {
	return lc.units != nil && lc.conn == c && lc.load == stamp
}

// unitDirs returns this generation's unit directories, nil before they
// were read.
func (lc *listCache) unitDirs() []string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.dirs
}

// keepDirs records the unit directories read for generation (c, stamp).
func (lc *listCache) keepDirs(c *sd.Conn, stamp string, dirs []string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.current(c, stamp) {
		lc.dirs = dirs
	}
}

// unitFiles returns the kept ListUnitFiles answer if it was asked for in
// generation (c, stamp) under the fingerprint print.
func (lc *listCache) unitFiles(c *sd.Conn, stamp string, print uint64) ([]sd.UnitFile, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if !lc.filesOK || !lc.current(c, stamp) || lc.filesSeen != print {
		return nil, false
	}
	return lc.files, true
}

// keepFiles keeps a ListUnitFiles answer asked for under the fingerprint
// print, taken before the call: a change during the call leaves a newer
// answer under an older fingerprint, which the next listing asks again for.
func (lc *listCache) keepFiles(c *sd.Conn, stamp string, print uint64, files []sd.UnitFile) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.current(c, stamp) {
		lc.files, lc.filesSeen, lc.filesOK = files, print, true
	}
}

// keep records the entries read in a listing (fresh, keyed by unit name)
// and drops those of units no longer loaded: systemd reads a unit's file
// again when it loads it again, so an entry must not outlive the unit.
// Nothing is stored when the generation changed meanwhile.
func (lc *listCache) keep(c *sd.Conn, stamp string, loaded []sd.UnitStatus, fresh map[string]staticProps) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if !lc.current(c, stamp) {
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

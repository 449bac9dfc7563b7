package units

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// settleTimeout bounds the property reads Control makes after a wait was
// cut short by its context, so a result can still say where the unit is.
const settleTimeout = 5 * time.Second

// DBus is the real Units, over the system bus. It is safe for concurrent
// use and reconnects when the bus connection has dropped (dbus restarted,
// broker hiccup): the agent is long-running, and one restart of dbus
// should not leave it blind until it is restarted too.
type DBus struct {
	life   context.Context // the connections' lifetime; godbus closes a connection when its context ends
	cancel context.CancelFunc
	dial   func(ctx context.Context) (*sd.Conn, error)

	// Root is the filesystem Validate's checks read ("/" by default).
	Root fs.FS
	// Analyze is systemd-analyze's path; "" looks it up in PATH, and
	// "-" skips it.
	Analyze string

	mu   sync.Mutex
	conn *sd.Conn

	cache listCache // List's per-unit properties that only a reload changes
}

var _ Units = (*DBus)(nil)

// NewDBus connects to the system bus; ctx bounds the connecting only, not
// the connection. Reads work as an unprivileged user; changes need root.
func NewDBus(ctx context.Context) (*DBus, error) {
	life, cancel := context.WithCancel(context.Background())
	d := &DBus{life: life, cancel: cancel, dial: sd.NewSystemConnectionContext, Root: os.DirFS("/")}
	if _, err := d.connection(ctx); err != nil {
		cancel()
		return nil, err
	}
	return d, nil
}

// Close closes the connection; later calls fail.
func (d *DBus) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancel()
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

// connection returns a live connection, dialling a new one if there is
// none or the last one dropped.
func (d *DBus) connection(ctx context.Context) (*sd.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.life.Err() != nil {
		return nil, errors.New("units: the D-Bus connection is closed")
	}
	if d.conn != nil && d.conn.Connected() {
		return d.conn, nil
	}
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
	// go-systemd ties the connection to the context it is dialled with, so
	// dial with d.life and let ctx bound only the wait.
	type dialed struct {
		c   *sd.Conn
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := d.dial(d.life)
		ch <- dialed{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("units: connect to the system bus: %w", r.err)
		}
		d.conn = r.c
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("units: connect to the system bus: %w", ctx.Err())
	}
}

// read runs a read-only fn on a live connection, retrying once on a fresh
// connection if the bus dropped during the call. Changes are never
// retried: a job may have been queued before the connection broke.
func (d *DBus) read(ctx context.Context, fn func(c *sd.Conn) error) error {
	c, err := d.connection(ctx)
	if err != nil {
		return err
	}
	err = fn(c)
	if err != nil && !c.Connected() && ctx.Err() == nil {
		if c, err2 := d.connection(ctx); err2 == nil {
			return fn(c)
		}
	}
	return err
}

// props reads the Unit interface's properties and, unless typeKeys is nil,
// the type interface's (Service for a .service). A unit whose type
// properties fail to read as a whole (systemd refuses GetAll for a service
// whose command line is not valid UTF-8) falls back to reading typeKeys
// one by one.
func (d *DBus) props(ctx context.Context, name string, typeKeys []string) (u, t map[string]any, err error) {
	err = d.read(ctx, func(c *sd.Conn) error {
		var err error
		u, err = c.GetUnitPropertiesContext(ctx, name)
		return err
	})
	if err != nil {
		return nil, nil, d.wrap("read", name, err)
	}
	typ := unitType(name)
	if typ == "" || typeKeys == nil {
		return u, map[string]any{}, nil
	}
	err = d.read(ctx, func(c *sd.Conn) error {
		var err error
		t, err = c.GetUnitTypePropertiesContext(ctx, name, typ)
		return err
	})
	if err == nil {
		return u, t, nil
	}
	if ctx.Err() != nil {
		return nil, nil, d.wrap("read", name, err)
	}
	t = map[string]any{}
	for _, k := range typeKeys {
		_ = d.read(ctx, func(c *sd.Conn) error {
			p, err := c.GetUnitTypePropertyContext(ctx, name, typ, k)
			if err == nil {
				t[k] = p.Value.Value()
			}
			return err
		})
	}
	return u, t, nil
}

// Type properties used by List (listKeys) and Get (detailKeys).
func listKeys() []string { return []string{"MainPID", "MemoryCurrent", "CPUUsageNSec", "NRestarts"} }
func detailKeys() []string {
	return append(listKeys(), "ExecStart", "ExecStop", "WorkingDirectory", "User", "Group", "Restart", "Type", "Environment")
}

// found reports whether systemd knows the unit: loaded, or with a unit
// file, or still running after its file was removed.
func found(u map[string]any) bool {
	return propString(u, "LoadState") != "not-found" || propString(u, "UnitFileState") != "" ||
		!(propString(u, "ActiveState") == "inactive" || propString(u, "ActiveState") == "")
}

// wrap names the package, the operation and the unit, and turns systemd's
// NoSuchUnit into ErrNotFound when it is about this unit (starting a unit
// whose Requires= is missing fails with NoSuchUnit about the dependency).
func (d *DBus) wrap(op, name string, err error) error {
	if dbusErrorName(err) == "org.freedesktop.systemd1.NoSuchUnit" && strings.Contains(err.Error(), "Unit "+name+" ") {
		return fmt.Errorf("units: %s %q: %w (%v)", op, name, ErrNotFound, err)
	}
	return fmt.Errorf("units: %s %q: %w", op, name, err)
}

func dbusErrorName(err error) string {
	var e godbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *godbus.Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Name
	}
	return ""
}

// listWorkers is how many units List reads at once. The calls pipeline on
// the one connection, which hides round trips even on a single core; more
// would only queue up inside systemd.
const listWorkers = 4

// List returns the loaded service units (those LoadState not-found and
// inactive left out: they are only names other units mention) plus the
// service unit files systemd has not loaded. A loaded unit seen for the
// first time since systemd last loaded unit files costs one GetAll of its
// Unit properties; after that only what changes while it runs is read
// (see listcache.go). Unless it is inactive (then PID, memory and CPU are
// unset anyway), it also costs four single reads of its Service
// properties: GetAll on Service would make systemd read a dozen cgroup
// and accounting files per unit. A unit that fails to read is listed with
// what ListUnits said. Unloaded files are shown as systemd would load
// them: inactive, dead, LoadState "loaded" (or "masked"), Description and
// CanReload read from the file, CanStart/CanStop false for templates
// (foo@.service) and for RefuseManualStart/Stop. Aliases (UnitFileState
// "alias") are left out: they are other names of listed units.
func (d *DBus) List(ctx context.Context) ([]Unit, error) {
	conn, err := d.connection(ctx)
	if err != nil {
		return nil, fmt.Errorf("units: list: %w", err)
	}
	stamp, stampOK := d.loadStamp(ctx, conn)
	cached := d.cache.begin(conn, stamp, stampOK)
	var loaded []sd.UnitStatus
	err = d.read(ctx, func(c *sd.Conn) error {
		var err error
		loaded, err = c.ListUnitsByPatternsContext(ctx, nil, []string{"*.service"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("units: list: %w", err)
	}
	type filesResult struct {
		files []sd.UnitFile
		err   error
	}
	filesCh := make(chan filesResult, 1)
	go func() {
		var r filesResult
		r.files, r.err = d.listUnitFiles(ctx, conn, stamp, stampOK)
		filesCh <- r
	}()

	var keep []sd.UnitStatus
	for _, s := range loaded {
		if s.LoadState != "not-found" || s.ActiveState != "inactive" {
			keep = append(keep, s)
		}
	}
	out := make([]Unit, len(keep), len(keep)+64)
	// How each unit was read: from the cache, freshly (then it goes into
	// the cache), or neither (its read failed).
	const (
		readFailed = iota
		readFresh
		readCached
	)
	how := make([]int, len(keep))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(listWorkers, len(keep)) {
		wg.Go(func() {
			for i := range work {
				if p, ok := cached[keep[i].Name]; ok {
					out[i], how[i] = d.cachedUnit(ctx, keep[i], p), readCached
				} else if u, ok := d.listUnit(ctx, keep[i]); ok {
					out[i], how[i] = u, readFresh
				} else {
					out[i] = u
				}
			}
		})
	}
feed:
	for i := range keep {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	files := <-filesCh
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("units: list: %w", err)
	}
	if files.err != nil {
		return nil, fmt.Errorf("units: list unit files: %w", files.err)
	}
	fresh := map[string]staticProps{}
	for i, h := range how {
		if h == readFresh {
			fresh[keep[i].Name] = staticOf(out[i])
		}
	}
	d.cache.keep(conn, stamp, loaded, fresh)
	fileState := make(map[string]string, len(files.files))
	for _, f := range files.files {
		fileState[path.Base(f.Path)] = f.Type
	}
	seen := map[string]bool{}
	for i, s := range keep {
		seen[s.Name] = true
		// Enabling or disabling needs no reload, so a cached unit takes
		// its file state from this listing's ListUnitFiles.
		if st, ok := fileState[s.Name]; ok && how[i] == readCached {
			out[i].UnitFileState = st
		}
	}
	for _, f := range files.files {
		name := path.Base(f.Path)
		if seen[name] || f.Type == "alias" {
			continue
		}
		seen[name] = true
		out = append(out, d.unloadedUnit(f.Path, f.Type))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listUnitFiles answers ListUnitFiles for services, from List's cache when
// no unit directory changed since the answer was kept in this generation
// of the cache (see listcache.go).
func (d *DBus) listUnitFiles(ctx context.Context, conn *sd.Conn, stamp string, stampOK bool) ([]sd.UnitFile, error) {
	var print uint64
	printOK := false
	if stampOK {
		dirs := d.cache.unitDirs()
		if dirs == nil {
			if ds, err := unitPath(ctx, conn); err == nil {
				dirs = ds
				d.cache.keepDirs(conn, stamp, ds)
			}
		}
		if dirs != nil {
			print, printOK = unitDirsPrint(d.root(), dirs, time.Now())
		}
	}
	if printOK {
		if files, ok := d.cache.unitFiles(conn, stamp, print); ok {
			return files, nil
		}
	}
	var files []sd.UnitFile
	err := d.read(ctx, func(c *sd.Conn) error {
		var err error
		files, err = c.ListUnitFilesByPatternsContext(ctx, nil, []string{"*.service"})
		return err
	})
	if err == nil && printOK {
		d.cache.keepFiles(conn, stamp, print, files)
	}
	return files, err
}

// listUnit reads one loaded unit for List; ok is false when its Unit
// properties could not be read and it is only what ListUnits said.
func (d *DBus) listUnit(ctx context.Context, s sd.UnitStatus) (_ Unit, ok bool) {
	var u map[string]any
	err := d.read(ctx, func(c *sd.Conn) error {
		var err error
		u, err = c.GetUnitPropertiesContext(ctx, s.Name)
		return err
	})
	if err != nil {
		return Unit{Name: s.Name, Description: s.Description, LoadState: s.LoadState, ActiveState: s.ActiveState, SubState: s.SubState}, false
	}
	t := map[string]any{}
	if typ := unitType(s.Name); typ != "" && s.ActiveState != "inactive" {
		for _, k := range listKeys() {
			_ = d.read(ctx, func(c *sd.Conn) error {
				p, err := c.GetUnitTypePropertyContext(ctx, s.Name, typ, k)
				if err == nil {
					t[k] = p.Value.Value()
				}
				return err
			})
		}
	}
	x := unitFromProps(s.Name, u, t)
	x.Name = s.Name // ListUnits' name, even if it is an alias of the Id
	return x, true
}

// unloadedUnit describes a unit file systemd has not loaded, from the file.
func (d *DBus) unloadedUnit(file, state string) Unit {
	name := path.Base(file)
	u := Unit{Name: name, LoadState: "loaded", ActiveState: "inactive", SubState: "dead", UnitFileState: state}
	if strings.HasPrefix(state, "masked") {
		u.LoadState = "masked"
		return u
	}
	template := strings.HasSuffix(strings.TrimSuffix(name, path.Ext(name)), "@")
	u.CanStart, u.CanStop = !template, !template
	if body, err := readLimited(d.root(), fsPath(file), 64<<10); err == nil {
		f := parseUnitFile(string(body))
		u.Description = f.last("Unit", "Description")
		u.CanReload = len(f.values("Service", "ExecReload")) > 0
		if parseBool(f.last("Unit", "RefuseManualStart")) {
			u.CanStart = false
		}
		if parseBool(f.last("Unit", "RefuseManualStop")) {
			u.CanStop = false
		}
	}
	return u
}

// readLimited reads at most max bytes of a file: unit files are small, and
// a huge one is not worth reading on a Pi Zero.
func readLimited(fsys fs.FS, name string, max int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, max)
	n := 0
	for n < max {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			break
		}
	}
	return buf[:n], nil
}

// Get reads one unit's properties.
func (d *DBus) Get(ctx context.Context, name string) (Detail, error) {
	name, err := Normalize(name)
	if err != nil {
		return Detail{}, err
	}
	u, t, err := d.props(ctx, name, detailKeys())
	if err != nil {
		return Detail{}, err
	}
	if !found(u) {
		return Detail{}, notFound(name)
	}
	return detailFromProps(name, u, t), nil
}

// unitProps reads only the Unit interface's properties of a unit systemd
// knows.
func (d *DBus) unitProps(ctx context.Context, name string) (map[string]any, error) {
	u, _, err := d.props(ctx, name, nil)
	if err != nil {
		return nil, err
	}
	if !found(u) {
		return nil, notFound(name)
	}
	return u, nil
}

// root is the filesystem for unit files and Validate's checks.
func (d *DBus) root() fs.FS {
	if d.Root == nil {
		return os.DirFS("/")
	}
	return d.Root
}

// unit reads a unit's state, for Control's before and after.
func (d *DBus) unit(ctx context.Context, name string) (Unit, error) {
	u, t, err := d.props(ctx, name, listKeys())
	if err != nil {
		return Unit{}, err
	}
	if !found(u) {
		return Unit{}, notFound(name)
	}
	return unitFromProps(name, u, t), nil
}

// ActiveDependents returns the units in RequiredBy, BoundBy, RequisiteOf
// and WantedBy whose ActiveState is active, activating, reloading or
// refreshing; targets are left out (see Units).
func (d *DBus) ActiveDependents(ctx context.Context, name string) ([]string, error) {
	name, err := Normalize(name)
	if err != nil {
		return nil, err
	}
	u, err := d.unitProps(ctx, name)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, k := range []string{"RequiredBy", "BoundBy", "RequisiteOf", "WantedBy"} {
		for _, n := range propStrings(u, k) {
			if !strings.HasSuffix(n, ".target") && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return []string{}, nil
	}
	var states []sd.UnitStatus
	err = d.read(ctx, func(c *sd.Conn) error {
		var err error
		states, err = c.ListUnitsByNamesContext(ctx, names)
		return err
	})
	if err != nil {
		return nil, d.wrap("read dependents of", name, err)
	}
	out := []string{}
	for _, s := range states {
		if dependentActive(s.ActiveState) {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// dependentActive: a dependent that is running or on its way there would
// be hit by stopping what it needs.
func dependentActive(state string) bool {
	switch state {
	case "active", "activating", "reloading", "refreshing":
		return true
	}
	return false
}

// Control queues the job in mode "replace" (what systemctl does) and waits
// for JobRemoved. If ctx ends first the job keeps running in systemd; the
// error says so and After is read with a short timeout of its own.
func (d *DBus) Control(ctx context.Context, name, action string) (ControlResult, error) {
	name, err := Normalize(name)
	if err != nil {
		return ControlResult{}, err
	}
	if err := checkAction(action); err != nil {
		return ControlResult{}, err
	}
	var res ControlResult
	if res.Before, err = d.unit(ctx, name); err != nil {
		return res, err
	}
	c, err := d.connection(ctx)
	if err != nil {
		return res, err
	}
	// Buffered: go-systemd delivers the result from its signal goroutine,
	// which would block (and stall every other job) on an unread channel.
	done := make(chan string, 1)
	switch action {
	case Start:
		_, err = c.StartUnitContext(ctx, name, "replace", done)
	case Stop:
		_, err = c.StopUnitContext(ctx, name, "replace", done)
	case Restart:
		_, err = c.RestartUnitContext(ctx, name, "replace", done)
	case Reload:
		_, err = c.ReloadUnitContext(ctx, name, "replace", done)
	}
	if err != nil {
		res.After = res.Before // no job was queued
		return res, d.wrap(action, name, err)
	}
	select {
	case res.Job = <-done:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
		res.After, _ = d.unit(sctx, name)
		return res, fmt.Errorf("units: %s %q: job queued, but stopped waiting for its result: %w", action, name, ctx.Err())
	}
	if res.After, err = d.unit(ctx, name); err != nil {
		return res, err
	}
	return res, nil
}

// SetEnabled calls EnableUnitFiles or DisableUnitFiles (runtime false,
// force false) and, when symlinks changed, Reload, as `systemctl enable`
// does. Enabling a unit without [Install] changes nothing and returns
// ErrStatic with the result.
func (d *DBus) SetEnabled(ctx context.Context, name string, enabled bool) (EnableResult, error) {
	name, err := Normalize(name)
	if err != nil {
		return EnableResult{}, err
	}
	before, err := d.unitProps(ctx, name)
	if err != nil {
		return EnableResult{}, err
	}
	state := propString(before, "UnitFileState")
	res := EnableResult{Before: state, After: state, Changes: []Change{}}
	c, err := d.connection(ctx)
	if err != nil {
		return res, err
	}
	carries := true
	if enabled {
		var ch []sd.EnableUnitFileChange
		carries, ch, err = c.EnableUnitFilesContext(ctx, []string{name}, false, false)
		for _, x := range ch {
			res.Changes = append(res.Changes, Change{Type: x.Type, File: x.Filename, Destination: x.Destination})
		}
	} else {
		var ch []sd.DisableUnitFileChange
		ch, err = c.DisableUnitFilesContext(ctx, []string{name}, false)
		for _, x := range ch {
			res.Changes = append(res.Changes, Change{Type: x.Type, File: x.Filename, Destination: x.Destination})
		}
	}
	verb := "disable"
	if enabled {
		verb = "enable"
	}
	if err != nil {
		return res, d.wrap(verb, name, err)
	}
	if len(res.Changes) > 0 {
		if err := c.ReloadContext(ctx); err != nil {
			return res, d.wrap("reload systemd after "+verb+" of", name, err)
		}
	}
	after, err := d.unitProps(ctx, name)
	if err != nil {
		return res, err
	}
	res.After = propString(after, "UnitFileState")
	if !carries {
		return res, fmt.Errorf("units: enable %q: %w", name, ErrStatic)
	}
	return res, nil
}

// Validate reads the unit's fragment and drop-ins, runs CheckUnitFile over
// d.Root with dependencies looked up over D-Bus, then `systemd-analyze
// verify` (see verifyFindings for how its output is sorted). A masked
// unit is invalid; a unit with no file (transient) is an error.
func (d *DBus) Validate(ctx context.Context, name string) (Validation, error) {
	name, err := Normalize(name)
	if err != nil {
		return Validation{}, err
	}
	u, err := d.unitProps(ctx, name)
	if err != nil {
		return Validation{}, err
	}
	frag := propString(u, "FragmentPath")
	if strings.HasPrefix(propString(u, "LoadState"), "masked") || strings.HasPrefix(propString(u, "UnitFileState"), "masked") {
		return Validation{FragmentPath: frag, Errors: []string{name + " is masked: unmask it before it can start or be enabled"}}, nil
	}
	if frag == "" {
		return Validation{}, fmt.Errorf("units: validate %q: no unit file (a transient unit)", name)
	}
	var text strings.Builder
	for _, p := range append([]string{frag}, propStrings(u, "DropInPaths")...) {
		body, err := readLimited(d.root(), fsPath(p), 1<<20)
		if err != nil {
			return Validation{}, fmt.Errorf("units: validate %q: read %s: %w", name, p, err)
		}
		text.Write(body)
		text.WriteString("\n")
	}
	exists := func(dep string) (bool, error) {
		n, err := Normalize(dep)
		if err != nil {
			return false, nil
		}
		var p *sd.Property
		err = d.read(ctx, func(c *sd.Conn) error {
			var err error
			p, err = c.GetUnitPropertyContext(ctx, n, "LoadState")
			return err
		})
		if err != nil {
			return false, err
		}
		s, _ := p.Value.Value().(string)
		return s != "not-found", nil
	}
	v := CheckUnitFile(d.root(), text.String(), exists)
	v.FragmentPath = frag
	errs, warns := d.verify(ctx, name, frag)
	v.Errors = append(v.Errors, errs...)
	v.Warnings = append(v.Warnings, warns...)
	v.Valid = len(v.Errors) == 0
	return v, nil
}

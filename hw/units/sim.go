package units

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/internal/statefile"
)

// simJournalMax is how many journal entries the state file keeps; older
// ones are dropped, as journald rotates.
const simJournalMax = 1000

// Sim is a simulated systemd for laptops, demos and fast tests. Its state
// (units with their unit file text, states, enablement and journal) lives
// in a JSON file so that the agent process (reads) and the helper process
// (changes) share it, as they share the real systemd. Every operation
// opens the file and holds an flock on it for its duration: shared for
// reads, exclusive for changes, so any number of Sim values in any number
// of processes see one consistent state. The file is indented JSON that a
// demo may edit (add a unit by adding its file text); a file that no
// longer parses is reported, not overwritten.
//
// Behaviour follows systemd closely enough to be believable: starting a
// unit starts the units it Requires and Wants first (a failed requirement
// fails the job with result "dependency"); stopping or restarting a unit
// stops or restarts the active units that Require it; a unit whose file
// fails CheckUnitFile (against a fixed simulated filesystem) fails to
// start with systemd's exit status for the problem (200/CHDIR, 203/EXEC,
// 217/USER, ...); every change writes systemd's journal lines.
type Sim struct {
	file statefile.JSON[simState]
	now  func() time.Time
}

var _ Units = (*Sim)(nil)

// simState is the JSON file.
type simState struct {
	Version int                 `json:"version"`
	NextPID int                 `json:"next_pid"`
	Units   map[string]*simUnit `json:"units"`
	Journal []simEntry          `json:"journal"`
}

// simUnit is one unit: its file and its runtime state.
type simUnit struct {
	Path        string    `json:"path"`       // FragmentPath
	File        string    `json:"file"`       // the unit file's text
	Active      string    `json:"active"`     // ActiveState
	Sub         string    `json:"sub"`        // SubState
	FileState   string    `json:"file_state"` // UnitFileState
	Preset      string    `json:"preset,omitempty"`
	MainPID     int       `json:"main_pid,omitempty"`
	ActiveSince time.Time `json:"active_since,omitzero"`
	MemoryBytes uint64    `json:"memory_bytes,omitempty"`
	Restarts    int       `json:"restarts,omitempty"`
}

type simEntry struct {
	Time       time.Time `json:"time"`
	Unit       string    `json:"unit,omitempty"`
	Identifier string    `json:"identifier,omitempty"`
	PID        int       `json:"pid,omitempty"`
	Priority   int       `json:"priority"`
	Message    string    `json:"message"`
}

// NewSim opens the state file at path, creating it with the seeded board
// (see seedUnits) when it is missing or empty. A process that may only
// read the file (the agent, when the helper owns it) gets a Sim whose
// changes fail.
func NewSim(path string) (*Sim, error) {
	s := &Sim{file: statefile.JSON[simState]{File: statefile.File{Path: path, What: "units: sim"}, Check: (*simState).fill, Encode: (*simState).encode},
		now: time.Now}
	if _, err := s.file.Open(func() *simState { return seedState(s.now()) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Journal returns the sim units' journal as a journal.Reader; entries are
// read from the file on every query.
func (s *Sim) Journal() journal.Reader { return simJournal{s} }

type simJournal struct{ s *Sim }

func (j simJournal) Query(ctx context.Context, q journal.Query) (journal.Result, error) {
	if err := q.Validate(); err != nil {
		return journal.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return journal.Result{}, fmt.Errorf("units: sim journal: %w", err)
	}
	var entries []journal.Entry
	err := j.s.view(func(st *simState) error {
		entries = make([]journal.Entry, 0, len(st.Journal))
		for _, e := range st.Journal {
			entries = append(entries, journal.Entry{Time: e.Time, Unit: e.Unit, Identifier: e.Identifier, PID: e.PID,
				Priority: e.Priority, Message: e.Message})
		}
		return nil
	})
	if err != nil {
		return journal.Result{}, err
	}
	return journal.Filter(entries, q), nil
}

// view runs fn on the state under a shared lock.
func (s *Sim) view(fn func(st *simState) error) error { return s.file.Read(fn) }

// update runs fn on the state under an exclusive lock and writes the
// state back if fn succeeded. (A job that fails is not an error: Control
// reports it as the job result, with the states and journal lines it
// left; fn returns errors only for requests that change nothing.)
func (s *Sim) update(fn func(st *simState) error) error { return s.file.Change(fn) }

// fill gives a state file without units an empty table.
func (st *simState) fill() error {
	if st.Units == nil {
		st.Units = map[string]*simUnit{}
	}
	return nil
}

// encode keeps the newest simJournalMax journal entries and writes the
// units indented, for a person to read and edit, and the journal one
// compact entry a line, which keeps the file (rewritten
// on every change) a third the size and twice as fast to write.
func (st *simState) encode() ([]byte, error) {
	if n := len(st.Journal); n > simJournalMax {
		st.Journal = slices.Clone(st.Journal[n-simJournalMax:])
	}
	units, err := json.MarshalIndent(st.Units, "  ", "  ")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n  \"next_pid\": %d,\n  \"units\": %s,\n  \"journal\": [", st.Version, st.NextPID, units)
	for i, e := range st.Journal {
		line, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n    ")
		b.Write(line)
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes(), nil
}

// lookup normalises name and finds the unit.
func (st *simState) lookup(name string) (string, *simUnit, error) {
	n, err := Normalize(name)
	if err != nil {
		return "", nil, err
	}
	u, ok := st.Units[n]
	if !ok {
		return n, nil, notFound(n)
	}
	return n, u, nil
}

// names returns the unit names, sorted.
func (st *simState) names() []string {
	out := make([]string, 0, len(st.Units))
	for n := range st.Units {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// List returns every sim unit, sorted by name.
func (s *Sim) List(ctx context.Context) ([]Unit, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("units: sim: list: %w", err)
	}
	var out []Unit
	err := s.view(func(st *simState) error {
		now := s.now()
		for _, n := range st.names() {
			out = append(out, st.unit(n, now))
		}
		return nil
	})
	return out, err
}

// unit is a sim unit's Unit at now: CPU time grows while it is active,
// and memory and PID are shown only then, as systemd does.
func (st *simState) unit(name string, now time.Time) Unit {
	u := st.Units[name]
	f := parseUnitFile(u.File)
	x := Unit{Name: name, Description: f.last("Unit", "Description"), LoadState: "loaded",
		ActiveState: u.Active, SubState: u.Sub, UnitFileState: u.FileState, Preset: u.Preset, Restarts: u.Restarts,
		CanStart: !parseBool(f.last("Unit", "RefuseManualStart")), CanStop: !parseBool(f.last("Unit", "RefuseManualStop")),
		CanReload: len(f.values("Service", "ExecReload")) > 0}
	if isActive(u.Active) {
		x.MainPID, x.MemoryBytes, x.ActiveSince = u.MainPID, u.MemoryBytes, u.ActiveSince
		x.CPUNanos = uint64(max(now.Sub(u.ActiveSince), 0).Seconds()*float64(cpuRate(name))) + 40_000_000
	}
	return x
}

// Get returns a sim unit in detail, from its file and the other units'.
func (s *Sim) Get(ctx context.Context, name string) (Detail, error) {
	if err := ctx.Err(); err != nil {
		return Detail{}, fmt.Errorf("units: sim: get: %w", err)
	}
	var d Detail
	err := s.view(func(st *simState) error {
		n, u, err := st.lookup(name)
		if err != nil {
			return err
		}
		f := parseUnitFile(u.File)
		d = Detail{Unit: st.unit(n, s.now()), FragmentPath: u.Path,
			ExecStart: slices.Clone(f.values("Service", "ExecStart")), ExecStop: slices.Clone(f.values("Service", "ExecStop")),
			WorkingDirectory: f.last("Service", "WorkingDirectory"), User: f.last("Service", "User"), Group: f.last("Service", "Group"),
			Restart: cmpOr(f.last("Service", "Restart"), "no"), Type: cmpOr(f.last("Service", "Type"), "simple"),
			Environment: environment(f.values("Service", "Environment")),
			Requires:    f.list("Unit", "Requires"), Wants: f.list("Unit", "Wants"),
			After: f.list("Unit", "After"), Before: f.list("Unit", "Before")}
		for _, other := range st.names() {
			of := parseUnitFile(st.Units[other].File)
			if slices.Contains(of.list("Unit", "Requires"), n) {
				d.RequiredBy = append(d.RequiredBy, other)
			}
			if slices.Contains(of.list("Unit", "Wants"), n) {
				d.WantedBy = append(d.WantedBy, other)
			}
			if slices.Contains(of.list("Unit", "After"), n) {
				d.Before = append(d.Before, other)
			}
		}
		if strings.HasPrefix(u.FileState, "enabled") {
			d.WantedBy = append(d.WantedBy, f.list("Install", "WantedBy")...)
			d.RequiredBy = append(d.RequiredBy, f.list("Install", "RequiredBy")...)
		}
		return nil
	})
	return d, err
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ActiveDependents returns the active, non-target sim units that
// Require, Want, BindTo or are Requisite on name.
func (s *Sim) ActiveDependents(ctx context.Context, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("units: sim: dependents: %w", err)
	}
	out := []string{}
	err := s.view(func(st *simState) error {
		n, _, err := st.lookup(name)
		if err != nil {
			return err
		}
		for _, other := range st.names() {
			if dependentActive(st.Units[other].Active) && st.needs(other, n, true) {
				out = append(out, other)
			}
		}
		return nil
	})
	return out, err
}

// needs reports whether unit a depends on b: through Requires, BindsTo or
// Requisite, and through Wants too when soft is set.
func (st *simState) needs(a, b string, soft bool) bool {
	f := parseUnitFile(st.Units[a].File)
	keys := []string{"Requires", "BindsTo", "Requisite"}
	if soft {
		keys = append(keys, "Wants")
	}
	for _, k := range keys {
		if slices.Contains(f.list("Unit", k), b) {
			return true
		}
	}
	return false
}

// Control runs the action on the sim units and reports the job result.
func (s *Sim) Control(ctx context.Context, name, action string) (ControlResult, error) {
	if err := checkAction(action); err != nil {
		return ControlResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return ControlResult{}, fmt.Errorf("units: sim: %s: %w", action, err)
	}
	var res ControlResult
	err := s.update(func(st *simState) error {
		n, u, err := st.lookup(name)
		if err != nil {
			return err
		}
		now := s.now()
		res.Before = st.unit(n, now)
		switch action {
		case Start:
			res.Job = st.start(n, now, map[string]bool{})
		case Stop:
			res.Job = st.stop(n, now)
		case Restart:
			var requirers []string
			for _, other := range st.names() {
				if other != n && isActive(st.Units[other].Active) && st.needs(other, n, false) {
					requirers = append(requirers, other)
				}
			}
			st.stop(n, now)
			res.Job = st.start(n, now, map[string]bool{})
			for _, r := range requirers {
				st.start(r, now, map[string]bool{})
			}
		case Reload:
			f := parseUnitFile(u.File)
			if len(f.values("Service", "ExecReload")) == 0 {
				return fmt.Errorf("units: reload %q: job type reload is not applicable for unit %s (it has no ExecReload=)", n, n)
			}
			if !isActive(u.Active) {
				return fmt.Errorf("units: reload %q: unit %s is not active", n, n)
			}
			desc := f.last("Unit", "Description")
			st.logSystemd(now, n, 6, "Reloading %s - %s...", n, desc)
			st.logSystemd(now, n, 6, "Reloaded %s - %s.", n, desc)
			res.Job = "done"
		}
		res.After = st.unit(n, now)
		return nil
	})
	return res, err
}

// exists says whether a dependency resolves in the simulation: a sim unit,
// a target, or one of the sockets the seeded units refer to.
func (st *simState) exists(name string) (bool, error) {
	n, err := Normalize(name)
	if err != nil {
		return false, nil
	}
	if _, ok := st.Units[n]; ok {
		return true, nil
	}
	switch {
	case strings.HasSuffix(n, ".target"), n == "dbus.socket", n == "avahi-daemon.socket", n == "ssh.socket":
		return true, nil
	}
	return false, nil
}

// start starts n (and what it Requires and Wants) and returns the job
// result. seen stops dependency loops.
func (st *simState) start(n string, now time.Time, seen map[string]bool) string {
	u := st.Units[n]
	if isActive(u.Active) || seen[n] {
		return "done"
	}
	seen[n] = true
	f := parseUnitFile(u.File)
	desc := f.last("Unit", "Description")
	for _, k := range []string{"Requires", "BindsTo", "Wants"} {
		for _, dep := range f.list("Unit", k) {
			if _, ok := st.Units[dep]; !ok || isActive(st.Units[dep].Active) {
				continue
			}
			if job := st.start(dep, now, seen); job != "done" && k != "Wants" {
				st.logSystemd(now, n, 3, "Dependency failed for %s - %s.", n, desc)
				st.logSystemd(now, n, 4, "%s: Job %s/start failed with result 'dependency'.", n, n)
				return "dependency"
			}
		}
	}
	st.logSystemd(now, n, 6, "Starting %s - %s...", n, desc)
	_, probs := checkUnitFile(simFS(), u.File, st.exists)
	for _, p := range probs {
		if !p.error {
			continue
		}
		status, detail := failureOf(p, n, f)
		st.logSystemd(now, n, 3, "%s", detail)
		st.logSystemd(now, n, 5, "%s: Main process exited, code=exited, status=%s", n, status)
		st.logSystemd(now, n, 4, "%s: Failed with result 'exit-code'.", n)
		st.logSystemd(now, n, 3, "Failed to start %s - %s.", n, desc)
		u.Active, u.Sub, u.MainPID, u.ActiveSince, u.MemoryBytes = "failed", "failed", 0, time.Time{}, 0
		return "failed"
	}
	pid := st.NextPID
	st.NextPID += 1 + int(hashOf(n)%23)
	if line := greeting(n); line != "" {
		st.log(now, n, exeName(f), pid, 6, line)
	}
	if f.last("Service", "Type") == "oneshot" && !parseBool(f.last("Service", "RemainAfterExit")) {
		st.logSystemd(now, n, 6, "%s: Deactivated successfully.", n)
		st.logSystemd(now, n, 6, "Finished %s - %s.", n, desc)
		u.Active, u.Sub, u.MainPID, u.ActiveSince, u.MemoryBytes = "inactive", "dead", 0, time.Time{}, 0
		return "done"
	}
	st.logSystemd(now, n, 6, "Started %s - %s.", n, desc)
	u.Active, u.Sub, u.MainPID, u.ActiveSince = "active", "running", pid, now
	u.MemoryBytes = (2 + hashOf(n)%38) << 20
	return "done"
}

// stop stops n after the active units that Require or BindTo it, as
// systemd propagates a stop.
func (st *simState) stop(n string, now time.Time) string {
	u := st.Units[n]
	if !isActive(u.Active) && u.Active != "activating" {
		return "done"
	}
	for _, other := range st.names() {
		if other != n && isActive(st.Units[other].Active) && st.needs(other, n, false) {
			st.stop(other, now)
		}
	}
	desc := parseUnitFile(u.File).last("Unit", "Description")
	cpu := st.unit(n, now).CPUNanos
	st.logSystemd(now, n, 6, "Stopping %s - %s...", n, desc)
	st.logSystemd(now, n, 6, "%s: Deactivated successfully.", n)
	st.logSystemd(now, n, 6, "Stopped %s - %s.", n, desc)
	st.logSystemd(now, n, 6, "%s: Consumed %.3fs CPU time.", n, float64(cpu)/1e9)
	u.Active, u.Sub, u.MainPID, u.ActiveSince, u.MemoryBytes = "inactive", "dead", 0, time.Time{}, 0
	return "done"
}

// failureOf maps the first error of a unit file onto what systemd logs
// when the start fails for that reason.
func failureOf(p problem, n string, f unitFile) (status, detail string) {
	_, cmd := splitExecPrefix(f.last("Service", "ExecStart"))
	exe := firstWord(cmd)
	switch p.kind {
	case kindChdir:
		return "200/CHDIR", fmt.Sprintf("%s: Changing to the requested working directory failed: No such file or directory", n)
	case kindExec:
		return "203/EXEC", fmt.Sprintf("%s: Failed at step EXEC spawning %s: No such file or directory", n, exe)
	case kindUser:
		return "217/USER", fmt.Sprintf("%s: Failed to determine user credentials: No such process", n)
	case kindGroup:
		return "216/GROUP", fmt.Sprintf("%s: Failed to determine group credentials: No such process", n)
	}
	return "1/FAILURE", fmt.Sprintf("%s: %s", n, p.msg)
}

// SetEnabled creates or removes the [Install] symlinks (as Changes) and
// logs systemd's reload.
func (s *Sim) SetEnabled(ctx context.Context, name string, enabled bool) (EnableResult, error) {
	if err := ctx.Err(); err != nil {
		return EnableResult{}, fmt.Errorf("units: sim: set enabled: %w", err)
	}
	var res EnableResult
	err := s.update(func(st *simState) error {
		n, u, err := st.lookup(name)
		if err != nil {
			return err
		}
		res = EnableResult{Before: u.FileState, After: u.FileState, Changes: []Change{}}
		if strings.HasPrefix(u.FileState, "masked") {
			return fmt.Errorf("units: set enabled %q: unit file %s is masked", n, u.Path)
		}
		f := parseUnitFile(u.File)
		links := installLinks(n, f)
		if len(links) == 0 {
			if enabled {
				return fmt.Errorf("units: enable %q: %w", n, ErrStatic)
			}
			return nil
		}
		isEnabled := strings.HasPrefix(u.FileState, "enabled")
		if enabled == isEnabled {
			return nil
		}
		for _, l := range links {
			if enabled {
				res.Changes = append(res.Changes, Change{Type: "symlink", File: l, Destination: u.Path})
			} else {
				res.Changes = append(res.Changes, Change{Type: "unlink", File: l})
			}
		}
		u.FileState = "disabled"
		if enabled {
			u.FileState = "enabled"
		}
		res.After = u.FileState
		now := s.now()
		st.log(now, "", "systemd", 1, 6, "Reloading...")
		st.log(now, "", "systemd", 1, 6, fmt.Sprintf("Reloading finished in %d ms.", 180+hashOf(n)%300))
		return nil
	})
	return res, err
}

// installLinks are the symlinks enabling creates, from [Install].
func installLinks(n string, f unitFile) []string {
	var out []string
	for _, t := range f.list("Install", "WantedBy") {
		out = append(out, "/etc/systemd/system/"+t+".wants/"+n)
	}
	for _, t := range f.list("Install", "RequiredBy") {
		out = append(out, "/etc/systemd/system/"+t+".requires/"+n)
	}
	for _, a := range f.list("Install", "Alias") {
		out = append(out, "/etc/systemd/system/"+a)
	}
	return out
}

// Validate runs CheckUnitFile over the simulated filesystem.
func (s *Sim) Validate(ctx context.Context, name string) (Validation, error) {
	if err := ctx.Err(); err != nil {
		return Validation{}, fmt.Errorf("units: sim: validate: %w", err)
	}
	var v Validation
	err := s.view(func(st *simState) error {
		_, u, err := st.lookup(name)
		if err != nil {
			return err
		}
		v = CheckUnitFile(simFS(), u.File, st.exists)
		v.FragmentPath = u.Path
		return nil
	})
	return v, err
}

// log appends a journal entry, keeping times strictly increasing so the
// order of lines written within one operation survives sorting.
func (st *simState) log(now time.Time, unit, ident string, pid, prio int, msg string) {
	if n := len(st.Journal); n > 0 && !now.After(st.Journal[n-1].Time) {
		now = st.Journal[n-1].Time.Add(time.Millisecond)
	}
	st.Journal = append(st.Journal, simEntry{Time: now, Unit: unit, Identifier: ident, PID: pid, Priority: prio, Message: msg})
}

// logSystemd appends a line systemd (PID 1) writes about unit.
func (st *simState) logSystemd(now time.Time, unit string, prio int, format string, args ...any) {
	st.log(now, unit, "systemd", 1, prio, fmt.Sprintf(format, args...))
}

// exeName is the syslog identifier of a unit's main process: its
// executable's base name.
func exeName(f unitFile) string {
	_, rest := splitExecPrefix(f.last("Service", "ExecStart"))
	return path.Base(firstWord(rest))
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// cpuRate is how many CPU nanoseconds per second a sim unit uses while
// active: 0.1% to 2% of a core, fixed per name.
func cpuRate(name string) uint64 { return (1 + hashOf(name)%20) * 1_000_000 }

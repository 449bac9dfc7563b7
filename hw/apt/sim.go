package apt

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/statefile"
)

// Sim is a simulated package manager for laptops, demos and tests. Its
// state (installed packages, the archive's versions, held packages, the
// dpkg lock) lives in a JSON file shared by the agent (reads) and the
// helper (runs), as both share the real dpkg database; a person may edit
// it, e.g. to publish a newer version. The helper runs it through a
// units.SimTransient whose programs (Programs) play apt-get on that file,
// writing the same status lines and dpkg log lines the real one does.
type Sim struct {
	file statefile.JSON[simState]
	dir  string
	// Step is how long each simulated download or install step takes;
	// tests set it to 0.
	Step time.Duration
}

var _ Source = (*Sim)(nil)

// SimPackage is one package of the simulated archive.
type SimPackage struct {
	Version      string `json:"version"`
	Origin       string `json:"origin"`
	Security     bool   `json:"security,omitempty"`
	Size         int64  `json:"size"`
	InstalledKiB int64  `json:"installed_kib"`
	// New packages are installed by an upgrade as a dependency of another
	// (a new kernel); Conffile is a configuration file the owner changed,
	// which the upgrade keeps.
	New      bool   `json:"new,omitempty"`
	Conffile string `json:"conffile,omitempty"`
	// ReleaseDate and ReleaseNotes are what raspi-mcp's own repository
	// adds to its packages.
	ReleaseDate  time.Time `json:"release_date,omitzero"`
	ReleaseNotes string    `json:"release_notes,omitempty"`
}

type simState struct {
	Installed      map[string]string     `json:"installed"`       // name -> version
	InstalledKiB   map[string]int64      `json:"installed_kib"`   // name -> size
	Archive        map[string]SimPackage `json:"archive"`         // name -> candidate
	Held           []string              `json:"held"`            // apt-mark hold
	ListsUpdated   time.Time             `json:"lists_updated"`   // last apt-get update
	RebootRequired []string              `json:"reboot_required"` // packages that asked for a reboot
	Lock           *Holder               `json:"lock,omitempty"`  // a simulated other holder of the dpkg lock
	// Pause makes the simulated apt-get wait at the start of a phase
	// ("download" or "install", after dpkg has started) until it is
	// cleared, so tests and demos can act in the middle of a run.
	Pause string `json:"pause,omitempty"`
	// Channel is the suite raspi-mcp's candidate comes from.
	Channel string `json:"channel"`
}

// Names of the files in the sim directory.
const (
	simFile    = "apt.json"
	simDpkgLog = "dpkg.log"
	simStatus  = "apt-status"
)

// SimAptGet is the simulated apt-get's path; SimShell the shell that
// Runner wraps it in.
const (
	SimAptGet = "/usr/bin/apt-get"
	SimShell  = "/bin/sh"
)

// NewSim opens the state file in dir, seeding it when missing or empty.
func NewSim(dir string) (*Sim, error) {
	s := &Sim{file: statefile.JSON[simState]{File: statefile.File{Path: filepath.Join(dir, simFile), What: "apt: sim"}, Check: (*simState).fill},
		dir: dir, Step: 150 * time.Millisecond}
	_, err := s.file.Open(func() *simState { return seed(time.Now()) })
	return s, err
}

// seed is a Raspberry Pi OS board with a few updates waiting: one
// security fix, a kernel that brings a new package and needs a reboot, a
// held firmware package, and a newer raspi-mcp on the stable channel.
func seed(now time.Time) *simState {
	const deb, sec, rpi, own = "Debian:12.8/stable", "Debian-Security:12/stable-security", "Raspberry Pi Foundation:stable/bookworm", "raspi-mcp:stable/stable"
	return &simState{
		Installed: map[string]string{
			"openssl": "3.0.14-1~deb12u2", "libssl3": "3.0.14-1~deb12u2", "tzdata": "2024a-0+deb12u1", "curl": "7.88.1-10+deb12u7",
			"linux-image-rpi-v8": "1:6.6.47-1+rpt1", "raspi-firmware": "1:1.20240902-1", "raspi-mcp": "0.3.0", "bash": "5.2.15-2+b7",
			"nginx": "1.22.1-9",
		},
		InstalledKiB: map[string]int64{"openssl": 2300, "libssl3": 6000, "tzdata": 3200, "curl": 500, "linux-image-rpi-v8": 40, "raspi-firmware": 30000, "raspi-mcp": 21000, "bash": 7100, "nginx": 1200},
		Archive: map[string]SimPackage{
			"openssl":                       {Version: "3.0.15-1~deb12u1", Origin: sec, Security: true, Size: 1430000, InstalledKiB: 2310, Conffile: "/etc/ssl/openssl.cnf"},
			"libssl3":                       {Version: "3.0.15-1~deb12u1", Origin: sec, Security: true, Size: 2020000, InstalledKiB: 6040},
			"tzdata":                        {Version: "2024b-0+deb12u1", Origin: deb, Size: 256000, InstalledKiB: 3210},
			"linux-image-rpi-v8":            {Version: "1:6.6.51-1+rpt3", Origin: rpi, Size: 9000, InstalledKiB: 40},
			"linux-image-6.6.51+rpt-rpi-v8": {Version: "1:6.6.51-1+rpt3", Origin: rpi, Size: 24000000, InstalledKiB: 61000, New: true},
			"raspi-firmware":                {Version: "1:1.20241008-1", Origin: rpi, Size: 12000000, InstalledKiB: 31000},
			"raspi-mcp": {Version: "0.4.0", Origin: own, Size: 7000000, InstalledKiB: 21500,
				ReleaseDate: now.Add(-72 * time.Hour).UTC().Truncate(time.Second), ReleaseNotes: "https://github.com/raspi-mcp/raspi-mcp/releases/tag/v0.4.0"},
		},
		Held:         []string{"raspi-firmware"},
		ListsUpdated: now.Add(-26 * time.Hour).UTC().Truncate(time.Second),
		Channel:      "stable",
	}
}

func (s *Sim) view(fn func(st *simState) error) error { return s.file.Read(fn) }

func (s *Sim) update(fn func(st *simState) error) error { return s.file.Change(fn) }

// fill gives a state file that lacks them its empty maps.
func (st *simState) fill() error {
	if st.Installed == nil {
		st.Installed = map[string]string{}
	}
	if st.InstalledKiB == nil {
		st.InstalledKiB = map[string]int64{}
	}
	if st.Archive == nil {
		st.Archive = map[string]SimPackage{}
	}
	return nil
}

// plan is what apt-get -s dist-upgrade would say of st.
func (st *simState) plan() Plan {
	p := Plan{Upgrades: []Change{}, Installs: []Change{}, Removals: []Change{}, Held: []string{}}
	for _, name := range slices.Sorted(maps.Keys(st.Archive)) {
		a := st.Archive[name]
		from, installed := st.Installed[name]
		c := Change{Name: name, From: from, To: a.Version, Origin: a.Origin, Security: a.Security, Arch: "arm64"}
		switch {
		case !installed && a.New && st.newNeeded(name):
			p.Installs = append(p.Installs, c)
		case !installed || CompareVersions(a.Version, from) <= 0:
		case slices.Contains(st.Held, name):
			p.Held = append(p.Held, name)
		default:
			p.Upgrades = append(p.Upgrades, c)
		}
	}
	return p
}

// newNeeded: a new package comes with an upgrade of the package whose name
// it extends (linux-image-6.6.51+rpt-rpi-v8 with linux-image-rpi-v8).
func (st *simState) newNeeded(name string) bool {
	for inst, v := range st.Installed {
		if a, ok := st.Archive[inst]; ok && !a.New && CompareVersions(a.Version, v) > 0 && !slices.Contains(st.Held, inst) &&
			strings.HasPrefix(name, strings.TrimSuffix(inst, "-rpi-v8")) {
			return true
		}
	}
	return false
}

// Simulate implements Source.
func (s *Sim) Simulate(ctx context.Context) (Plan, error) {
	var p Plan
	err := s.view(func(st *simState) error { p = st.plan(); return nil })
	return p, err
}

// Sizes implements Source.
func (s *Sim) Sizes(ctx context.Context, p Plan) (Sizes, error) {
	var out Sizes
	err := s.view(func(st *simState) error {
		for _, c := range append(slices.Clip(p.Upgrades), p.Installs...) {
			a := st.Archive[c.Name]
			out.DownloadBytes += a.Size
			out.InstalledSizeDelta += (a.InstalledKiB - st.InstalledKiB[c.Name]) * 1024
		}
		for _, c := range p.Removals {
			out.InstalledSizeDelta -= st.InstalledKiB[c.Name] * 1024
		}
		return nil
	})
	return out, err
}

// Policy implements Source.
func (s *Sim) Policy(ctx context.Context, pkg string) (Policy, error) {
	if err := ValidName(pkg); err != nil {
		return Policy{}, err
	}
	var p Policy
	err := s.view(func(st *simState) error {
		p.Installed = st.Installed[pkg]
		p.Candidate = p.Installed
		a, ok := st.Archive[pkg]
		if ok && (p.Installed == "" || CompareVersions(a.Version, p.Installed) > 0) {
			p.Candidate = a.Version
		}
		if ok && p.Candidate == a.Version {
			_, suite, _ := strings.Cut(a.Origin, "/")
			p.CandidateSuites = []string{suite}
		}
		return nil
	})
	return p, err
}

// State implements Source.
func (s *Sim) State(ctx context.Context) (State, error) {
	var out State
	err := s.view(func(st *simState) error {
		out = State{RebootRequired: len(st.RebootRequired) > 0, RebootPackages: slices.Clone(st.RebootRequired), ListsUpdated: st.ListsUpdated}
		if st.Lock != nil {
			h := *st.Lock
			out.Lock = &h
		}
		return nil
	})
	return out, err
}

// Release implements Source.
func (s *Sim) Release(ctx context.Context, pkg, version string) (time.Time, string, error) {
	var d time.Time
	var n string
	err := s.view(func(st *simState) error {
		if a, ok := st.Archive[pkg]; ok && a.Version == version {
			d, n = a.ReleaseDate, a.ReleaseNotes
		}
		return nil
	})
	return d, n, err
}

// LockHolder is the simulated dpkg lock, for Runner.Lock.
func (s *Sim) LockHolder() (*Holder, error) {
	st, err := s.State(context.Background())
	return st.Lock, err
}

// HoldLock makes a simulated process hold the dpkg lock (nil releases it).
func (s *Sim) HoldLock(h *Holder) error {
	return s.update(func(st *simState) error { st.Lock = h; return nil })
}

// Publish puts a version of a package into the simulated archive, as a
// new upload to the mirror would.
func (s *Sim) Publish(name string, p SimPackage) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if err := ValidVersion(p.Version); err != nil {
		return err
	}
	return s.update(func(st *simState) error { st.Archive[name] = p; return nil })
}

// SetPause makes the simulated apt-get wait at the start of a phase
// ("download" or "install"); "" lets it go on.
func (s *Sim) SetPause(phase string) error {
	return s.update(func(st *simState) error { st.Pause = phase; return nil })
}

// Installed implements Source.
func (s *Sim) Installed(ctx context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	err := s.view(func(st *simState) error {
		for _, n := range names {
			if v, ok := st.Installed[n]; ok {
				out[n] = v
			}
		}
		return nil
	})
	return out, err
}

// Version is the installed version of a package, "" if none.
func (s *Sim) Version(name string) (string, error) {
	var v string
	err := s.view(func(st *simState) error { v = st.Installed[name]; return nil })
	return v, err
}

// Channel is the suite raspi-mcp comes from.
func (s *Sim) Channel() (string, error) {
	var c string
	err := s.view(func(st *simState) error { c = st.Channel; return nil })
	return c, err
}

// DpkgLog is the simulated dpkg log, for Runner.DpkgLog.
func (s *Sim) DpkgLog() string { return filepath.Join(s.dir, simDpkgLog) }

// StatusDir is where a Runner on the sim keeps its status files.
func (s *Sim) StatusDir() string { return filepath.Join(s.dir, simStatus) }

// Programs are the simulated commands for a units.SimTransient: the
// shell that opens the status file and apt-get behind it.
func (s *Sim) Programs() map[string]units.SimProgram {
	return map[string]units.SimProgram{SimShell: s.shell}
}

// Runner is a Runner on this simulated package manager.
func (s *Sim) Runner(t units.Transient) *Runner {
	return &Runner{Units: t, Dir: s.StatusDir(), Lock: s.LockHolder, DpkgLog: s.DpkgLog(), AptGet: SimAptGet, Shell: SimShell}
}

// shell plays Runner's status script: sh -c SCRIPT NAME STATUSFILE apt-get ARGS.
func (s *Sim) shell(ctx context.Context, argv, env []string) int {
	if len(argv) < 6 || argv[1] != "-c" || argv[2] != statusScript || argv[5] != SimAptGet {
		return 127
	}
	f, err := os.OpenFile(argv[4], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 1
	}
	defer f.Close()
	return s.aptGet(ctx, f, argv[6:])
}

// aptGet plays apt-get update and install (with --download-only or
// --no-download) on the state file, writing status lines to status.
func (s *Sim) aptGet(ctx context.Context, status io.Writer, args []string) int {
	var targets []string
	mode, verb := "", ""
	for i, a := range args {
		switch {
		case a == "--":
			targets = args[i+1:]
		case a == "update" || a == "install":
			verb = a
		case a == "--download-only" || a == "--no-download":
			mode = a
		}
		if a == "--" {
			break
		}
	}
	st, err := s.snapshot()
	if err != nil {
		return 100
	}
	if st.Lock != nil {
		fmt.Fprintf(status, "pmerror:apt:0:Could not get lock /var/lib/dpkg/lock-frontend. It is held by process %d (%s)\n", st.Lock.PID, st.Lock.Command)
		return 100
	}
	switch verb {
	case "update":
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(status, "dlstatus:%d:%d:Retrieving file %d of 3\n", i, i*33, i)
			if !s.sleep(ctx) {
				return 130
			}
		}
		return s.exit(s.update(func(st *simState) error { st.ListsUpdated = time.Now().UTC().Truncate(time.Second); return nil }))
	case "install":
	default:
		return 100
	}
	// Every target must be exactly what the archive offers, as apt-get
	// install name=version refuses a version it does not have.
	for _, t := range targets {
		name, ver, install := strings.Cut(t, "=")
		if !install {
			name = strings.TrimSuffix(t, "-")
			if _, ok := st.Installed[name]; !ok {
				fmt.Fprintf(status, "pmerror:%s:0:Package '%s' is not installed, so not removed\n", name, name)
				return 100
			}
			continue
		}
		if a, ok := st.Archive[name]; !ok || a.Version != ver {
			fmt.Fprintf(status, "pmerror:%s:0:Version '%s' for '%s' was not found\n", name, ver, name)
			return 100
		}
	}
	if mode == "--download-only" {
		if !s.waitPause(ctx, "download") {
			return 130
		}
		for i, t := range targets {
			if strings.Contains(t, "=") {
				fmt.Fprintf(status, "dlstatus:%d:%.4g:Retrieving file %d of %d\n", i+1, float64(i+1)*100/float64(len(targets)), i+1, len(targets))
				if !s.sleep(ctx) {
					return 130
				}
			}
		}
		return 0
	}
	fmt.Fprintf(status, "pmstatus:dpkg-exec:0:Running dpkg\n")
	if !s.waitPause(ctx, "install") {
		// A real dpkg is not stopped here: Runner never stops this phase.
		return 130
	}
	var log strings.Builder
	now := time.Now().Local().Format("2006-01-02 15:04:05")
	err = s.update(func(st *simState) error {
		for i, t := range targets {
			name, ver, install := strings.Cut(t, "=")
			pct := float64(i+1) * 100 / float64(len(targets))
			if !install {
				name = strings.TrimSuffix(t, "-")
				fmt.Fprintf(status, "pmstatus:%s:%.4g:Removing %s (arm64)\n", name, pct, name)
				fmt.Fprintf(&log, "%s remove %s:arm64 %s <none>\n", now, name, st.Installed[name])
				delete(st.Installed, name)
				continue
			}
			a := st.Archive[name]
			fmt.Fprintf(status, "pmstatus:%s:%.4g:Unpacking %s (arm64)\n", name, pct, name)
			fmt.Fprintf(&log, "%s upgrade %s:arm64 %s %s\n", now, name, orDefault(st.Installed[name], "<none>"), ver)
			st.Installed[name], st.InstalledKiB[name] = ver, a.InstalledKiB
			if a.Conffile != "" {
				fmt.Fprintf(&log, "%s conffile %s keep\n", now, a.Conffile)
			}
			if strings.HasPrefix(name, "linux-image-") || name == "libc6" {
				if !slices.Contains(st.RebootRequired, name) {
					st.RebootRequired = append(st.RebootRequired, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		return 100
	}
	f, err := os.OpenFile(s.DpkgLog(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.WriteString(log.String())
		f.Close()
	}
	return s.exit(err)
}

func (s *Sim) snapshot() (*simState, error) {
	var out *simState
	err := s.view(func(st *simState) error { out = st; return nil })
	return out, err
}

func (s *Sim) exit(err error) int {
	if err != nil {
		return 100
	}
	return 0
}

// sleep waits one step; false if ctx ended (the run was stopped).
func (s *Sim) sleep(ctx context.Context) bool {
	if s.Step <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(s.Step)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// waitPause waits while the state file says to pause at phase.
func (s *Sim) waitPause(ctx context.Context, phase string) bool {
	for {
		st, err := s.snapshot()
		if err != nil || st.Pause != phase {
			return ctx.Err() == nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

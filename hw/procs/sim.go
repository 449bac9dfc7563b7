package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/statefile"
)

// Sim is the process table of the simulated board (laptop mode, demos,
// tests): a Raspberry Pi running systemd, sshd, nginx, a Python sensor
// logger, an ffmpeg job that keeps one core busy, and raspi-mcp itself.
// It never reads or signals a process of the machine it runs on.
//
// Its state lives in a JSON file so that the agent process (which reads it
// through [Sim.FS]) and the helper process (which signals it) see one
// table, as they share one kernel on a Pi. Every call opens the file and
// holds an flock on it: shared for reads, exclusive for signals. CPU time
// is not stored as it grows: each process has a rate (share of one core),
// and its ticks are computed from the clock, so a reading is a pure
// function of the file and the time.
//
// [Sim.FS] renders the table as a /proc tree (plus etc/passwd) that the
// parsers of this package read exactly as they read the real one, so
// laptop mode exercises the same code as a Pi. As on a Pi, the agent's
// user (raspi-mcp) may read only its own processes' exe, cwd, environ,
// fd/, io and smaps; the others are permission denied.
type Sim struct {
	file    statefile.JSON[simState]
	now     func() time.Time
	systemd SimSystemd // nil: the table's services run whatever systemd says
}

// SimOptions configures a new table file. CPUs and MemTotal must be the
// board's, as system information reports them, so the tools agree.
type SimOptions struct {
	CPUs     int              // default 4
	MemTotal uint64           // bytes; default 4 GiB
	Now      func() time.Time // default time.Now
	// Systemd, when set, owns the table's services (see [SimSystemd]).
	Systemd SimSystemd
}

// SimAgentUID is the uid of the agent's user on the simulated board: the
// only processes whose private /proc files the agent may read.
const SimAgentUID = 998

// simHz is USER_HZ of the rendered tree; LiveOptions' ClockTick agrees.
const simHz = 100

// simState is the JSON file.
type simState struct {
	Version  int        `json:"version"`
	Boot     int64      `json:"boot"` // Unix seconds: proc/stat btime
	CPUs     int        `json:"cpus"`
	MemTotal uint64     `json:"mem_total"` // bytes
	Procs    []*simProc `json:"procs"`     // sorted by PID
}

// simProc is one process. CPU ticks are Ticks plus Rate×simHz per second
// of uptime since Since, unless it is stopped.
type simProc struct {
	PID     int      `json:"pid"`
	PPID    int      `json:"ppid"`
	UID     int      `json:"uid"`
	Comm    string   `json:"comm"`
	Cmdline []string `json:"cmdline,omitempty"`
	Exe     string   `json:"exe,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"`
	State   string   `json:"state"`          // R, S, I or T (stopped)
	Was     string   `json:"was,omitempty"`  // the state before a STOP
	Start   float64  `json:"start"`          // seconds after boot
	Rate    float64  `json:"rate"`           // share of one core while it runs
	Ticks   float64  `json:"ticks"`          // CPU ticks accrued until Since
	Since   float64  `json:"since"`          // uptime seconds
	RSS     uint64   `json:"rss_kb"`         // kB
	VMS     uint64   `json:"vms_kb"`         // kB
	Threads int      `json:"threads"`        //
	Nice    int      `json:"nice,omitempty"` //
	FDs     []simFD  `json:"fds,omitempty"`
	// Unit is the systemd unit the process belongs to: see [SimSystemd].
	Unit   string `json:"unit,omitempty"`
	Kernel bool   `json:"kernel,omitempty"`
	// Daemon processes catch HUP, USR1, USR2 and ALRM (reload, reopen
	// logs); for the others those signals end the process, their default.
	Daemon bool `json:"daemon,omitempty"`
	// Self marks raspi-mcp itself (the agent and the helper), never
	// signalled.
	Self bool `json:"self,omitempty"`
}

// simFD is one open descriptor: a path, "socket:[INODE]", "pipe:[N]"...
type simFD struct {
	FD     int    `json:"fd"`
	Target string `json:"target"`
	Mode   string `json:"mode"` // r, w or rw
}

// NewSim opens the table file at path, creating it with the seeded board
// (booted an hour ago) when it is missing or empty. A file that no longer
// parses is reported, not overwritten.
func NewSim(path string, o SimOptions) (*Sim, error) {
	s := &Sim{file: statefile.JSON[simState]{File: statefile.File{Path: path, What: "procs: sim"}, Check: (*simState).check},
		now: o.Now, systemd: o.Systemd}
	if s.now == nil {
		s.now = time.Now
	}
	readOnly, err := s.file.Open(func() *simState { return seedProcs(s.now(), o) })
	if readOnly {
		return s, err
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// BootTime is the simulated board's boot: system uptime is measured from it.
func (s *Sim) BootTime() (time.Time, error) {
	var boot time.Time
	err := s.view(func(st *simState) error { boot = time.Unix(st.Boot, 0); return nil })
	return boot, err
}

// IsSelf reports whether pid is raspi-mcp itself on the simulated board
// (the agent or the helper), which is never signalled.
func (s *Sim) IsSelf(pid int) bool {
	svcs, err := s.services()
	if err != nil {
		return false
	}
	self := false
	_ = s.view(func(st *simState) error {
		for _, p := range st.withServices(svcs) {
			self = self || (p.PID == pid && p.Self)
		}
		return nil
	})
	return self
}

// Signal delivers sig ("TERM", "KILL", "STOP"...) to the simulated pid if
// it still started at startTicks: TERM, INT, QUIT and KILL end it; STOP
// freezes it (state stopped, no CPU) and CONT resumes it; HUP, USR1, USR2
// and ALRM end a process that does not catch them and change nothing in a
// daemon; WINCH is ignored. Policy (who may be signalled) is the caller's:
// Sim only refuses what the kernel would. The error wraps fs.ErrNotExist
// when the pid is not in the table and [ErrReused] when it names another
// process; nothing changes then.
func (s *Sim) Signal(pid int, startTicks uint64, sig string) error {
	svcs, err := s.services()
	if err != nil {
		return fmt.Errorf("procs: sim: %w", err)
	}
	return s.update(func(st *simState) error {
		st.settle(svcs)
		p := st.find(pid)
		if p == nil {
			return fmt.Errorf("procs: sim: pid %d: no such process: %w", pid, fs.ErrNotExist)
		}
		if uint64(p.Start*simHz) != startTicks {
			return fmt.Errorf("procs: sim: pid %d started at tick %d, not %d: %w", pid, uint64(p.Start*simHz), startTicks, ErrReused)
		}
		up := st.uptime(s.now())
		name := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
		switch name {
		case "TERM", "INT", "QUIT", "KILL":
			return s.exit(st, p, name)
		case "HUP", "USR1", "USR2", "ALRM":
			if !p.Daemon {
				return s.exit(st, p, name)
			}
		case "STOP", "TSTP":
			if p.State != "T" {
				p.Ticks, p.Since = p.ticks(up), up
				p.Was, p.State = p.State, "T"
			}
		case "CONT":
			if p.State == "T" {
				p.Since, p.State, p.Was = up, cmpOr(p.Was, "S"), ""
			}
		case "WINCH":
		default:
			return fmt.Errorf("procs: sim: signal %q: not simulated", sig)
		}
		return nil
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// exit ends p. When p was a unit's main process, systemd is told, and
// the unit's other processes end with it (systemd stops what is left of
// the unit's control group).
func (s *Sim) exit(st *simState, p *simProc, sig string) error {
	st.exit(p)
	if s.systemd != nil && p.Unit != "" && p.PPID == 1 {
		st.Procs = slices.DeleteFunc(st.Procs, func(q *simProc) bool { return q.Unit == p.Unit })
		if err := s.systemd.MainExited(p.Unit, p.PID, sig); err != nil {
			return fmt.Errorf("procs: sim: %s: %w", p.Unit, err)
		}
	}
	return nil
}

// exit removes p; its children are reparented to init, as the kernel does.
func (st *simState) exit(p *simProc) {
	st.Procs = slices.DeleteFunc(st.Procs, func(q *simProc) bool { return q == p })
	for _, q := range st.Procs {
		if q.PPID == p.PID {
			q.PPID = 1
		}
	}
}

func (st *simState) find(pid int) *simProc {
	for _, p := range st.Procs {
		if p.PID == pid {
			return p
		}
	}
	return nil
}

// uptime is seconds since boot at now; never negative.
func (st *simState) uptime(now time.Time) float64 {
	return max(float64(now.UnixNano()-st.Boot*1e9)/1e9, 0)
}

// ticks is p's CPU time at uptime up, in clock ticks.
func (p *simProc) ticks(up float64) float64 {
	if p.State == "T" || up < p.Since {
		return p.Ticks
	}
	return p.Ticks + p.Rate*simHz*(up-p.Since)
}

// view runs fn on the state under a shared lock.
func (s *Sim) view(fn func(st *simState) error) error { return s.file.Read(fn) }

// update runs fn under an exclusive lock and writes the state back if fn
// succeeded; an error from fn changes nothing.
func (s *Sim) update(fn func(st *simState) error) error { return s.file.Change(fn) }

// check refuses a table no board could have and orders it by pid.
func (st *simState) check() error {
	if st.CPUs <= 0 || st.MemTotal == 0 || st.Boot <= 0 {
		return errors.New("cpus, mem_total and boot must be positive")
	}
	for _, p := range st.Procs {
		if p == nil || p.PID <= 0 || math.IsNaN(p.Rate) || p.Rate < 0 {
			return errors.New("a process without a positive pid or with a negative rate")
		}
	}
	slices.SortFunc(st.Procs, func(a, b *simProc) int { return a.PID - b.PID })
	return nil
}

// UserID returns the uid of name in fsys's etc/passwd: the helper resolves
// [process] protected_users through the simulated board's accounts.
func UserID(fsys fs.FS, name string) (int, bool) {
	r := newReader(fsys, Options{})
	r.loadUsers()
	for uid, n := range r.users {
		if n == name {
			return uid, true
		}
	}
	return 0, false
}

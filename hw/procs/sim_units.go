package procs

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SimSystemd is the simulated systemd whose units own the services of the
// table: a service's processes exist while its unit runs, under the main
// PID the unit has now (a restart gives them a new PID and start time; a
// unit started later, with no process in the table, gets one built from
// its ExecStart), and a signal that ends a unit's main process is
// reported to it, so the unit goes inactive, fails or restarts as systemd
// would have it.
type SimSystemd interface {
	Services() ([]SimService, error)
	MainExited(unit string, pid int, sig string) error
}

// SimService is a running unit's main process.
type SimService struct {
	Unit        string
	PID         int
	Since       time.Time
	Exe         string
	Args        []string
	User        string // "" for root
	MemoryBytes uint64
}

// services returns the running units, nil without a SimSystemd (the table
// is then used as it is).
func (s *Sim) services() ([]SimService, error) {
	if s.systemd == nil {
		return nil, nil
	}
	return s.systemd.Services()
}

// withServices returns the table as the running units make it: the
// processes of a unit that no longer runs are gone, those of a unit whose
// main PID changed are moved to it (children keep their distance from the
// main PID), and a running unit without a process gets one. Processes of
// no unit are kept. It never changes st; a pid claimed twice keeps its
// first owner (processes of no unit first).
func (st *simState) withServices(svcs []SimService) []*simProc {
	if svcs == nil {
		return st.Procs
	}
	running := map[string]SimService{}
	for _, v := range svcs {
		running[v.Unit] = v
	}
	// A unit's main process is its child of init (the lowest pid if
	// several, or if none is).
	mainOf := map[string]int{}
	for _, p := range st.Procs {
		if p.Unit != "" && p.PPID == 1 && (mainOf[p.Unit] == 0 || p.PID < mainOf[p.Unit]) {
			mainOf[p.Unit] = p.PID
		}
	}
	for _, p := range st.Procs {
		if p.Unit != "" && mainOf[p.Unit] == 0 {
			mainOf[p.Unit] = p.PID // ascending order: the lowest
		}
	}
	out := make([]*simProc, 0, len(st.Procs)+2)
	var units []*simProc
	for _, p := range st.Procs {
		if p.Unit == "" {
			out = append(out, p)
			continue
		}
		v, ok := running[p.Unit]
		if !ok {
			continue
		}
		if shift := v.PID - mainOf[p.Unit]; shift != 0 {
			q := *p
			q.PID += shift
			if q.PPID != 1 {
				q.PPID += shift
			}
			start := max(float64(v.Since.UnixNano()-st.Boot*1e9)/1e9, 0)
			q.Start, q.Since, q.Ticks, q.FDs = start, start, 0, slices.Clone(p.FDs)
			if q.State == "T" {
				q.State, q.Was = cmpOr(q.Was, "S"), ""
			}
			p = &q
		}
		units = append(units, p)
	}
	covered := map[string]bool{}
	for _, p := range units {
		covered[p.Unit] = true
	}
	for _, v := range svcs {
		if !covered[v.Unit] && v.PID > 0 {
			units = append(units, st.serviceProc(v))
		}
	}
	taken := map[int]bool{}
	for _, p := range out {
		taken[p.PID] = true
	}
	for _, p := range units {
		if !taken[p.PID] {
			taken[p.PID] = true
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *simProc) int { return a.PID - b.PID })
	return out
}

// serviceProc builds the process of a unit the table has no entry for.
func (st *simState) serviceProc(v SimService) *simProc {
	uid := 0
	if v.User != "" {
		uid = SimAgentUID // an account the board lacks runs as a system user
		for _, line := range strings.Split(simPasswd, "\n") {
			if f := strings.Split(line, ":"); len(f) > 2 && f[0] == v.User {
				uid, _ = strconv.Atoi(f[2])
			}
		}
	}
	start := max(float64(v.Since.UnixNano()-st.Boot*1e9)/1e9, 0)
	comm := path.Base(v.Exe)
	if len(comm) > 15 {
		comm = comm[:15]
	}
	rss := max(v.MemoryBytes/1024/3, 1024)
	return &simProc{PID: v.PID, PPID: 1, UID: uid, Comm: comm, Cmdline: slices.Clone(v.Args), Exe: v.Exe, Cwd: "/", State: "S",
		Start: start, Since: start, Rate: 0.002, RSS: rss, VMS: rss * 4, Threads: 1, Daemon: true, Unit: v.Unit}
}

// settle makes the table what withServices shows, before a signal changes
// it: the units' processes are then found at the PIDs the tools showed.
func (st *simState) settle(svcs []SimService) {
	eff := st.withServices(svcs)
	st.Procs = make([]*simProc, len(eff))
	for i, p := range eff {
		q := *p
		st.Procs[i] = &q
	}
}

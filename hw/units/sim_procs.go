package units

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MainProcess is a running unit's main process as the simulated process
// table (procs.Sim) shows it.
type MainProcess struct {
	Unit        string
	PID         int
	Since       time.Time
	Exe         string   // ExecStart's program
	Args        []string // ExecStart split on spaces, program first
	User        string   // User=, "" for root
	MemoryBytes uint64
}

// MainProcesses lists the main processes of the active units, so that the
// simulated board's process table runs exactly the services this systemd
// says are running.
func (s *Sim) MainProcesses(ctx context.Context) ([]MainProcess, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("units: sim: main processes: %w", err)
	}
	var out []MainProcess
	err := s.view(func(st *simState) error {
		for _, n := range st.names() {
			u := st.Units[n]
			if !isActive(u.Active) || u.MainPID <= 0 {
				continue
			}
			f := parseUnitFile(u.File)
			_, cmd := splitExecPrefix(f.last("Service", "ExecStart"))
			args := strings.Fields(cmd)
			out = append(out, MainProcess{Unit: n, PID: u.MainPID, Since: u.ActiveSince, Exe: firstWord(cmd), Args: args,
				User: f.last("Service", "User"), MemoryBytes: u.MemoryBytes})
		}
		return nil
	})
	return out, err
}

// signalNumbers are the signals a process tool may send, for systemd's
// "status=15/TERM".
var signalNumbers = map[string]int{"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15}

// MainExited records that the main process pid of unit name was ended by
// signal sig ("TERM", "KILL"...), as systemd sees it: SIGTERM, SIGINT,
// SIGHUP and SIGPIPE are a clean exit for a service (inactive), any other
// signal is a failure (failed); Restart=always, or on-failure and
// on-abnormal after a failure, starts the unit again with a new main PID.
// A pid that is not the unit's main PID (any more) changes nothing.
func (s *Sim) MainExited(ctx context.Context, name string, pid int, sig string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("units: sim: main process exit: %w", err)
	}
	return s.update(func(st *simState) error {
		n, u, err := st.lookup(name)
		if err != nil {
			return err
		}
		if !isActive(u.Active) || u.MainPID != pid {
			return nil
		}
		now := s.now()
		f := parseUnitFile(u.File)
		cpu := st.unit(n, now).CPUNanos
		clean := slices.Contains([]string{"TERM", "INT", "HUP", "PIPE"}, sig)
		st.logSystemd(now, n, 5, "%s: Main process exited, code=killed, status=%d/%s", n, signalNumbers[sig], sig)
		if clean {
			st.logSystemd(now, n, 6, "%s: Deactivated successfully.", n)
			u.Active, u.Sub = "inactive", "dead"
		} else {
			st.logSystemd(now, n, 4, "%s: Failed with result 'signal'.", n)
			u.Active, u.Sub = "failed", "failed"
		}
		st.logSystemd(now, n, 6, "%s: Consumed %.3fs CPU time.", n, float64(cpu)/1e9)
		u.MainPID, u.ActiveSince, u.MemoryBytes = 0, time.Time{}, 0
		switch restart := f.last("Service", "Restart"); {
		case restart == "always", !clean && (restart == "on-failure" || restart == "on-abnormal"):
			u.Restarts++
			st.logSystemd(now, n, 6, "%s: Scheduled restart job, restart counter is at %d.", n, u.Restarts)
			st.start(n, now, map[string]bool{})
		}
		return nil
	})
}

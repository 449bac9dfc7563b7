package procs

import "slices"

// CPUPercent returns per-PID CPU use between two snapshots, the way top does
// in its default Irix mode: 100 = one whole core, so a multi-threaded
// process can exceed 100 (never 100 × cur.CPUs, the cap).
//
// A PID present in both snapshots with the same StartTicks counts the ticks
// it used between them over the uptime elapsed between them. A PID that is
// new in cur, or whose StartTicks differ (the PID was reused), counts from
// its own start: all its ticks over the time it has existed, never since
// boot, so a process started just before cur does not look idle and a
// reused PID does not inherit its predecessor's ticks. With a zero prev
// this gives every process's average since it started, as ps does.
//
// Every PID of cur is in the result; PIDs only in prev are not. Both
// snapshots' Procs must be sorted by PID, as [Read] returns them.
func CPUPercent(prev, cur Snapshot, o Options) map[int]float64 {
	hz := float64(o.hz())
	window := cur.Uptime - prev.Uptime
	ceiling := 0.0
	if cur.CPUs > 0 {
		ceiling = 100 * float64(cur.CPUs)
	}
	out := make(map[int]float64, len(cur.Procs))
	for i := range cur.Procs {
		p := &cur.Procs[i]
		ticks := p.UTime + p.STime
		var used, span float64
		j, found := slices.BinarySearchFunc(prev.Procs, p.PID, func(q Proc, pid int) int { return q.PID - pid })
		if found && prev.Procs[j].StartTicks == p.StartTicks && window > 0 {
			if before := prev.Procs[j].UTime + prev.Procs[j].STime; ticks > before {
				used = float64(ticks - before)
			}
			span = window
		} else {
			used = float64(ticks)
			// Uptime and StartTicks both count from boot; at least one
			// tick, so a process started within the last tick divides by
			// the tick it has existed in rather than by zero.
			span = max(cur.Uptime-float64(p.StartTicks)/hz, 1/hz)
		}
		pct := used / hz / span * 100
		if ceiling > 0 && pct > ceiling {
			pct = ceiling
		}
		out[p.PID] = pct
	}
	return out
}

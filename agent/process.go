package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// processSummary is one process as process.list_processes lists it: pid,
// name, command line, state, user, CPU and memory (spec 002 addendum §2.3).
type processSummary struct {
	PID           int      `json:"pid"`
	Name          string   `json:"name"`
	Cmdline       []string `json:"cmdline" jsonschema:"arguments; long command lines are cut with …"`
	Exe           string   `json:"exe,omitempty"`
	Cwd           string   `json:"cwd,omitempty"`
	Status        string   `json:"status"`
	Username      string   `json:"username"`
	CreateTime    float64  `json:"create_time" jsonschema:"Unix time the process started"`
	CPUPercent    float64  `json:"cpu_percent" jsonschema:"between two readings like top: 100 = one whole core"`
	MemoryPercent float64  `json:"memory_percent"`
	MemoryRSS     uint64   `json:"memory_rss"`
	MemoryVMS     uint64   `json:"memory_vms"`
	NumThreads    int      `json:"num_threads"`
	PPID          int      `json:"ppid"`
	Nice          int      `json:"nice"`
}

var processStatuses = []any{"running", "sleeping", "disk-sleep", "stopped", "zombie", "idle"}

// processFilter narrows process.list_processes: by user, name glob, CPU,
// memory and state (the tool catalog's filter examples, spec 002 addendum §5.1).
type processFilter struct {
	Username      string   `json:"username,omitempty"`
	NamePattern   string   `json:"name_pattern,omitempty" jsonschema:"glob, e.g. python*"`
	MinCPUPercent float64  `json:"min_cpu_percent,omitempty"`
	MinMemoryMB   float64  `json:"min_memory_mb,omitempty" jsonschema:"RSS in MiB"`
	Status        []string `json:"status,omitempty"`
	KernelThreads bool     `json:"include_kernel_threads,omitempty"`
}

// processListIn is process.list_processes: a filter, a sort and a page by
// limit and offset (spec 002 addendum §5).
type processListIn struct {
	Filter    processFilter `json:"filter,omitzero"`
	SortBy    string        `json:"sort_by,omitempty"`
	SortOrder string        `json:"sort_order,omitempty"`
	Limit     int           `json:"limit,omitempty"`
	Offset    int           `json:"offset,omitempty"`
}

// processListOut is one page, with the total matching and whether more follow
// (spec 002 addendum §5.2).
type processListOut struct {
	Processes      []processSummary `json:"processes"`
	TotalCount     int              `json:"total_count" jsonschema:"processes matching the filter"`
	ReturnedCount  int              `json:"returned_count"`
	HasMore        bool             `json:"has_more"`
	NextOffset     int              `json:"next_offset,omitempty"`
	Truncated      bool             `json:"truncated,omitempty" jsonschema:"the page was cut to stay within the response budget; continue at next_offset"`
	SampleInterval int              `json:"sample_interval_ms" jsonschema:"CPU percentages are over this window"`
	CPUCount       int              `json:"cpu_count"`
}

// processPIDIn names a process.
type processPIDIn struct {
	PID int `json:"pid"`
}

// ioCounters are a process's read and write calls and bytes
// (process.get_process_details' io_counters, spec 002 addendum §2.4).
type ioCounters struct {
	ReadCount  uint64 `json:"read_count"`
	WriteCount uint64 `json:"write_count"`
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
}

// openFile is one file descriptor.
type openFile struct {
	Path string `json:"path"`
	FD   int    `json:"fd"`
	Mode string `json:"mode,omitempty"`
}

// procConn is one socket of the process.
type procConn struct {
	FD            int    `json:"fd"`
	Family        string `json:"family"`
	Type          string `json:"type"`
	LocalAddress  string `json:"local_address"`
	LocalPort     int    `json:"local_port"`
	RemoteAddress string `json:"remote_address,omitempty"`
	RemotePort    int    `json:"remote_port,omitempty"`
	Status        string `json:"status,omitempty"`
}

// memoryMap is one mapped file, aggregated.
type memoryMap struct {
	Path  string `json:"path"`
	RSS   uint64 `json:"rss"`
	Size  uint64 `json:"size"`
	Perms string `json:"perms,omitempty"`
}

// cpuTimes is a process's CPU seconds in user and system mode
// (process.get_process_details' cpu_times, spec 002 addendum §2.4).
type cpuTimes struct {
	User   float64 `json:"user"`
	System float64 `json:"system"`
}

// processDetail is process.get_process_details: the summary plus I/O, open
// files, sockets, memory maps, environment and CPU times (spec 002 addendum §2.4).
type processDetail struct {
	processSummary
	IOCounters  *ioCounters       `json:"io_counters,omitempty"`
	OpenFiles   []openFile        `json:"open_files"`
	Connections []procConn        `json:"connections"`
	MemoryMaps  []memoryMap       `json:"memory_maps" jsonschema:"the 20 largest mappings by resident size"`
	Environment map[string]string `json:"environment,omitempty" jsonschema:"values of secret-looking keys are redacted"`
	CPUTimes    cpuTimes          `json:"cpu_times"`
	Hidden      []string          `json:"not_visible" jsonschema:"what the unprivileged agent may not read for this process"`
	Truncated   bool              `json:"truncated,omitempty"`
}

// processSignalIn is process.send_signal.
type processSignalIn struct {
	PID    int    `json:"pid"`
	Signal string `json:"signal"`
	tool.GuardArgs
}

// processSignalOut says what was signalled.
type processSignalOut struct {
	PID          int      `json:"pid"`
	Name         string   `json:"name"`
	Username     string   `json:"username"`
	Signal       string   `json:"signal"`
	Sent         bool     `json:"sent"`
	StillRunning bool     `json:"still_running" jsonschema:"the process was still there shortly after"`
	DryRun       bool     `json:"dry_run,omitempty"`
	Plan         []string `json:"plan,omitempty"`
}

// processPageBytes keeps one page of processes far below a client's token
// budget whatever limit is asked for.
const processPageBytes = 48 << 10

// readProcs reads every process: this machine's, or the simulated
// board's at one instant.
func (p *processTools) readProcs() (procs.Snapshot, error) {
	fsys := p.root
	if p.simProcs != nil {
		var err error
		if fsys, err = p.simProcs.Snapshot(); err != nil {
			return procs.Snapshot{}, err
		}
	}
	return procs.Read(fsys, procs.LiveOptions())
}

// readPID reads one process, from this machine or the simulated board's
// table at one instant.
func (p *processTools) readPID(pid int) (procs.Snapshot, error) {
	fsys := p.root
	if p.simProcs != nil {
		var err error
		if fsys, err = p.simProcs.Snapshot(); err != nil {
			return procs.Snapshot{}, err
		}
	}
	return procs.ReadPID(fsys, pid, procs.LiveOptions())
}

// procCPU is one process's CPU use over at least a window, reading only
// that process: against the newest process table the sampler keeps when one
// is recent, else against its own reading one window earlier. A whole table
// costs a read of every process for the sake of one.
func (p *processTools) procCPU(ctx context.Context, pid int) (procs.Snapshot, map[int]float64, error) {
	cur, err := p.readPID(pid)
	if err != nil {
		return procs.Snapshot{}, nil, err
	}
	prev, ok := p.cpu.baseline(cur.Uptime)
	if !ok {
		prev = cur
		select {
		case <-p.cpu.after(p.cpu.window):
		case <-ctx.Done():
			return procs.Snapshot{}, nil, ctx.Err()
		}
		if cur, err = p.readPID(pid); err != nil {
			return procs.Snapshot{}, nil, err
		}
	}
	return cur, procs.CPUPercent(prev, cur, procs.LiveOptions()), nil
}

// processTools are the process namespace's tools: what they read and whom
// they ask.
type processTools struct {
	conf     func() *config.Config
	helper   *client.Client      // sends the signals, and says its own pid
	root     fs.FS               // /proc and /etc/passwd
	simProcs *procs.Sim          // laptop mode's process table; nil on a device
	net      network             // the sockets of a process
	cpu      *cpuSampler         // readings shared by every caller
	wire     func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerProcess() {
	p := &processTools{conf: a.conf, helper: a.helper, root: a.root, simProcs: a.simProcs, net: a.net, wire: a.wire}
	p.cpu = newCPUSampler(func(context.Context) (procs.Snapshot, error) { return p.readProcs() })
	a.cpu = p.cpu // the tests reach the readings here
	p.register(a.tools)
}

func (p *processTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[processListIn, processListOut]{
		ID: "process.list_processes", Title: "Processes",
		Description: "Running processes with CPU (100 = one core), memory, user and command line.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("filter.status", tool.ItemsEnum(processStatuses...)), tool.P("filter.name_pattern", tool.MaxLen(256)), tool.P("filter.username", tool.MaxLen(64)),
			tool.P("filter.min_cpu_percent", tool.Min(0)), tool.P("filter.min_memory_mb", tool.Min(0)),
			tool.P("sort_by", tool.Enum("cpu_percent", "memory_percent", "memory_rss", "pid", "name", "create_time", "num_threads"), tool.Default("cpu_percent")),
			tool.P("sort_order", tool.Enum("asc", "desc"), tool.Default("desc")),
			tool.P("limit", tool.Min(1), tool.Max(1000), tool.Default(50)), tool.P("offset", tool.Min(0), tool.Max(1000000), tool.Default(0))},
		OutProps: []tool.Prop{tool.P("processes.status", tool.Enum(processStatuses...))},
		Run:      p.list,
		Summary: func(in processListIn, o processListOut) string {
			s := fmt.Sprintf("%d of %d processes", o.ReturnedCount, o.TotalCount)
			if len(o.Processes) > 0 && in.SortBy == "cpu_percent" {
				top := o.Processes[0]
				s += fmt.Sprintf("; top: %s (pid %d) %.1f%% CPU", top.Name, top.PID, top.CPUPercent)
			}
			return s
		},
	})
	tool.Add(r, tool.Spec[processPIDIn, processDetail]{
		ID: "process.get_process_details", Title: "Process details",
		Description: "One process in detail: resources, I/O, open files, sockets, environment (secrets redacted).",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{tool.P("pid", tool.Min(1), tool.Max(1<<22))},
		Example:     &processPIDIn{PID: 2},
		Run:         p.details,
		Summary: func(_ processPIDIn, d processDetail) string {
			return fmt.Sprintf("pid %d %s (%s, %s): %.1f%% CPU, %s RSS", d.PID, d.Name, d.Username, d.Status, d.CPUPercent, bytesH(d.MemoryRSS))
		},
	})
	tool.Add(r, tool.Spec[processSignalIn, processSignalOut]{
		ID: "process.send_signal", Title: "Signal a process",
		Description: "Send an allowed signal to a process; never PID 1, kernel threads, raspi-mcp or protected users'.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskHigh, Gate: config.SwitchProcessSignals},
		Destructive: true,
		Props:       []tool.Prop{tool.P("pid", tool.Min(2), tool.Max(1<<22)), tool.P("signal", tool.Enum(signalNames()...))},
		Spelling:    signalSpelling,
		Example:     &processSignalIn{PID: 4194000, Signal: "TERM"}, // a PID no process has in practice: signals nothing
		Run:         p.signal,
		Summary: func(in processSignalIn, o processSignalOut) string {
			if o.DryRun {
				return fmt.Sprintf("would send SIG%s to pid %d (%s, %s)", o.Signal, o.PID, o.Name, o.Username)
			}
			s := fmt.Sprintf("SIG%s sent to pid %d (%s)", o.Signal, o.PID, o.Name)
			if !o.StillRunning {
				s += "; it has exited"
			}
			return s
		},
	})
}

func summaryOfProc(p procs.Proc, cpu map[int]float64, memTotal uint64) processSummary {
	s := processSummary{PID: p.PID, Name: p.Name, Cmdline: clipArgs(p.Cmdline, 512), Exe: p.Exe, Cwd: p.Cwd, Status: p.State,
		Username: p.Username, CreateTime: float64(p.StartTime.UnixMilli()) / 1000, CPUPercent: round1(cpu[p.PID]),
		MemoryRSS: p.RSS, MemoryVMS: p.VMS, NumThreads: max(p.Threads, 1), PPID: p.PPID, Nice: p.Nice}
	if memTotal > 0 {
		s.MemoryPercent = round2(clamp(float64(p.RSS)/float64(memTotal)*100, 0, 100))
	}
	if !slices.Contains(processStatuses, any(s.Status)) {
		s.Status = "sleeping"
	}
	return s
}

// clipArgs keeps a command line within n bytes: a Java or Node command line
// can be kilobytes, and it would crowd out the other processes.
func clipArgs(args []string, n int) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if n <= 0 {
			out = append(out, "…")
			break
		}
		if len(a) > n {
			a = a[:n] + "…"
		}
		n -= len(a)
		out = append(out, a)
	}
	return out
}

func (f processFilter) match(p procs.Proc, s processSummary) bool {
	switch {
	case p.Kernel && !f.KernelThreads:
		return false
	case f.Username != "" && s.Username != f.Username:
		return false
	case f.MinCPUPercent > 0 && s.CPUPercent < f.MinCPUPercent:
		return false
	case f.MinMemoryMB > 0 && float64(s.MemoryRSS) < f.MinMemoryMB*(1<<20):
		return false
	case len(f.Status) > 0 && !slices.Contains(f.Status, s.Status):
		return false
	}
	if f.NamePattern != "" {
		ok, _ := path.Match(f.NamePattern, s.Name)
		if !ok && s.Exe != "" {
			ok, _ = path.Match(f.NamePattern, path.Base(s.Exe))
		}
		if !ok && len(p.Cmdline) > 0 {
			ok, _ = path.Match(f.NamePattern, path.Base(p.Cmdline[0]))
		}
		return ok
	}
	return true
}

func (p *processTools) list(ctx context.Context, _ *tool.Call, in processListIn) (processListOut, error) {
	if in.Filter.NamePattern != "" {
		if _, err := path.Match(in.Filter.NamePattern, ""); err != nil {
			return processListOut{}, tool.Errf(CodeInvalidArgument, "filter.name_pattern %q is not a valid glob: %v", in.Filter.NamePattern, err).With("parameter", "filter.name_pattern")
		}
	}
	pair, err := p.cpu.sample(ctx)
	if err != nil {
		return processListOut{}, fmt.Errorf("agent: reading processes: %w", err)
	}
	snap, cpu, window := pair.snap, pair.cpu, pair.window
	match := make([]processSummary, 0, len(snap.Procs))
	for _, pr := range snap.Procs {
		s := summaryOfProc(pr, cpu, snap.MemTotal)
		if in.Filter.match(pr, s) {
			match = append(match, s)
		}
	}
	sortProcesses(match, in.SortBy, in.SortOrder == "desc")
	out := processListOut{Processes: []processSummary{}, TotalCount: len(match), SampleInterval: int(window.Milliseconds()), CPUCount: snap.CPUs}
	budget := processPageBytes
	i := in.Offset
	for ; i < len(match) && len(out.Processes) < in.Limit; i++ {
		n := approxJSONSize(match[i])
		if budget-n < 0 && len(out.Processes) > 0 {
			out.Truncated = true
			break
		}
		budget -= n
		out.Processes = append(out.Processes, match[i])
	}
	out.ReturnedCount = len(out.Processes)
	out.HasMore = i < len(match)
	if out.HasMore {
		out.NextOffset = i
	}
	return out, nil
}

// approxJSONSize is a cheap upper estimate of a summary's JSON size.
func approxJSONSize(s processSummary) int {
	n := 330 + len(s.Name) + len(s.Exe) + len(s.Cwd) + len(s.Username)
	for _, a := range s.Cmdline {
		n += len(a) + 3
	}
	return n
}

func sortProcesses(ps []processSummary, by string, desc bool) {
	key := func(a, b processSummary) int {
		switch by {
		case "memory_percent", "memory_rss":
			return cmp.Compare(a.MemoryRSS, b.MemoryRSS)
		case "pid":
			return cmp.Compare(a.PID, b.PID)
		case "name":
			return strings.Compare(a.Name, b.Name)
		case "create_time":
			return cmp.Compare(a.CreateTime, b.CreateTime)
		case "num_threads":
			return cmp.Compare(a.NumThreads, b.NumThreads)
		}
		return cmp.Compare(a.CPUPercent, b.CPUPercent)
	}
	cmpElem := func(a, b processSummary) int {
		c := key(a, b)
		if desc {
			c = -c
		}
		if c == 0 {
			c = cmp.Compare(a.PID, b.PID) // a stable order pages cleanly
		}
		return c
	}
	sort.SliceStable(ps, func(i, j int) bool { return cmpElem(ps[i], ps[j]) < 0 })
}

func (p *processTools) noProcess(pid int) *tool.Error {
	return tool.Errf(CodeNotFound, "no process %d", pid).With("pid", pid).
		Suggest(tool.SuggestedCall{Tool: p.wire("process.list_processes"), Why: "find the process by name or user"})
}

func (p *processTools) details(ctx context.Context, _ *tool.Call, in processPIDIn) (processDetail, error) {
	snap, cpu, err := p.procCPU(ctx, in.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return processDetail{}, p.noProcess(in.PID)
	}
	if err != nil {
		return processDetail{}, fmt.Errorf("agent: process %d: %w", in.PID, err)
	}
	d, err := procs.ReadDetail(p.root, in.PID, procs.LiveOptions())
	if errors.Is(err, fs.ErrNotExist) {
		return processDetail{}, p.noProcess(in.PID)
	}
	if err != nil {
		return processDetail{}, fmt.Errorf("agent: process %d: %w", in.PID, err)
	}
	out := processDetail{processSummary: summaryOfProc(d.Proc, cpu, snap.MemTotal), OpenFiles: []openFile{}, Connections: []procConn{},
		MemoryMaps: []memoryMap{}, Environment: d.Environment, CPUTimes: cpuTimes{User: round2(d.CPUUser), System: round2(d.CPUSystem)},
		Hidden: nonNil(d.Hidden), Truncated: d.Truncated}
	out.Cmdline = clipArgs(d.Cmdline, 4096)
	if d.IO != nil {
		out.IOCounters = &ioCounters{ReadCount: d.IO.ReadCount, WriteCount: d.IO.WriteCount, ReadBytes: d.IO.ReadBytes, WriteBytes: d.IO.WriteBytes}
	}
	for _, f := range d.OpenFiles {
		out.OpenFiles = append(out.OpenFiles, openFile{Path: f.Path, FD: f.FD, Mode: f.Mode})
	}
	for _, m := range d.Maps {
		out.MemoryMaps = append(out.MemoryMaps, memoryMap{Path: m.Path, RSS: m.RSS, Size: m.Size, Perms: m.Perms})
	}
	if len(d.SocketInodes) > 0 {
		conns, err := p.net.Connections(ctx, nil)
		if err == nil {
			byInode := map[uint64]int{}
			for _, s := range d.SocketInodes {
				byInode[s.Inode] = s.FD
			}
			for _, c := range conns {
				fd, ok := byInode[c.Inode]
				if !ok {
					continue
				}
				pc := procConn{FD: fd, Family: "AF_INET", Type: "SOCK_STREAM", LocalAddress: c.LocalAddr, LocalPort: c.LocalPort,
					RemoteAddress: c.RemoteAddr, RemotePort: c.RemotePort, Status: c.State}
				if strings.HasSuffix(c.Proto, "6") {
					pc.Family = "AF_INET6"
				}
				if strings.HasPrefix(c.Proto, "udp") {
					pc.Type = "SOCK_DGRAM"
				}
				out.Connections = append(out.Connections, pc)
			}
		}
	}
	return out, nil
}

// signalCheck is the agent's half of the signal rules; the helper repeats
// them from its own reading of /proc and the config.
func (p *processTools) signalCheck(ctx context.Context, in processSignalIn) (procs.Identity, string, error) {
	if !slices.Contains(p.conf().Process.AllowedSignals, in.Signal) {
		return procs.Identity{}, "", tool.Errf(CodePermissionDenied, "SIG%s is not allowed on this device", in.Signal).
			With("parameter", "signal").With("allowed_signals", p.conf().Process.AllowedSignals).
			Hint("the owner lists allowed signals in [process] allowed_signals of " + config.DefaultPath)
	}
	id, err := procs.ReadIdentity(p.root, in.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return id, "", p.noProcess(in.PID)
	}
	if err != nil {
		return id, "", fmt.Errorf("agent: process %d: %w", in.PID, err)
	}
	user := procs.Username(p.root, id.UID)
	never := func(why string) *tool.Error {
		return tool.Errf(CodePermissionDenied, "pid %d (%s) %s", id.PID, id.Name, why).With("pid", id.PID).With("name", id.Name).
			Hint("a fixed rule, not a setting: choose another process").
			Suggest(tool.SuggestedCall{Tool: p.wire("process.list_processes"), Why: "find the process you meant by name or user"})
	}
	switch {
	case id.PID == 1 || id.Kernel:
		return id, user, never("is init or a kernel thread and is never signalled")
	case p.isSelf(ctx, id.PID):
		return id, user, never("is raspi-mcp itself and is never signalled")
	case slices.Contains(p.conf().Process.ProtectedUsers, user):
		return id, user, never(fmt.Sprintf("belongs to %s, a protected user on this device", user)).
			With("protected_users", p.conf().Process.ProtectedUsers).
			Hint("[process] protected_users in " + config.DefaultPath + " lists users whose processes are never signalled")
	}
	return id, user, nil
}

// signalNames is the enum of process.send_signal's signal: each name as the
// config and the helper write it (TERM). kill(1) takes SIGTERM too and a
// model writes either: signalSpelling drops the SIG, so the schema lists
// each signal once.
func signalNames() []any {
	signals := []string{"HUP", "INT", "QUIT", "USR1", "USR2", "TERM", "KILL", "STOP", "CONT", "WINCH", "ALRM"}
	names := make([]any, 0, len(signals))
	for _, s := range signals {
		names = append(names, s)
	}
	return names
}

// signalSpelling accepts SIGTERM for TERM.
func signalSpelling(args map[string]any) {
	if s, ok := args["signal"].(string); ok {
		if name, cut := strings.CutPrefix(s, "SIG"); cut {
			args["signal"] = name
		}
	}
}

// isSelf reports whether pid is raspi-mcp: this process or the helper, or
// on the simulated board the table's own raspi-mcp processes (its pids say
// nothing about this machine's).
func (p *processTools) isSelf(ctx context.Context, pid int) bool {
	if p.simProcs != nil {
		return p.simProcs.IsSelf(pid)
	}
	if pid == os.Getpid() {
		return true
	}
	st, err := client.Call(ctx, p.helper, proto.Status, proto.StatusReq{})
	return err == nil && pid == st.PID
}

func (p *processTools) signal(ctx context.Context, c *tool.Call, in processSignalIn) (processSignalOut, error) {
	in.Signal = strings.TrimPrefix(in.Signal, "SIG")
	id, user, err := p.signalCheck(ctx, in)
	if err != nil {
		return processSignalOut{}, err
	}
	out := processSignalOut{PID: id.PID, Name: id.Name, Username: user, Signal: in.Signal, StillRunning: true}
	if c.DryRun {
		out.DryRun = true
		out.Plan = []string{fmt.Sprintf("ask the root helper to send SIG%s to pid %d (%s, user %s) if it is still the same process", in.Signal, id.PID, id.Name, user)}
		return out, nil
	}
	if _, err := client.Call(ctx, p.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: id.PID, StartTicks: id.StartTicks, Signal: in.Signal}); err != nil {
		return out, err
	}
	out.Sent = true
	// Give a TERM a moment so the answer can say whether it worked.
	for range 10 {
		now, err := procs.ReadIdentity(p.root, id.PID)
		if err != nil || now.StartTicks != id.StartTicks || now.State == "zombie" {
			out.StillRunning = false
			break
		}
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return out, nil
		}
	}
	return out, nil
}

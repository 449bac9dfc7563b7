package procs

import (
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FS returns the simulated board as a file tree: proc/ rendered from the
// table at the moment each file is opened (so CPU ticks and uptime move
// with the clock) and etc/passwd. It implements fs.ReadDirFS and
// fs.ReadLinkFS, which [Read], [ReadDetail], [ReadIdentity] and
// [InodeOwners] use.
func (s *Sim) FS() fs.FS { return simFS{s: s} }

// Snapshot returns the table as it is now, frozen: every file of the tree
// shows the same instant, as if the kernel stood still while [Read] walked
// it. CPU percentages between two snapshots are then exact, where reading
// the live [Sim.FS] would let the clock move between proc/uptime and the
// last process's stat.
func (s *Sim) Snapshot() (fs.FS, error) {
	svcs, err := s.services()
	if err != nil {
		return nil, fmt.Errorf("procs: sim: %w", err)
	}
	var snap simFS
	err = s.view(func(st *simState) error {
		st.Procs = st.withServices(svcs)
		snap = simFS{s: s, st: st, at: s.now()}
		return nil
	})
	return snap, err
}

// simFS renders the live file (st nil) or one frozen state at one time.
type simFS struct {
	s  *Sim
	st *simState
	at time.Time
}

var (
	_ fs.ReadDirFS  = simFS{}
	_ fs.ReadLinkFS = simFS{}
)

// simNode is one rendered path: a file (data), a directory (entries) or a
// symbolic link (target).
type simNode struct {
	mode    fs.FileMode
	data    string
	entries []simEntry
	target  string
}

type simEntry struct {
	name string
	mode fs.FileMode
}

func (f simFS) node(op, name string) (simNode, error) {
	if !fs.ValidPath(name) {
		return simNode{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	var n simNode
	var err error
	if f.st != nil {
		n, err = f.st.render(name, f.at)
	} else {
		svcs, verr := f.s.services()
		if verr == nil {
			verr = f.s.view(func(st *simState) error {
				st.Procs = st.withServices(svcs)
				n, err = st.render(name, f.s.now())
				return nil
			})
		}
		if verr != nil {
			return simNode{}, &fs.PathError{Op: op, Path: name, Err: verr}
		}
	}
	if err != nil {
		return simNode{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return n, nil
}

func (f simFS) Open(name string) (fs.File, error) {
	n, err := f.node("open", name)
	if err != nil {
		return nil, err
	}
	if n.mode&fs.ModeSymlink != 0 {
		// Opening a /proc link follows it into the real system: the
		// simulated board has nothing behind it.
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &simOpenFile{info: simInfo{name: pathBase(name), mode: n.mode, size: int64(len(n.data))}, r: strings.NewReader(n.data), entries: n.entries}, nil
}

func (f simFS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := f.node("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.mode.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	return dirEntries(n.entries), nil
}

func (f simFS) ReadLink(name string) (string, error) {
	n, err := f.node("readlink", name)
	if err != nil {
		return "", err
	}
	if n.mode&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return n.target, nil
}

func (f simFS) Lstat(name string) (fs.FileInfo, error) {
	n, err := f.node("lstat", name)
	if err != nil {
		return nil, err
	}
	return simInfo{name: pathBase(name), mode: n.mode, size: int64(len(n.data))}, nil
}

func dirEntries(es []simEntry) []fs.DirEntry {
	out := make([]fs.DirEntry, 0, len(es))
	for _, e := range es {
		out = append(out, fs.FileInfoToDirEntry(simInfo{name: e.name, mode: e.mode}))
	}
	return out
}

func pathBase(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

const (
	simDir     = fs.ModeDir | 0o555
	simRegular = 0o444
	simLink    = fs.ModeSymlink | 0o777
)

func dirOf(names ...string) simNode {
	n := simNode{mode: simDir}
	for _, name := range names {
		mode := fs.FileMode(simRegular)
		if strings.HasSuffix(name, "/") {
			name, mode = strings.TrimSuffix(name, "/"), simDir
		}
		n.entries = append(n.entries, simEntry{name, mode})
	}
	return n
}

// render returns the node at name, as the kernel would show it to the
// agent's user at now.
func (st *simState) render(name string, now time.Time) (simNode, error) {
	up := st.uptime(now)
	switch name {
	case ".":
		return dirOf("etc/", "proc/"), nil
	case "etc":
		return dirOf("passwd"), nil
	case "etc/passwd":
		return simNode{mode: simRegular, data: simPasswd}, nil
	case "proc":
		n := dirOf("meminfo", "stat", "uptime")
		for _, p := range st.Procs {
			n.entries = append(n.entries, simEntry{strconv.Itoa(p.PID), simDir})
		}
		return n, nil
	case "proc/uptime":
		return simNode{mode: simRegular, data: fmt.Sprintf("%.2f %.2f\n", up, st.idle(up))}, nil
	case "proc/stat":
		return simNode{mode: simRegular, data: st.procStat(up)}, nil
	case "proc/meminfo":
		return simNode{mode: simRegular, data: st.meminfo()}, nil
	}
	rest, ok := strings.CutPrefix(name, "proc/")
	if !ok {
		return simNode{}, fs.ErrNotExist
	}
	pidStr, file, _ := strings.Cut(rest, "/")
	pid, ok := atoi(pidStr)
	p := st.find(pid)
	if !ok || p == nil {
		return simNode{}, fs.ErrNotExist
	}
	return p.render(file, up, st.MemTotal)
}

// idle is the second field of proc/uptime: idle seconds summed over CPUs.
func (st *simState) idle(up float64) float64 {
	busy := 0.0
	for _, p := range st.Procs {
		busy += p.ticks(up) / simHz
	}
	return max(up*float64(st.CPUs)-busy, 0)
}

func (st *simState) procStat(up float64) string {
	var b strings.Builder
	total := 0.0
	for _, p := range st.Procs {
		total += p.ticks(up)
	}
	idle := st.idle(up) * simHz
	perCPU := func(x float64) uint64 { return uint64(x / float64(st.CPUs)) }
	fmt.Fprintf(&b, "cpu  %d %d %d %d 0 0 0 0 0 0\n", uint64(total*0.8), uint64(total*0.05), uint64(total*0.15), uint64(idle))
	for i := range st.CPUs {
		fmt.Fprintf(&b, "cpu%d %d %d %d %d 0 0 0 0 0 0\n", i, perCPU(total*0.8), perCPU(total*0.05), perCPU(total*0.15), perCPU(idle))
	}
	fmt.Fprintf(&b, "intr 0\nctxt %d\nbtime %d\nprocesses %d\nprocs_running %d\nprocs_blocked 0\n",
		uint64(up*900), st.Boot, 1400+len(st.Procs), 1+st.running())
	return b.String()
}

func (st *simState) running() int {
	n := 0
	for _, p := range st.Procs {
		if p.State == "R" {
			n++
		}
	}
	return n
}

func (st *simState) meminfo() string {
	kb := st.MemTotal / 1024
	var rss uint64
	for _, p := range st.Procs {
		rss += p.RSS
	}
	used := rss + 160_000 // the kernel, page tables, tmpfs
	cached := kb / 4
	free := kb - min(used+cached, kb)
	return fmt.Sprintf("MemTotal:       %8d kB\nMemFree:        %8d kB\nMemAvailable:   %8d kB\nBuffers:        %8d kB\nCached:         %8d kB\nSwapTotal:      %8d kB\nSwapFree:       %8d kB\n",
		kb, free, free+cached, 32_000, cached, 102_396, 102_396)
}

// private are the files of /proc/PID that only the process's owner (and
// root) may read.
var simPrivate = []string{"environ", "exe", "cwd", "fd", "fdinfo", "io", "smaps"}

// render returns file ("" for the directory) of p's /proc/PID.
func (p *simProc) render(file string, up float64, memTotal uint64) (simNode, error) {
	sub, rest, _ := strings.Cut(file, "/")
	if slices.Contains(simPrivate, sub) && p.UID != SimAgentUID {
		return simNode{}, fs.ErrPermission
	}
	if p.Kernel && (sub == "exe" || sub == "cwd") {
		return simNode{}, fs.ErrNotExist
	}
	switch sub {
	case "":
		return dirOf("cmdline", "cwd", "environ", "exe", "fd/", "fdinfo/", "io", "smaps", "stat", "status"), nil
	case "stat":
		return simNode{mode: simRegular, data: p.stat(up)}, nil
	case "status":
		return simNode{mode: simRegular, data: p.status()}, nil
	case "cmdline":
		if len(p.Cmdline) == 0 {
			return simNode{mode: simRegular}, nil
		}
		return simNode{mode: simRegular, data: strings.Join(p.Cmdline, "\x00") + "\x00"}, nil
	case "environ":
		if len(p.Env) == 0 {
			return simNode{mode: simRegular}, nil
		}
		return simNode{mode: simRegular, data: strings.Join(p.Env, "\x00") + "\x00"}, nil
	case "exe":
		return simNode{mode: simLink, target: p.Exe}, nil
	case "cwd":
		return simNode{mode: simLink, target: p.Cwd}, nil
	case "io":
		return simNode{mode: simRegular, data: p.io(up)}, nil
	case "smaps":
		return simNode{mode: simRegular, data: p.smaps()}, nil
	case "fd", "fdinfo":
		if rest == "" {
			n := simNode{mode: simDir}
			for _, d := range p.FDs {
				mode := fs.FileMode(simRegular)
				if sub == "fd" {
					mode = simLink
				}
				n.entries = append(n.entries, simEntry{strconv.Itoa(d.FD), mode})
			}
			return n, nil
		}
		fd, ok := atoi(rest)
		i := slices.IndexFunc(p.FDs, func(d simFD) bool { return d.FD == fd })
		if !ok || i < 0 {
			return simNode{}, fs.ErrNotExist
		}
		if sub == "fd" {
			return simNode{mode: simLink, target: p.FDs[i].Target}, nil
		}
		flags := map[string]string{"r": "0100000", "w": "0100001", "rw": "0100002"}[p.FDs[i].Mode]
		return simNode{mode: simRegular, data: "pos:\t0\nflags:\t" + cmpOr(flags, "0100000") + "\nmnt_id:\t25\n"}, nil
	}
	return simNode{}, fs.ErrNotExist
}

// stat renders /proc/PID/stat: 52 fields, those the parser reads filled.
func (p *simProc) stat(up float64) string {
	t := p.ticks(up)
	// user 80 %, system the rest of the whole ticks, so that their sum
	// grows by one tick at a time, as the kernel's does.
	utime := uint64(t * 0.8)
	stime := uint64(t) - utime
	flags := 0x00400100
	if p.Kernel {
		flags = 0x00208040 // PF_KTHREAD and friends
	}
	return fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 %d %d 0 %d 0 %d %d 0 0 %d %d %d 0 %d %d %d 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 %d 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		p.PID, p.Comm, p.State, p.PPID, p.PID, p.PID, flags, uint64(t*3), uint64(t/50),
		utime, stime, 20+p.Nice, p.Nice, max(p.Threads, 1),
		uint64(p.Start*simHz), p.VMS*1024, p.RSS/4, p.PID%4)
}

func (p *simProc) status() string {
	state := map[string]string{"R": "R (running)", "S": "S (sleeping)", "I": "I (idle)", "T": "T (stopped)"}[p.State]
	return fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%s\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nVmSize:\t%8d kB\nVmRSS:\t%8d kB\nThreads:\t%d\n",
		p.Comm, cmpOr(state, p.State), p.PID, p.PID, p.PPID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.VMS, p.RSS, max(p.Threads, 1))
}

// io grows with CPU time: a process that works reads and writes.
func (p *simProc) io(up float64) string {
	t := uint64(p.ticks(up))
	return fmt.Sprintf("rchar: %d\nwchar: %d\nsyscr: %d\nsyscw: %d\nread_bytes: %d\nwrite_bytes: %d\ncancelled_write_bytes: 0\n",
		t*41_000, t*9_000, t*12, t*5, t*4096, t*2048)
}

// smaps is the executable's text and data, the heap, libc and the stack,
// in proportion to the process's resident size.
func (p *simProc) smaps() string {
	var b strings.Builder
	addr := uint64(0x5555_5555_4000)
	m := func(size, rss uint64, perms, path string) {
		fmt.Fprintf(&b, "%012x-%012x %s 00000000 b3:02 4242 %s\nSize:           %8d kB\nRss:            %8d kB\nPss:            %8d kB\n", addr, addr+size*1024, perms, path, size, rss, rss)
		addr += size*1024 + 0x1000
	}
	rss := max(p.RSS, 64)
	m(max(p.VMS/20, 4), rss/5, "r-xp", p.Exe)
	m(max(p.VMS/200, 4), rss/20, "rw-p", p.Exe)
	m(max(p.VMS/3, 4), rss/2, "rw-p", "[heap]")
	m(1_620, rss/5, "r-xp", "/usr/lib/aarch64-linux-gnu/libc.so.6")
	m(132, rss/20, "rw-p", "[stack]")
	return b.String()
}

// simOpenFile is an open simulated file or directory.
type simOpenFile struct {
	info    simInfo
	r       *strings.Reader
	entries []simEntry
	off     int
}

func (f *simOpenFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *simOpenFile) Close() error               { return nil }
func (f *simOpenFile) Read(b []byte) (int, error) {
	if f.info.mode.IsDir() {
		return 0, &fs.PathError{Op: "read", Path: f.info.name, Err: fs.ErrInvalid}
	}
	return f.r.Read(b)
}

// ReadDir makes a directory an fs.ReadDirFile.
func (f *simOpenFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := f.entries[f.off:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && len(rest) > n {
		rest = rest[:n]
	}
	f.off += len(rest)
	return dirEntries(rest), nil
}

type simInfo struct {
	name string
	mode fs.FileMode
	size int64
}

func (i simInfo) Name() string       { return i.name }
func (i simInfo) Size() int64        { return i.size }
func (i simInfo) Mode() fs.FileMode  { return i.mode }
func (i simInfo) ModTime() time.Time { return time.Time{} }
func (i simInfo) IsDir() bool        { return i.mode.IsDir() }
func (i simInfo) Sys() any           { return nil }

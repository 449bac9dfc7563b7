// Package procs reads processes from /proc.
//
// Everything that parses is a pure function over an [fs.FS] whose root holds
// proc/... and etc/passwd: live callers pass os.DirFS("/"), tests pass a
// fixture tree (testdata/, or an [testing/fstest.MapFS] built in code), so the
// same code is exercised on a laptop and on a Pi. Symbolic links (exe, cwd,
// fd/N) are read with [fs.ReadLink], which os.DirFS and fstest.MapFS both
// implement.
//
// The unprivileged agent uses [Read], [CPUPercent], [ReadDetail] and
// [InodeOwners]; the root helper uses [ReadIdentity], [ParseSignal] and
// [Signal], which refuses to signal a PID that now belongs to another
// process.
//
// The package holds no mutable state: every call reads what it needs, with a
// scratch buffer of its own, so concurrent calls are safe.
package procs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pfKthread is PF_KTHREAD from include/linux/sched.h: the kernel sets it in
// /proc/PID/stat's flags field for kernel threads and nothing else.
const pfKthread = 0x00200000

// maxFile bounds what is read of one /proc file (environ and cmdline are the
// large ones, limited by ARG_MAX): a hostile process cannot make the agent
// buffer more than this.
const maxFile = 1 << 20

// Proc is one process as /proc shows it.
type Proc struct {
	PID, PPID int
	Name      string // /proc/PID/stat comm: at most 15 bytes, may contain spaces and ')'
	// State is one of running, sleeping, disk-sleep, stopped, zombie, idle:
	// see [StateName] for how the kernel's letters map.
	State      string
	UID        int      // real uid, from status
	Username   string   // from etc/passwd in the same fs.FS; the decimal uid when unknown
	Cmdline    []string // NUL-split; empty for kernel threads and zombies
	Exe        string   // target of exe ("/usr/bin/x (deleted)" after an upgrade); "" when not visible (permission, kernel thread, zombie)
	Cwd        string   // target of cwd; "" when not visible
	StartTicks uint64   // stat field 22 (clock ticks since boot): a PID plus this names one process, whatever reuses the PID later
	// StartTime is the boot time plus StartTicks: as exact as btime, a
	// whole second, and off by however much the wall clock was stepped
	// since boot (as in ps).
	StartTime time.Time
	// UTime and STime are clock ticks ([Options.ClockTick] per second).
	UTime, STime uint64
	RSS, VMS     uint64 // bytes: stat rss × page size, and vsize
	Threads      int
	Nice         int
	// Kernel is true for kernel threads: see [Identity.Kernel].
	Kernel bool
}

// Snapshot is all processes at one moment.
type Snapshot struct {
	// Uptime is /proc/uptime's first field in seconds. CPU percentages are
	// measured against it rather than the wall clock because it is the clock
	// StartTicks count on, and it works the same for fixtures and live.
	Uptime   float64
	BootTime time.Time // proc/stat btime
	MemTotal uint64    // bytes, from proc/meminfo
	CPUs     int       // online CPUs: the cpuN lines of proc/stat
	Procs    []Proc    // sorted by PID
}

// Options are the two machine constants /proc's numbers are expressed in.
// The zero value means ClockTick 100 and PageSize 4096; see [LiveOptions].
type Options struct {
	// ClockTick is USER_HZ, the unit of stat's utime, stime and starttime:
	// 100 on every architecture Linux exports to user space.
	ClockTick int
	// PageSize is the unit of stat's rss: 4096 on most Pis, 16384 on a
	// Pi 5 running the 16K-page kernel.
	PageSize int
}

// LiveOptions returns the Options of the running machine (its real page
// size), for reading os.DirFS("/").
func LiveOptions() Options { return Options{ClockTick: 100, PageSize: os.Getpagesize()} }

func (o Options) hz() uint64 {
	if o.ClockTick <= 0 {
		return 100
	}
	return uint64(o.ClockTick)
}

func (o Options) pageSize() uint64 {
	if o.PageSize <= 0 {
		return 4096
	}
	return uint64(o.PageSize)
}

// ticksDuration converts clock ticks to a Duration without overflowing for
// uptimes of centuries.
func (o Options) ticksDuration(t uint64) time.Duration {
	hz := o.hz()
	return time.Duration(t/hz)*time.Second + time.Duration(t%hz)*time.Second/time.Duration(hz)
}

// reader is the state of one call: the fs, the options, a scratch buffer
// reused for every file (so reading 600 processes does not allocate 3000
// buffers) and the uid → name table.
type reader struct {
	fsys  fs.FS
	o     Options
	buf   []byte
	boot  time.Time
	users map[int]string
}

func newReader(fsys fs.FS, o Options) *reader {
	return &reader{fsys: fsys, o: o, buf: make([]byte, 0, 4096)}
}

// read returns the contents of name in the scratch buffer: valid until the
// next read. At most maxFile bytes are returned.
func (r *reader) read(name string) ([]byte, error) {
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := r.buf[:0]
	for len(b) < maxFile {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):min(cap(b), maxFile)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			r.buf = b
			return nil, err
		}
	}
	r.buf = b
	return b, nil
}

// gone reports whether err means the process no longer exists: ENOENT for
// a file opened after it was reaped, ESRCH for one read after.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// pidErr names the package and the PID; a vanished process becomes an error
// wrapping fs.ErrNotExist whatever errno the kernel chose.
func pidErr(pid int, err error) error {
	if gone(err) {
		return fmt.Errorf("procs: pid %d: no such process: %w", pid, fs.ErrNotExist)
	}
	return fmt.Errorf("procs: pid %d: %w", pid, err)
}

// Read reads every process under proc/ in fsys (fsys is a root: it contains
// proc/... and etc/passwd). Processes that vanish mid-read, and those whose
// stat is hidden (hidepid), are skipped; unreadable optional parts (exe,
// cwd) are left empty. proc/uptime, proc/stat and proc/meminfo must be
// readable.
func Read(fsys fs.FS, o Options) (Snapshot, error) {
	r := newReader(fsys, o)
	var s Snapshot
	var err error
	if s.Uptime, err = r.uptime(); err != nil {
		return Snapshot{}, err
	}
	if s.BootTime, s.CPUs, err = r.procStat(); err != nil {
		return Snapshot{}, err
	}
	r.boot = s.BootTime
	if s.MemTotal, err = r.memTotal(); err != nil {
		return Snapshot{}, err
	}
	r.loadUsers()
	pids, err := listPIDs(fsys)
	if err != nil {
		return Snapshot{}, err
	}
	s.Procs = make([]Proc, 0, len(pids))
	for _, pid := range pids {
		p, err := r.proc(pid, nil)
		if gone(err) || errors.Is(err, fs.ErrPermission) {
			continue
		}
		if err != nil {
			return Snapshot{}, err
		}
		s.Procs = append(s.Procs, p)
	}
	return s, nil
}

// ReadPID is a [Snapshot] of one process: the machine-wide figures and
// the process's stat and status, enough for [CPUPercent] and a memory
// share, without walking every process (as a detail view of one process
// needs). Its Proc has no Username, Cmdline, Exe or Cwd. A process that
// does not exist is an error wrapping fs.ErrNotExist.
func ReadPID(fsys fs.FS, pid int, o Options) (Snapshot, error) {
	if pid <= 0 {
		return Snapshot{}, fmt.Errorf("procs: pid %d: not a process ID", pid)
	}
	r := newReader(fsys, o)
	var s Snapshot
	var err error
	if s.Uptime, err = r.uptime(); err != nil {
		return Snapshot{}, err
	}
	if s.BootTime, s.CPUs, err = r.procStat(); err != nil {
		return Snapshot{}, err
	}
	if s.MemTotal, err = r.memTotal(); err != nil {
		return Snapshot{}, err
	}
	st, name, uid, err := r.core(pid, procDir(pid))
	if err != nil {
		return Snapshot{}, err
	}
	s.Procs = []Proc{{PID: pid, PPID: st.ppid, Name: name, State: StateName(st.state), UID: uid,
		StartTicks: st.start, StartTime: s.BootTime.Add(r.o.ticksDuration(st.start)), UTime: st.utime, STime: st.stime,
		RSS: st.rss * r.o.pageSize(), VMS: st.vsize, Threads: st.threads, Nice: st.nice, Kernel: st.kernel(pid)}}
	return s, nil
}

// listPIDs returns the numeric entries of proc/, ascending.
func listPIDs(fsys fs.FS) ([]int, error) {
	ents, err := fs.ReadDir(fsys, "proc")
	if err != nil {
		return nil, fmt.Errorf("procs: listing processes: %w", err)
	}
	pids := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, ok := atoi(e.Name()); ok && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

func (r *reader) uptime() (float64, error) {
	b, err := r.read("proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("procs: %w", err)
	}
	f, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	up, err := strconv.ParseFloat(f, 64)
	if err != nil || up < 0 {
		return 0, fmt.Errorf("procs: proc/uptime: bad uptime %q", f)
	}
	return up, nil
}

// procStat returns the boot time and the number of online CPUs from
// proc/stat.
func (r *reader) procStat() (time.Time, int, error) {
	b, err := r.read("proc/stat")
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("procs: %w", err)
	}
	var btime int64 = -1
	cpus := 0
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		switch {
		case len(line) > 3 && string(line[:3]) == "cpu" && line[3] >= '0' && line[3] <= '9':
			cpus++
		case len(line) > 6 && string(line[:6]) == "btime ":
			v, ok := parseUint(trimSpace(line[6:]))
			if !ok {
				return time.Time{}, 0, fmt.Errorf("procs: proc/stat: bad btime %q", line)
			}
			btime = int64(v)
		}
	}
	if btime < 0 {
		return time.Time{}, 0, errors.New("procs: proc/stat: no btime line")
	}
	return time.Unix(btime, 0), cpus, nil
}

func (r *reader) memTotal() (uint64, error) {
	b, err := r.read("proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("procs: %w", err)
	}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		if rest, ok := cutPrefix(line, "MemTotal:"); ok {
			f, _, _ := strings.Cut(strings.TrimSpace(string(rest)), " ")
			kb, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("procs: proc/meminfo: bad MemTotal %q", line)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("procs: proc/meminfo: no MemTotal line")
}

// loadUsers reads etc/passwd. A missing or unreadable file is not an error:
// users are then shown by uid, as ps does for unknown ones.
func (r *reader) loadUsers() {
	r.users = map[int]string{}
	b, err := r.read("etc/passwd")
	if err != nil {
		return
	}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		f := strings.SplitN(string(line), ":", 4)
		if len(f) < 4 || f[0] == "" || strings.HasPrefix(f[0], "#") {
			continue
		}
		uid, ok := atoi(f[2])
		if _, dup := r.users[uid]; ok && !dup {
			r.users[uid] = f[0] // the first entry wins, as getpwuid does
		}
	}
}

// Username returns the name of uid in fsys's etc/passwd, or the decimal uid
// when it has none (or there is no passwd), as ps shows it. It reads the
// file on every call: to name many uids, [Read] already fills
// [Proc.Username].
func Username(fsys fs.FS, uid int) string {
	r := newReader(fsys, Options{})
	r.loadUsers()
	return r.username(uid)
}

// username returns uid's name, or the decimal uid; unknown ones are cached
// so that 600 processes of one unknown uid share one string.
func (r *reader) username(uid int) string {
	if n, ok := r.users[uid]; ok {
		return n
	}
	n := strconv.Itoa(uid)
	r.users[uid] = n
	return n
}

// core reads what every view of a process needs: stat, then status for the
// real uid and to refuse a thread ID (/proc/TID exists, unlisted, for every
// thread; signalling it would hit the whole process). comm is copied out
// of the buffer before status overwrites it.
func (r *reader) core(pid int, dir string) (st stat, name string, uid int, err error) {
	b, err := r.read(dir + "/stat")
	if err != nil {
		return st, "", 0, pidErr(pid, err)
	}
	if st, err = parseStat(b); err != nil {
		return st, "", 0, fmt.Errorf("procs: pid %d: %s/stat: %w", pid, dir, err)
	}
	name = string(st.comm)
	st.comm = nil
	if b, err = r.read(dir + "/status"); err != nil {
		return st, "", 0, pidErr(pid, err)
	}
	ss, err := parseStatus(b)
	if err != nil {
		return st, "", 0, fmt.Errorf("procs: pid %d: %s/status: %w", pid, dir, err)
	}
	if ss.tgid != 0 && ss.tgid != pid {
		return st, "", 0, fmt.Errorf("procs: pid %d is a thread of process %d: %w", pid, ss.tgid, fs.ErrNotExist)
	}
	return st, name, ss.uid, nil
}

// proc reads one process. hidden, when not nil, collects what could not be
// read (for [Detail.Hidden]).
func (r *reader) proc(pid int, hidden *[]string) (Proc, error) {
	dir := procDir(pid)
	st, name, uid, err := r.core(pid, dir)
	if err != nil {
		return Proc{}, err
	}
	p := Proc{
		PID:        pid,
		PPID:       st.ppid,
		Name:       name,
		State:      StateName(st.state),
		UID:        uid,
		StartTicks: st.start,
		UTime:      st.utime,
		STime:      st.stime,
		RSS:        st.rss * r.o.pageSize(),
		VMS:        st.vsize,
		Threads:    st.threads,
		Nice:       st.nice,
		Kernel:     st.kernel(pid),
	}
	if r.users != nil {
		p.Username = r.username(uid)
	}
	if !r.boot.IsZero() {
		p.StartTime = r.boot.Add(r.o.ticksDuration(st.start))
	}
	// From here on every part is optional: a process that exits now was
	// still there when stat was read, and is shown with what was seen.
	if b, err := r.read(dir + "/cmdline"); err != nil {
		hide(hidden, "command line", err)
	} else {
		p.Cmdline = splitNUL(b)
	}
	p.Exe = r.link(dir+"/exe", "executable", hidden)
	p.Cwd = r.link(dir+"/cwd", "working directory", hidden)
	return p, nil
}

// procDir returns "proc/PID" in one allocation.
func procDir(pid int) string {
	var b [24]byte
	return string(strconv.AppendInt(append(b[:0], "proc/"...), int64(pid), 10))
}

// link reads a symbolic link of /proc/PID; "" when it cannot be read.
func (r *reader) link(name, what string, hidden *[]string) string {
	t, err := fs.ReadLink(r.fsys, name)
	if err != nil {
		hide(hidden, what, err)
		return ""
	}
	return t
}

// hide records why what could not be read. A missing file is not hidden
// information (a kernel thread has no exe, a zombie no cwd), so only other
// errors are recorded.
func hide(hidden *[]string, what string, err error) {
	if hidden == nil || gone(err) {
		return
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrPermission) {
		*hidden = append(*hidden, what+": permission denied")
		return
	}
	*hidden = append(*hidden, what+": "+err.Error())
}

// StateName maps the state letter of /proc/PID/stat to the names the tools
// show. Letters of old kernels map to their nearest meaning: X (dead, never
// seen in practice) is a zombie, t (tracing stop) is stopped, P (parked
// kernel thread) is idle, W (waking, 2.6.33–3.13) is running, K (wakekill)
// is disk-sleep; anything unknown is sleeping, the most common state.
func StateName(c byte) string {
	switch c {
	case 'R', 'W':
		return "running"
	case 'D', 'K':
		return "disk-sleep"
	case 'T', 't':
		return "stopped"
	case 'Z', 'X', 'x':
		return "zombie"
	case 'I', 'P':
		return "idle"
	default:
		return "sleeping"
	}
}

// stat holds the fields of /proc/PID/stat this package uses. comm aliases
// the read buffer.
type stat struct {
	comm                []byte
	state               byte
	ppid                int
	flags               uint64
	utime, stime, start uint64
	nice, threads       int
	vsize, rss          uint64
}

// kernel decides whether the process is a kernel thread. PF_KTHREAD is
// authoritative; pid 2 (kthreadd) and its children count too when the flags
// field is zero, as in hand-written trees and kernels before 2.6.27. A live
// process always has flags set, so a container's own pid 2 is not mistaken
// for kthreadd.
func (s stat) kernel(pid int) bool {
	if s.flags&pfKthread != 0 {
		return true
	}
	return s.flags == 0 && (pid == 2 || s.ppid == 2)
}

// parseStat parses /proc/PID/stat. comm is between the first '(' and the
// LAST ')': a process can name itself "a) R 1 (" and must not shift the
// fields after it.
func parseStat(b []byte) (stat, error) {
	var s stat
	open := indexByte(b, '(')
	closing := lastIndexByte(b, ')')
	if open < 0 || closing < open {
		return s, errors.New("no (comm)")
	}
	s.comm = b[open+1 : closing]
	rest := b[closing+1:]
	field := 2 // the field rest starts after: comm
	for len(rest) > 0 && field < 24 {
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\n') {
			rest = rest[1:]
		}
		end := 0
		for end < len(rest) && rest[end] != ' ' && rest[end] != '\n' {
			end++
		}
		if end == 0 {
			break
		}
		f := rest[:end]
		rest = rest[end:]
		field++
		var ok = true
		switch field {
		case 3:
			s.state = f[0]
		case 4:
			var v int64
			v, ok = parseInt(f)
			s.ppid = int(v)
		case 9:
			s.flags, ok = parseUint(f)
		case 14:
			s.utime, ok = parseUint(f)
		case 15:
			s.stime, ok = parseUint(f)
		case 19:
			var v int64
			v, ok = parseInt(f)
			s.nice = int(v)
		case 20:
			var v int64
			v, ok = parseInt(f)
			s.threads = int(v)
		case 22:
			s.start, ok = parseUint(f)
		case 23:
			s.vsize, ok = parseUint(f)
		case 24:
			var v int64
			v, ok = parseInt(f) // a long in the kernel
			s.rss = uint64(max(v, 0))
		}
		if !ok {
			return s, fmt.Errorf("field %d: bad number %q", field, f)
		}
	}
	if field < 24 {
		return s, fmt.Errorf("%d fields, want at least 24", field)
	}
	return s, nil
}

// status holds the fields of /proc/PID/status this package uses.
type status struct {
	uid, tgid int
}

func parseStatus(b []byte) (status, error) {
	var s status
	seenUID := false
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		if v, ok := cutPrefix(line, "Uid:"); ok {
			u, ok := parseInt(firstField(v))
			if !ok {
				return s, fmt.Errorf("bad Uid line %q", line)
			}
			s.uid, seenUID = int(u), true
		} else if v, ok := cutPrefix(line, "Tgid:"); ok {
			t, ok := parseInt(firstField(v))
			if !ok {
				return s, fmt.Errorf("bad Tgid line %q", line)
			}
			s.tgid = int(t)
		}
		if seenUID && s.tgid != 0 {
			break
		}
	}
	if !seenUID {
		return s, errors.New("no Uid line")
	}
	return s, nil
}

// splitNUL splits a NUL-separated list (cmdline, environ) into strings that
// share one allocation. Trailing NULs (setproctitle pads with them) are
// dropped; nil when empty.
func splitNUL(b []byte) []string {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	out := make([]string, 0, strings.Count(s, "\x00")+1)
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

// Byte-slice helpers: /proc files are parsed in the scratch buffer without
// converting whole lines to strings.

func cutLine(b []byte) (line, rest []byte) {
	if i := indexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix {
		return b[len(prefix):], true
	}
	return nil, false
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// firstField returns the first whitespace-separated field of b.
func firstField(b []byte) []byte {
	b = trimSpace(b)
	for i, c := range b {
		if isSpace(c) {
			return b[:i]
		}
	}
	return b
}

func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	u, ok := parseUint(b)
	if !ok || u > 1<<63 || (!neg && u == 1<<63) {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// atoi parses a non-negative decimal such as a PID directory name, without
// the error allocation strconv.Atoi makes for "self" and "sys".
func atoi(s string) (int, bool) {
	if len(s) == 0 {
		return 0, false
	}
	const maxInt = int(^uint(0) >> 1)
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		d := int(s[i] - '0')
		if n > (maxInt-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

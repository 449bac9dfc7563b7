package procs

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The live tests read this machine's /proc through os.DirFS("/"), the way
// the agent does on a Pi.

func liveFS() fs.FS { return os.DirFS("/") }

// startChild starts a process that the test kills and reaps when it ends.
func startChild(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// Start returns when the close-on-exec descriptors are closed, before
	// the new program's arguments and environment are in place: until
	// then cmdline and environ read empty.
	// A minute is only a hang guard.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); len(b) > 0 {
			return cmd
		}
	}
	t.Fatalf("%s: no command line after a minute", name)
	return nil
}

func TestLiveRead(t *testing.T) {
	s, err := Read(liveFS(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if s.Uptime <= 0 || s.CPUs < 1 || s.MemTotal == 0 || s.BootTime.After(time.Now()) || len(s.Procs) < 2 {
		t.Fatalf("snapshot: uptime %v, %d CPUs, %d bytes, boot %v, %d processes", s.Uptime, s.CPUs, s.MemTotal, s.BootTime, len(s.Procs))
	}
	if !slices.IsSortedFunc(s.Procs, func(a, b Proc) int { return a.PID - b.PID }) {
		t.Error("not sorted")
	}
	me := findProc(t, s, os.Getpid())
	exe, _ := os.Executable()
	u, _ := user.Current()
	if me.PPID != os.Getppid() || me.UID != os.Getuid() || !slices.Equal(me.Cmdline, os.Args) || me.Exe != exe ||
		me.State != "running" && me.State != "sleeping" || me.Kernel || me.Threads < 1 || me.RSS == 0 || me.VMS == 0 {
		t.Errorf("own process: %+v", me)
	}
	if u != nil && me.Username != u.Username {
		t.Errorf("username %q, want %q", me.Username, u.Username)
	}
	if wd, _ := os.Getwd(); me.Cwd != wd {
		t.Errorf("cwd %q, want %q", me.Cwd, wd)
	}
	// btime is whole seconds and the wall clock may have been stepped since
	// boot: a loose bound.
	if d := time.Since(me.StartTime); d < -time.Minute || d > 30*time.Minute {
		t.Errorf("own start time %v is %v ago", me.StartTime, d)
	}
	if comm, err := os.ReadFile("/proc/2/comm"); err == nil && strings.TrimSpace(string(comm)) == "kthreadd" {
		if k := findProc(t, s, 2); !k.Kernel || k.Cmdline != nil {
			t.Errorf("kthreadd: %+v", k)
		}
	}
}

// TestLiveCPUPercent compares CPUPercent over two live snapshots with an
// independent reading of the same window, taken the way top takes it: each
// child's utime+stime from /proc/PID/stat and the uptime, read directly just
// before and just after each snapshot. Since both counters only grow, the
// snapshots' own values lie between the readings beside them, and the
// percentage between the bounds those readings give, however slowly a
// loaded machine runs the busy child: no floor that depends on the load.
func TestLiveCPUPercent(t *testing.T) {
	busy := startChild(t, nil, "/bin/sh", "-c", "while :; do :; done")
	sleeper := startChild(t, nil, "sleep", "300")
	bpid, spid := busy.Process.Pid, sleeper.Process.Pid

	snap := func() (before mark, s Snapshot, after mark) {
		t.Helper()
		before = readMark(t, bpid, spid)
		s, err := Read(liveFS(), LiveOptions())
		if err != nil {
			t.Fatal(err)
		}
		return before, s, readMark(t, bpid, spid)
	}
	a0, s0, b0 := snap()
	// The window closes once the busy loop has run 20 ticks and half a
	// second has passed, however long that takes; the minute is only a
	// hang guard.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		m := readMark(t, bpid)
		if m.ticks[bpid]-b0.ticks[bpid] >= 20 && m.uptime-b0.uptime >= 0.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("busy loop ran %d ticks in %.1f s", m.ticks[bpid]-b0.ticks[bpid], m.uptime-b0.uptime)
		}
	}
	a1, s1, b1 := snap()
	pct := CPUPercent(s0, s1, LiveOptions())
	t.Logf("window %.2f s: busy %.1f%%, sleeping %.1f%%", s1.Uptime-s0.Uptime, pct[bpid], pct[spid])

	for _, c := range []struct {
		s      Snapshot
		before mark
		after  mark
	}{{s0, a0, b0}, {s1, a1, b1}} {
		if c.s.Uptime < c.before.uptime || c.s.Uptime > c.after.uptime {
			t.Errorf("snapshot uptime %v not within %v..%v", c.s.Uptime, c.before.uptime, c.after.uptime)
		}
		for _, pid := range []int{bpid, spid} {
			p := findProc(t, c.s, pid)
			if got := p.UTime + p.STime; got < c.before.ticks[pid] || got > c.after.ticks[pid] {
				t.Errorf("pid %d: snapshot has %d ticks, not within %d..%d", pid, got, c.before.ticks[pid], c.after.ticks[pid])
			}
		}
	}
	for _, pid := range []int{bpid, spid} {
		// Fewest ticks over the longest window, most over the shortest.
		lo := float64(a1.ticks[pid]-b0.ticks[pid]) / userHZ / (b1.uptime - a0.uptime) * 100
		hi := float64(b1.ticks[pid]-a0.ticks[pid]) / userHZ / (a1.uptime - b0.uptime) * 100
		t.Logf("pid %d: %.2f%%, independent reading %.2f%%..%.2f%%", pid, pct[pid], lo, hi)
		if got := pct[pid]; got < lo-1e-9 || got > hi+1e-9 {
			t.Errorf("pid %d at %.2f%%; /proc/%d/stat says %.2f%%..%.2f%% over the same window", pid, got, pid, lo, hi)
		}
	}
	if pct[bpid] <= 0 {
		t.Errorf("busy loop at %.2f%% after running 20 ticks in the window", pct[bpid])
	}
}

// userHZ is the unit of utime and stime in /proc/PID/stat on every Linux.
const userHZ = 100

// mark is a reading taken beside Read, not through it: the uptime and, per
// PID, utime+stime from /proc/PID/stat, which is what top diffs.
type mark struct {
	uptime float64
	ticks  map[int]uint64
}

func readMark(t *testing.T, pids ...int) mark {
	t.Helper()
	m := mark{ticks: map[int]uint64{}}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name's ')': state is field 3, utime 14, stime 15.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		utime, err1 := strconv.ParseUint(f[14-3], 10, 64)
		stime, err2 := strconv.ParseUint(f[15-3], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("/proc/%d/stat %q: %v %v", pid, b, err1, err2)
		}
		m.ticks[pid] = utime + stime
	}
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	if m.uptime, err = strconv.ParseFloat(strings.Fields(string(b))[0], 64); err != nil {
		t.Fatalf("/proc/uptime %q: %v", b, err)
	}
	return m
}

func TestLiveDetail(t *testing.T) {
	dir := t.TempDir()
	w, err := os.OpenFile(filepath.Join(dir, "w"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rw, err := os.Create(filepath.Join(dir, "rw"))
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	r, err := os.Open(filepath.Join(dir, "rw"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	d, err := ReadDetail(liveFS(), os.Getpid(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Hidden) != 0 {
		t.Errorf("own process hides %q", d.Hidden)
	}
	if d.Environment == nil || d.Environment["PATH"] != os.Getenv("PATH") {
		t.Errorf("own environment PATH %q, want %q", d.Environment["PATH"], os.Getenv("PATH"))
	}
	for _, want := range []OpenFile{
		{int(w.Fd()), w.Name(), "w"}, {int(rw.Fd()), rw.Name(), "rw"}, {int(r.Fd()), r.Name(), "r"},
	} {
		if !slices.Contains(d.OpenFiles, want) {
			t.Errorf("%+v not in open files %+v", want, d.OpenFiles)
		}
	}
	if d.IO == nil || d.IO.RChar == 0 {
		t.Errorf("io %+v", d.IO)
	}
	if len(d.Maps) == 0 || d.Maps[0].RSS == 0 || d.MapsTotal < len(d.Maps) || len(d.Maps) > MaxMaps {
		t.Errorf("maps %+v (%d)", d.Maps, d.MapsTotal)
	}
	exe, _ := os.Executable()
	if !slices.ContainsFunc(d.Maps, func(m MemoryMap) bool { return m.Path == exe && strings.Contains(m.Perms, "x") }) {
		t.Errorf("no executable mapping of %s in %+v", exe, d.Maps)
	}
	if d.CPUUser != float64(d.UTime)/100 || d.CPUSystem != float64(d.STime)/100 || d.FDCount < 3 {
		t.Errorf("cpu %v+%v s, %d fds", d.CPUUser, d.CPUSystem, d.FDCount)
	}

	env := []string{"PATH=" + os.Getenv("PATH"), "MY_API_KEY=s3cret", "DATABASE_URL=postgres://u:pw@h/db", "PLAIN=hello", "PWD=/tmp"}
	child := startChild(t, env, "sleep", "600")
	d, err = ReadDetail(liveFS(), child.Process.Pid, LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PATH": os.Getenv("PATH"), "MY_API_KEY": "[redacted]", "DATABASE_URL": "postgres://u:[redacted]@h/db", "PLAIN": "hello", "PWD": "/tmp"}
	if !mapsEqual(d.Environment, want) {
		t.Errorf("child environment %v, want %v", d.Environment, want)
	}
	if d.Name != "sleep" || d.PPID != os.Getpid() || !slices.Equal(d.Cmdline, []string{"sleep", "600"}) {
		t.Errorf("child %+v", d.Proc)
	}

	// Reaped: gone.
	child.Process.Kill()
	child.Wait()
	if _, err := ReadDetail(liveFS(), child.Process.Pid, LiveOptions()); err == nil || !strings.Contains(err.Error(), "no such process") {
		t.Errorf("reaped child: %v", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLiveInodeOwners(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ino := listenInode(t, port)
	owners, err := InodeOwners(liveFS())
	if err != nil {
		t.Fatal(err)
	}
	if owners[ino] != os.Getpid() {
		t.Errorf("socket inode %d owned by %d, want %d", ino, owners[ino], os.Getpid())
	}
	d, err := ReadDetail(liveFS(), os.Getpid(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(d.SocketInodes, func(s SocketFD) bool { return s.Inode == ino }) {
		t.Errorf("inode %d not in %+v", ino, d.SocketInodes)
	}
}

// listenInode finds the inode of the listener on 127.0.0.1:port in
// /proc/net/tcp.
func listenInode(t *testing.T, port int) uint64 {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // TCP_LISTEN
			ino, err := strconv.ParseUint(f[9], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return ino
		}
	}
	t.Fatalf("no listener %s in /proc/net/tcp", local)
	return 0
}

func TestLiveIdentity(t *testing.T) {
	id, err := ReadIdentity(liveFS(), os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	if id.PID != os.Getpid() || id.PPID != os.Getppid() || id.UID != os.Getuid() || id.Kernel || id.StartTicks == 0 || id.Name != strings.TrimSpace(string(comm)) {
		t.Errorf("own identity %+v", id)
	}
	s, err := Read(liveFS(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if p := findProc(t, s, os.Getpid()); p.StartTicks != id.StartTicks || p.Name != id.Name {
		t.Errorf("Read says start %d name %q, ReadIdentity %d %q", p.StartTicks, p.Name, id.StartTicks, id.Name)
	}
	if k, err := ReadIdentity(liveFS(), 2); err == nil && k.Name == "kthreadd" && !k.Kernel {
		t.Errorf("kthreadd %+v not a kernel thread", k)
	}

	child := startChild(t, nil, "sleep", "600")
	c, err := ReadIdentity(liveFS(), child.Process.Pid)
	if err != nil || c.Name != "sleep" || c.PPID != os.Getpid() || c.StartTicks < id.StartTicks {
		t.Errorf("child identity %+v, %v", c, err)
	}
	// A thread of this process is not a process.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		if tid, _ := strconv.Atoi(task.Name()); tid != os.Getpid() {
			if _, err := ReadIdentity(liveFS(), tid); err == nil || !strings.Contains(err.Error(), "is a thread of process") {
				t.Errorf("thread %d: %v", tid, err)
			}
			break
		}
	}
}

func BenchmarkReadLive(b *testing.B) {
	o := LiveOptions()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		s, err := Read(liveFS(), o)
		if err != nil {
			b.Fatal(err)
		}
		n = len(s.Procs)
	}
	b.ReportMetric(float64(n), "procs")
}

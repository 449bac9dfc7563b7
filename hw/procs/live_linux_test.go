package procs

import (
	"bufio"
	"context"
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
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)); len(b) > 0 {
			return cmd
		}
	}
	t.Fatalf("%s: no command line after 5 s", name)
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

// TestLiveCPUPercent runs a busy loop and a sleeper, reads two snapshots
// a second apart and, when procps top is installed, compares with what top
// measures over the same second.
func TestLiveCPUPercent(t *testing.T) {
	busy := startChild(t, nil, "/bin/sh", "-c", "while :; do :; done")
	sleeper := startChild(t, nil, "sleep", "30")
	bpid, spid := busy.Process.Pid, sleeper.Process.Pid

	type topResult struct {
		values []float64
		err    error
	}
	var topDone chan topResult
	if top, err := exec.LookPath("top"); err == nil {
		topDone = make(chan topResult, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		t.Cleanup(cancel)
		cmd := exec.CommandContext(ctx, top, "-b", "-n", "2", "-d", "1", "-p", strconv.Itoa(bpid))
		// No toprc of the user's may change the columns or the Irix mode.
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "LC_ALL=C", "COLUMNS=200")
		go func() {
			out, err := cmd.Output()
			if err != nil {
				topDone <- topResult{err: fmt.Errorf("%v: %s", err, out)}
				return
			}
			v, err := topCPU(string(out), bpid)
			topDone <- topResult{v, err}
		}()
	} else {
		t.Log("top not installed: no comparison with procps")
	}

	s0, err := Read(liveFS(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	s1, err := Read(liveFS(), LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	pct := CPUPercent(s0, s1, LiveOptions())
	t.Logf("window %.2f s: busy %.1f%%, sleeping %.1f%%", s1.Uptime-s0.Uptime, pct[bpid], pct[spid])
	if b := pct[bpid]; b < 60 || b > 130 {
		t.Errorf("busy loop at %.1f%%, want about 100", b)
	}
	if s := pct[spid]; s >= 5 {
		t.Errorf("sleep at %.1f%%, want about 0", s)
	}

	if topDone == nil {
		return
	}
	r := <-topDone
	if r.err != nil {
		t.Fatalf("top: %v", r.err)
	}
	if len(r.values) < 2 {
		t.Fatalf("top printed %d iterations for pid %d", len(r.values), bpid)
	}
	t.Logf("top: %v", r.values)
	if d := pct[bpid] - r.values[1]; d < -15 || d > 15 {
		t.Errorf("busy loop: ours %.1f%%, top's %.1f%%", pct[bpid], r.values[1])
	}
}

// topCPU returns pid's %CPU in each iteration of top -b output, finding the
// column by its header.
func topCPU(out string, pid int) ([]float64, error) {
	var vals []float64
	col := -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "PID" {
			col = slices.Index(f, "%CPU")
			continue
		}
		if col >= 0 && col < len(f) && f[0] == strconv.Itoa(pid) {
			v, err := strconv.ParseFloat(strings.ReplaceAll(f[col], ",", "."), 64)
			if err != nil {
				return nil, fmt.Errorf("top line %q: %v", sc.Text(), err)
			}
			vals = append(vals, v)
		}
	}
	return vals, nil
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
	child := startChild(t, env, "sleep", "30")
	d, err = ReadDetail(liveFS(), child.Process.Pid, LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"PATH": os.Getenv("PATH"), "MY_API_KEY": "[redacted]", "DATABASE_URL": "postgres://u:[redacted]@h/db", "PLAIN": "hello", "PWD": "/tmp"}
	if !mapsEqual(d.Environment, want) {
		t.Errorf("child environment %v, want %v", d.Environment, want)
	}
	if d.Name != "sleep" || d.PPID != os.Getpid() || !slices.Equal(d.Cmdline, []string{"sleep", "30"}) {
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

	child := startChild(t, nil, "sleep", "30")
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

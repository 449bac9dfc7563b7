package procs

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// The testdata/pi tree is a Raspberry Pi 4 (4 CPUs, 4 GB) captured by hand
// twice, 2.00 s of uptime apart (t0 at 8512.34, t1 at 8514.34):
//
//	pid   name                       what the tree exercises
//	1     systemd                    init, root
//	2     kthreadd                   kernel thread (PF_KTHREAD), no exe
//	37    kworker/0:1H-mmc_complete  kernel thread, state I, nice -20
//	412   sshd                       setproctitle cmdline padded with NULs, sockets
//	639   systemd --user             user pi
//	640   (sd-pam)                   ')' inside comm
//	655   tmux: server               space inside comm
//	700   vim                        stopped (T)
//	803   python3                    busy (75 %), env with API_KEY and DATABASE_URL, io, smaps, fds
//	804   python3 thread             Tgid 803: not a process, skipped
//	815   sh                         zombie
//	910   node-red                   uid 1001 not in etc/passwd, 11 threads, nice 5
//	980   sudo                       real uid 1000, effective uid 0
//	1020  sleep (t0) / cat (t1)      PID reused between the snapshots
//	1021  vcgencmd                   new in t1
//	1022  grep                       disk-sleep in t0, gone in t1
func readPi(t testing.TB, snap string) Snapshot {
	t.Helper()
	s, err := Read(os.DirFS("testdata/pi/"+snap), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func findProc(t testing.TB, s Snapshot, pid int) Proc {
	t.Helper()
	i, ok := slices.BinarySearchFunc(s.Procs, pid, func(p Proc, pid int) int { return p.PID - pid })
	if !ok {
		t.Fatalf("pid %d not in snapshot", pid)
	}
	return s.Procs[i]
}

func TestReadPi(t *testing.T) {
	s := readPi(t, "t0")
	if s.Uptime != 8512.34 || s.CPUs != 4 || s.MemTotal != 3885604*1024 || !s.BootTime.Equal(time.Unix(1717000000, 0)) {
		t.Errorf("snapshot header: uptime %v cpus %d mem %d boot %v", s.Uptime, s.CPUs, s.MemTotal, s.BootTime)
	}
	var pids []int
	for _, p := range s.Procs {
		pids = append(pids, p.PID)
	}
	want := []int{1, 2, 37, 412, 639, 640, 655, 700, 803, 815, 910, 980, 1020, 1022}
	if !slices.Equal(pids, want) {
		t.Fatalf("pids %v, want %v (sorted, thread 804 skipped)", pids, want)
	}

	py := findProc(t, s, 803)
	wantPy := Proc{
		PID: 803, PPID: 1, Name: "python3", State: "running", UID: 1000, Username: "pi",
		Cmdline:    []string{"/usr/bin/python3", "/home/pi/sensor-logger.py", "--interval", "1"},
		Exe:        "/usr/bin/python3.11",
		Cwd:        "/home/pi",
		StartTicks: 2600, StartTime: time.Unix(1717000000+26, 0),
		UTime: 4000, STime: 500, RSS: 3200 * 4096, VMS: 29622272, Threads: 3, Nice: 0,
	}
	if !reflect.DeepEqual(py, wantPy) {
		t.Errorf("python3:\n got %+v\nwant %+v", py, wantPy)
	}

	checks := []struct {
		pid      int
		name     string
		state    string
		user     string
		kernel   bool
		exe      string
		cmdline  []string
		threads  int
		nice     int
		startSec float64
	}{
		{1, "systemd", "sleeping", "root", false, "/usr/lib/systemd/systemd", []string{"/sbin/init", "splash"}, 1, 0, 1.18},
		{2, "kthreadd", "sleeping", "root", true, "", nil, 1, 0, 1.18},
		{37, "kworker/0:1H-mmc_complete", "idle", "root", true, "", nil, 1, -20, 1.40},
		{412, "sshd", "sleeping", "root", false, "/usr/sbin/sshd", []string{"sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"}, 1, 0, 15.2},
		{640, "(sd-pam)", "sleeping", "pi", false, "/usr/lib/systemd/systemd", []string{"(sd-pam)"}, 1, 0, 23.01},
		{655, "tmux: server", "sleeping", "pi", false, "/usr/bin/tmux", []string{"tmux"}, 1, 0, 24.10},
		{700, "vim", "stopped", "pi", false, "/usr/bin/vim.basic", []string{"vim", "/etc/hosts"}, 1, 0, 51.20},
		{815, "sh", "zombie", "pi", false, "", nil, 1, 0, 8400},
		{910, "node-red", "sleeping", "1001", false, "/usr/bin/node", []string{"node-red"}, 11, 5, 19.80},
		{980, "sudo", "sleeping", "pi", false, "/usr/bin/sudo", []string{"sudo", "tail", "-f", "/var/log/syslog"}, 1, 0, 8100},
		{1022, "grep", "disk-sleep", "pi", false, "/usr/bin/grep", []string{"grep", "-r", "foo", "/etc"}, 1, 0, 8512},
	}
	for _, c := range checks {
		p := findProc(t, s, c.pid)
		if p.Name != c.name || p.State != c.state || p.Username != c.user || p.Kernel != c.kernel || p.Exe != c.exe ||
			!slices.Equal(p.Cmdline, c.cmdline) || p.Threads != c.threads || p.Nice != c.nice {
			t.Errorf("pid %d: got %+v", c.pid, p)
		}
		wantStart := s.BootTime.Add(time.Duration(c.startSec * float64(time.Second)))
		if d := p.StartTime.Sub(wantStart); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("pid %d: start time %v, want %v", c.pid, p.StartTime, wantStart)
		}
	}
	if p := findProc(t, s, 980); p.UID != 1000 {
		t.Errorf("sudo: uid %d, want the real uid 1000 (effective is 0)", p.UID)
	}
	if p := findProc(t, s, 2); p.Cwd != "/" {
		t.Errorf("kthreadd cwd %q", p.Cwd)
	}
}

// TestCPUPercentPi checks CPUPercent against values computed by hand from
// the two trees (window 2.00 s, 100 ticks/s).
func TestCPUPercentPi(t *testing.T) {
	t0, t1 := readPi(t, "t0"), readPi(t, "t1")
	got := CPUPercent(t0, t1, Options{})
	want := map[int]float64{
		1:    2.0,  // 4 ticks in 2 s
		2:    0,    //
		37:   1.0,  // 2 ticks
		412:  0.5,  // 1 tick
		639:  0,    //
		640:  0,    //
		655:  1.0,  // 2 ticks
		700:  0,    // stopped
		803:  75.0, // 150 ticks
		815:  0,    // zombie
		910:  20.0, // 40 ticks
		980:  0,    //
		1020: 30.0, // reused: cat started at 8513.84, 15 ticks in its 0.50 s, not 15 ticks since sleep's start
		1021: 45.0, // new: started at 8513.34, 45 ticks in its 1.00 s
	}
	if len(got) != len(want) {
		t.Errorf("got %d PIDs, want %d (1022 exited, only cur's PIDs count): %v", len(got), len(want), got)
	}
	for pid, w := range want {
		g, ok := got[pid]
		if !ok || math.Abs(g-w) > 1e-6 {
			t.Errorf("pid %d: %.4f%%, want %.4f%%", pid, g, w)
		}
	}

	// With no previous snapshot: the average since each process started.
	life := CPUPercent(Snapshot{}, t0, Options{})
	if w := 4500.0 / 100 / (8512.34 - 26.00) * 100; math.Abs(life[803]-w) > 1e-9 {
		t.Errorf("lifetime python3: %v, want %v", life[803], w)
	}
	// Same snapshot twice: no window, so lifetimes again rather than NaN.
	same := CPUPercent(t1, t1, Options{})
	for pid, v := range same {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("pid %d: %v with an empty window", pid, v)
		}
	}
}

func TestCPUPercentEdges(t *testing.T) {
	prev := Snapshot{Uptime: 100, CPUs: 2, Procs: []Proc{
		{PID: 5, StartTicks: 10, UTime: 500},
		{PID: 6, StartTicks: 10, UTime: 500},
	}}
	cur := Snapshot{Uptime: 101, CPUs: 2, Procs: []Proc{
		{PID: 5, StartTicks: 10, UTime: 480},                // counter went backwards (impossible live): 0, not huge
		{PID: 6, StartTicks: 10, UTime: 500 + 400},          // 400 ticks in 1 s on 2 CPUs: capped at 200
		{PID: 7, StartTicks: 10100, UTime: 3},               // started this very tick: divides by one tick
		{PID: 8, StartTicks: 9000, UTime: 150, STime: 50},   // new, started 11 s ago, missed by prev
		{PID: 9, StartTicks: 10050, UTime: 120, STime: 120}, // multithreaded new process: 240 ticks in 0.5 s
	}}
	got := CPUPercent(prev, cur, Options{})
	want := map[int]float64{5: 0, 6: 200, 7: 200, 8: 2.0 / 11 * 100, 9: 200}
	for pid, w := range want {
		if math.Abs(got[pid]-w) > 1e-9 {
			t.Errorf("pid %d: %v, want %v", pid, got[pid], w)
		}
	}
	// A clock tick of 250 Hz changes the unit.
	got = CPUPercent(Snapshot{Uptime: 10, Procs: []Proc{{PID: 1, UTime: 100}}}, Snapshot{Uptime: 12, Procs: []Proc{{PID: 1, UTime: 350}}}, Options{ClockTick: 250})
	if got[1] != 50 {
		t.Errorf("250 Hz: %v, want 50", got[1])
	}
}

func TestParseStat(t *testing.T) {
	tail := " 1 1 1 0 -1 4194560 0 0 0 0 7 8 0 0 20 0 2 0 99 1000 3 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	for _, comm := range []string{"a) R 5 (b", ") (", "x y z", "", "((()))", "weird\nname"} {
		st, err := parseStat([]byte("42 (" + comm + ") S" + tail))
		if err != nil {
			t.Errorf("comm %q: %v", comm, err)
			continue
		}
		if string(st.comm) != comm || st.state != 'S' || st.ppid != 1 || st.utime != 7 || st.stime != 8 || st.threads != 2 || st.start != 99 || st.vsize != 1000 || st.rss != 3 {
			t.Errorf("comm %q: %+v", comm, st)
		}
	}
	for _, bad := range []string{"", "42", "42 (x) S 1 2", "42 (x) S x 1 1 0 -1 4194560 0 0 0 0 7 8 0 0 20 0 2 0 99 1000 3", "42 x) S"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestStateName(t *testing.T) {
	for c, want := range map[byte]string{
		'R': "running", 'S': "sleeping", 'D': "disk-sleep", 'T': "stopped", 't': "stopped", 'Z': "zombie",
		'X': "zombie", 'I': "idle", 'P': "idle", 'W': "running", 'K': "disk-sleep", '?': "sleeping", 0: "sleeping",
	} {
		if got := StateName(c); got != want {
			t.Errorf("%q: %s, want %s", c, got, want)
		}
	}
}

func TestKernelThreadRule(t *testing.T) {
	for _, c := range []struct {
		pid, ppid int
		flags     uint64
		want      bool
	}{
		{2, 0, 0x208040, true},
		{37, 2, 0x4208060, true},
		{2, 0, 0, true},         // hand-written tree without flags
		{15, 2, 0, true},        // likewise
		{2, 0, 0x400100, false}, // pid 2 of a container's PID namespace: a user process
		{15, 2, 0x400000, false},
		{1, 0, 0x400100, false},
	} {
		if got := (stat{ppid: c.ppid, flags: c.flags}).kernel(c.pid); got != c.want {
			t.Errorf("pid %d ppid %d flags %#x: kernel %v", c.pid, c.ppid, c.flags, got)
		}
	}
}

func TestReadDetailPi(t *testing.T) {
	d, err := ReadDetail(os.DirFS("testdata/pi/t0"), 803, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "python3" || d.Username != "pi" || d.CPUUser != 40 || d.CPUSystem != 5 || len(d.Hidden) != 0 || d.Truncated {
		t.Errorf("detail: %+v", d)
	}
	wantEnv := map[string]string{
		"LANG": "en_GB.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/pi", "LOGNAME": "pi", "USER": "pi",
		"PWD": "/home/pi", "API_KEY": Redacted, "DATABASE_URL": "postgres://logger:[redacted]@localhost/sensors",
		"MQTT_PASSWORD": Redacted, "LOG_LEVEL": "info", "INVOCATION_ID": "5c0e6a1b2f3d4e8f9a0b1c2d3e4f5a6b",
		"JOURNAL_STREAM": "8:20112", "SYSTEMD_EXEC_PID": "803",
	}
	if !reflect.DeepEqual(d.Environment, wantEnv) {
		t.Errorf("environment:\n got %v\nwant %v", d.Environment, wantEnv)
	}
	wantFiles := []OpenFile{
		{0, "/dev/null", "r"}, {1, "/home/pi/logs/sensor.log", "w"}, {2, "/home/pi/logs/sensor.log", "w"},
		{3, "/dev/i2c-1", "rw"}, {5, "pipe:[20560]", "r"}, {6, "anon_inode:[eventfd]", "rw"},
	}
	if !reflect.DeepEqual(d.OpenFiles, wantFiles) {
		t.Errorf("open files:\n got %v\nwant %v", d.OpenFiles, wantFiles)
	}
	if want := []SocketFD{{4, 20551}}; !reflect.DeepEqual(d.SocketInodes, want) || d.FDCount != 7 {
		t.Errorf("sockets %v (fds %d), want %v", d.SocketInodes, d.FDCount, want)
	}
	if want := (IOCounters{ReadCount: 1200, WriteCount: 3100, ReadBytes: 40960, WriteBytes: 188416, RChar: 523409, WChar: 190231}); d.IO == nil || *d.IO != want {
		t.Errorf("io %+v, want %+v", d.IO, want)
	}
	const k = 1024
	wantMaps := []MemoryMap{
		{"[heap]", 10600 * k, 10832 * k, "rw-p"},
		{"/usr/bin/python3.11", 2176 * k, 3168 * k, "rwxp"},
		{"/usr/lib/aarch64-linux-gnu/libc.so.6", 1124 * k, 1588 * k, "rwxp"},
		{"[stack]", 40 * k, 132 * k, "rw-p"},
		{"[anon]", 12 * k, 132 * k, "rw-p"},
		{"/dev/shm/sensor buf", 12 * k, 12 * k, "rw-s"},
		{"[vdso]", 4 * k, 8 * k, "r-xp"},
	}
	if !reflect.DeepEqual(d.Maps, wantMaps) || d.MapsTotal != 7 {
		t.Errorf("maps (%d):\n got %v\nwant %v", d.MapsTotal, d.Maps, wantMaps)
	}

	// sshd: one socket on two descriptors, setproctitle cmdline.
	d, err = ReadDetail(os.DirFS("testdata/pi/t0"), 412, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []SocketFD{{1, 16001}, {2, 16001}, {3, 16230}, {4, 16232}}; !reflect.DeepEqual(d.SocketInodes, want) {
		t.Errorf("sshd sockets %v", d.SocketInodes)
	}
	if d.Environment["SSHD_OPTS"] != "" || len(d.Environment) != 5 || d.Maps != nil || len(d.Hidden) != 0 {
		t.Errorf("sshd: env %v maps %v hidden %v", d.Environment, d.Maps, d.Hidden)
	}

	// A kernel thread: nothing hidden, just nothing there.
	d, err = ReadDetail(os.DirFS("testdata/pi/t0"), 37, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Kernel || len(d.Environment) != 0 || d.Environment == nil || d.OpenFiles != nil || d.IO != nil || len(d.Hidden) != 0 {
		t.Errorf("kworker: %+v", d)
	}

	for _, pid := range []int{804, 1021, 99999} {
		if _, err := ReadDetail(os.DirFS("testdata/pi/t0"), pid, Options{}); !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "procs: pid ") {
			t.Errorf("pid %d: %v, want a procs: error wrapping fs.ErrNotExist", pid, err)
		}
	}
	if _, err := ReadDetail(os.DirFS("testdata/pi/t0"), 0, Options{}); err == nil {
		t.Error("pid 0 read")
	}
}

// denyFS answers EACCES for the names deny matches, as /proc does for
// another user's environ, fd/ and exe.
type denyFS struct {
	fs.FS
	deny func(name string) bool
}

func (d denyFS) Open(name string) (fs.File, error) {
	if d.deny(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.Open(name)
}

func (d denyFS) ReadLink(name string) (string, error) {
	if d.deny(name) {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrPermission}
	}
	return fs.ReadLink(d.FS, name)
}

func (d denyFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(d.FS, name) }

func TestHidden(t *testing.T) {
	fsys := denyFS{os.DirFS("testdata/pi/t0"), func(name string) bool {
		for _, s := range []string{"/environ", "/fd", "/io", "/smaps", "/exe", "/cwd"} {
			if strings.HasPrefix(name, "proc/803") && strings.HasSuffix(name, s) {
				return true
			}
		}
		return name == "proc/412/stat" // hidepid: the process is invisible
	}}
	d, err := ReadDetail(fsys, 803, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"executable: permission denied", "working directory: permission denied", "environment: permission denied",
		"open files: permission denied", "io: permission denied", "memory maps: permission denied"}
	if !slices.Equal(d.Hidden, want) {
		t.Errorf("hidden %q, want %q", d.Hidden, want)
	}
	if d.Environment != nil || d.OpenFiles != nil || d.IO != nil || d.Maps != nil || d.Exe != "" || d.Cwd != "" || d.Name != "python3" {
		t.Errorf("hidden parts filled: %+v", d)
	}
	s, err := Read(fsys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := findProc(t, s, 803); p.Exe != "" || p.Cwd != "" || len(p.Cmdline) != 4 {
		t.Errorf("python3 in Read: %+v", p)
	}
	if slices.ContainsFunc(s.Procs, func(p Proc) bool { return p.PID == 412 }) {
		t.Error("a process with an unreadable stat is listed")
	}
	if _, err := ReadDetail(fsys, 412, Options{}); !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "procs: pid 412") {
		t.Errorf("hidden process detail: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	base := fstest.MapFS{
		"proc/uptime":   {Data: []byte("10.00 20.00\n")},
		"proc/stat":     {Data: []byte("cpu  1 2 3\ncpu0 1 2 3\nbtime 1700000000\n")},
		"proc/meminfo":  {Data: []byte("MemTotal: 1000 kB\n")},
		"proc/1/stat":   {Data: []byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 7 8 0 0 20 0 1 0 5 1000 3 0\n")},
		"proc/1/status": {Data: []byte("Name:\tinit\nUid:\t0\t0\t0\t0\n")},
	}
	if s, err := Read(base, Options{}); err != nil || len(s.Procs) != 1 || s.Procs[0].Username != "0" || s.CPUs != 1 {
		t.Fatalf("minimal tree (no passwd, no cmdline): %+v, %v", s, err)
	}
	for _, c := range []struct{ file, data, want string }{
		{"proc/uptime", "", "proc/uptime"},
		{"proc/uptime", "abc 1", "bad uptime"},
		{"proc/stat", "cpu 1\n", "no btime"},
		{"proc/meminfo", "MemFree: 1 kB\n", "no MemTotal"},
		{"proc/1/stat", "1 (init) S 0 1", "procs: pid 1: proc/1/stat"},
		{"proc/1/status", "Name:\tinit\n", "procs: pid 1: proc/1/status: no Uid"},
	} {
		fsys := fstest.MapFS{}
		for k, v := range base {
			fsys[k] = v
		}
		if c.data == "" {
			delete(fsys, c.file)
		} else {
			fsys[c.file] = &fstest.MapFile{Data: []byte(c.data)}
		}
		if _, err := Read(fsys, Options{}); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "procs: ") {
			t.Errorf("%s = %q: %v, want an error containing %q", c.file, c.data, err, c.want)
		}
	}
}

func TestInodeOwnersPi(t *testing.T) {
	got, err := InodeOwners(os.DirFS("testdata/pi/t0"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int{11001: 1, 16001: 412, 16230: 412, 16232: 412, 18800: 655, 20551: 803, 21010: 910, 21011: 910}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReadIdentityPi(t *testing.T) {
	fsys := os.DirFS("testdata/pi/t0")
	for _, want := range []Identity{
		{PID: 1, UID: 0, PPID: 0, StartTicks: 118, Name: "systemd", State: "sleeping"},
		{PID: 2, UID: 0, PPID: 0, StartTicks: 118, Kernel: true, Name: "kthreadd", State: "sleeping"},
		{PID: 640, UID: 1000, PPID: 639, StartTicks: 2301, Name: "(sd-pam)", State: "sleeping"},
		{PID: 815, UID: 1000, PPID: 803, StartTicks: 840000, Name: "sh", State: "zombie"},
		{PID: 980, UID: 1000, PPID: 656, StartTicks: 810000, Name: "sudo", State: "sleeping"},
	} {
		got, err := ReadIdentity(fsys, want.PID)
		if err != nil || got != want {
			t.Errorf("pid %d: %+v, %v; want %+v", want.PID, got, err, want)
		}
	}
	for _, pid := range []int{804, 5555} {
		if _, err := ReadIdentity(fsys, pid); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("pid %d: %v, want fs.ErrNotExist", pid, err)
		}
	}
	if _, err := ReadIdentity(fsys, -1); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid -1: %v", err)
	}
}

func TestUsername(t *testing.T) {
	fsys := os.DirFS("testdata/pi/t0")
	for uid, want := range map[int]string{0: "root", 1000: "pi", 65534: "nobody", 1001: "1001"} {
		if got := Username(fsys, uid); got != want {
			t.Errorf("uid %d: %q, want %q", uid, got, want)
		}
	}
	if got := Username(fstest.MapFS{}, 0); got != "0" {
		t.Errorf("no passwd: %q", got)
	}
}

func TestSecret(t *testing.T) {
	secret := []string{
		"API_KEY", "api_key", "MY_API_KEY", "KEY", "KEY_FILE", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_TOKEN",
		"token", "PASSWORD", "DB_PASSWORD", "MYSQL_PWD", "DB_PASS", "PASS", "PASSWD", "GPG_PASSPHRASE", "CREDENTIALS",
		"GOOGLE_APPLICATION_CREDENTIALS", "AUTH", "BASIC_AUTH", "HTTP_AUTHORIZATION", "OAUTH_CLIENT", "COOKIE_SECRET",
		"SESSION_ID", "PRIVATE_KEY_PATH", "SENTRY_DSN", "DSN", "DB_CONNECTION_STRING", "ConnectionString", "apiKey",
		"SSH_KEYS", "JWT", "NGROK_AUTHTOKEN", "WIFI_PSK", "password-file", "x.secret.y",
	}
	plain := []string{
		"PWD", "OLDPWD", "pwd", "HOME", "PATH", "KEYBOARD", "XKB_DEFAULT_KEYMAP", "KEYMAP", "PASSENGER_ENV", "COMPASS",
		"SSH_AUTH_SOCK", "XDG_SESSION_ID", "XDG_SESSION_TYPE", "DESKTOP_SESSION", "GIT_AUTHOR_NAME", "AUTHOR", "LANG",
		"DATABASE_URL", "MONKEY", "TURKEY_COUNT", "",
	}
	for _, k := range secret {
		if !Secret(k) {
			t.Errorf("%q is not a secret", k)
		}
	}
	for _, k := range plain {
		if Secret(k) {
			t.Errorf("%q is a secret", k)
		}
	}
}

func TestRedactValue(t *testing.T) {
	for _, c := range []struct{ key, value, want string }{
		{"API_KEY", "abc", Redacted},
		{"PWD", "/home/pi", "/home/pi"},
		{"DATABASE_URL", "postgres://u:pw@h/db", "postgres://u:[redacted]@h/db"},
		{"DATABASE_URL", "postgres://u@h/db", "postgres://u@h/db"},
		{"DATABASE_URL", "postgres://h/db?x=a@b", "postgres://h/db?x=a@b"},
		{"URL", "postgres://u:pw@h/db?opt=a@b", "postgres://u:[redacted]@h/db?opt=a@b"},
		{"URL", "redis://:p@ss@cache:6379/0", "redis://:[redacted]@cache:6379/0"},
		{"URL", "redis://:p/ss@cache", "redis://:[redacted]@cache"},
		{"BROKERS", "amqp://a:1@h1,amqp://b:2@h2", "amqp://a:[redacted]@h1,amqp://b:[redacted]@h2"},
		{"OPTS", "--db mysql://root:toor@localhost:3306/x --v", "--db mysql://root:[redacted]@localhost:3306/x --v"},
		{"URL", "https://example.com/a?user=x&password=y&api_key=z#f", "https://example.com/a?user=x&password=[redacted]&api_key=[redacted]"}, // '#' may be part of a password
		{"PGOPTS", "host=db user=app password=s3cret sslmode=require", "host=db user=app password=[redacted] sslmode=require"},
		{"CONN", "Server=db;User Id=sa;Password=Pa55;", "Server=db;User Id=sa;Password=[redacted];"},
		{"ARGS", "--password=xyz --verbose", "--password=[redacted] --verbose"},
		{"LS_COLORS", "rs=0:di=01;34:ln=01;36", "rs=0:di=01;34:ln=01;36"},
		{"EMPTY", "password=", "password="},
		{"PLAIN", "hello", "hello"},
	} {
		if got := RedactValue(c.key, c.value); got != c.want {
			t.Errorf("%s=%q: %q, want %q", c.key, c.value, got, c.want)
		}
	}
}

// ReadPID sees one process as Read does (but for the parts it leaves out),
// so CPU use from two ReadPIDs equals CPU use from two whole tables.
func TestReadPIDMatchesRead(t *testing.T) {
	t0, t1 := readPi(t, "t0"), readPi(t, "t1")
	whole := CPUPercent(t0, t1, Options{})
	for _, pid := range []int{1, 803, 1020, 1021} {
		a, err := ReadPID(os.DirFS("testdata/pi/t0"), pid, Options{})
		if err != nil && pid != 1021 { // 1021 starts after t0
			t.Fatalf("pid %d at t0: %v", pid, err)
		}
		b, err := ReadPID(os.DirFS("testdata/pi/t1"), pid, Options{})
		if err != nil {
			t.Fatalf("pid %d at t1: %v", pid, err)
		}
		if b.Uptime != t1.Uptime || b.MemTotal != t1.MemTotal || b.CPUs != t1.CPUs || len(b.Procs) != 1 {
			t.Fatalf("pid %d: snapshot %+v, want t1's figures and one process", pid, b)
		}
		i := slices.IndexFunc(t1.Procs, func(p Proc) bool { return p.PID == pid })
		want := t1.Procs[i]
		want.Username, want.Cmdline, want.Exe, want.Cwd = "", nil, "", ""
		if !reflect.DeepEqual(b.Procs[0], want) {
			t.Errorf("pid %d:\n got %+v\nwant %+v", pid, b.Procs[0], want)
		}
		if got := CPUPercent(a, b, Options{})[pid]; math.Abs(got-whole[pid]) > 1e-9 {
			t.Errorf("pid %d: %.4f%% from ReadPID, %.4f%% from Read", pid, got, whole[pid])
		}
	}
	if _, err := ReadPID(os.DirFS("testdata/pi/t1"), 99999, Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing pid: %v, want fs.ErrNotExist", err)
	}
	if _, err := ReadPID(os.DirFS("testdata/pi/t1"), 0, Options{}); err == nil {
		t.Error("pid 0 read without error")
	}
}

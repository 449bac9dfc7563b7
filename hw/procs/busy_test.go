package procs

import (
	"fmt"
	"io/fs"
	"math"
	"testing"
	"testing/fstest"
)

// busyTree builds, in memory, a deterministic /proc of a busy machine:
// init, kthreadd and n-2 more processes, a quarter of them kernel workers.
// Snapshot k (0 or 1) is taken at uptime 5000+2k; between the two, process
// i uses busyTicks(i) clock ticks, so its CPU share is busyTicks(i)/2 %.
// User processes i%10 == 1 all hold socket 999999, as a pre-forking
// server's workers share their listener.
func busyTree(n, k int) fstest.MapFS {
	fsys := fstest.MapFS{
		"proc/uptime":  {Data: fmt.Appendf(nil, "%d.00 %d.00\n", 5000+2*k, 19000+7*k)},
		"proc/stat":    {Data: []byte("cpu  1 2 3 4 5 6 7 0 0 0\ncpu0 1 2 3 4\ncpu1 1 2 3 4\ncpu2 1 2 3 4\ncpu3 1 2 3 4\nbtime 1700000000\nprocesses 9999\n")},
		"proc/meminfo": {Data: []byte("MemTotal:        8245432 kB\nMemFree:         1000000 kB\n")},
		"etc/passwd":   {Data: []byte("root:x:0:0:root:/root:/bin/bash\nwww-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\npi:x:1000:1000:,,,:/home/pi:/bin/bash\n")},
	}
	add := func(pid, ppid int, comm, state string, flags uint64, uid, i int, cmdline string) {
		dir := fmt.Sprintf("proc/%d/", pid)
		ticks := uint64(1000+i) + uint64(k*busyTicks(i))
		fsys[dir+"stat"] = &fstest.MapFile{Data: fmt.Appendf(nil,
			"%d (%s) %s %d %d %d 0 -1 %d 120 0 3 0 %d %d 0 0 20 0 %d 0 %d %d %d 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 %d 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			pid, comm, state, ppid, pid, pid, flags, ticks*3/4, ticks-ticks*3/4, 1+i%8, 300+i, 10_000_000+i*4096, 500+i, i%4)}
		fsys[dir+"status"] = &fstest.MapFile{Data: fmt.Appendf(nil,
			"Name:\t%s\nUmask:\t0022\nState:\t%s (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nFDSize:\t64\nGroups:\t\nVmRSS:\t    2000 kB\nThreads:\t%d\nSigQ:\t0/15013\nCpus_allowed_list:\t0-3\nvoluntary_ctxt_switches:\t%d\nnonvoluntary_ctxt_switches:\t3\n",
			comm, state, pid, pid, ppid, uid, uid, uid, uid, uid, uid, uid, uid, 1+i%8, i)}
		fsys[dir+"cmdline"] = &fstest.MapFile{Data: []byte(cmdline)}
		fsys[dir+"environ"] = &fstest.MapFile{}
		fsys[dir+"cwd"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("/")}
		if flags&pfKthread == 0 {
			fsys[dir+"exe"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: fmt.Appendf(nil, "/usr/bin/%s", comm)}
			fsys[dir+"environ"] = &fstest.MapFile{Data: fmt.Appendf(nil, "HOME=/\x00WORKER=%d\x00API_TOKEN=t%d\x00", i, i)}
			fsys[dir+"fd/0"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("/dev/null")}
			fsys[dir+"fd/1"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: fmt.Appendf(nil, "socket:[%d]", 100000+pid)}
			if i%10 == 1 {
				fsys[dir+"fd/3"] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte("socket:[999999]")}
			}
		}
	}
	add(1, 0, "systemd", "S", 0x400100, 0, 0, "/sbin/init\x00")
	add(2, 0, "kthreadd", "S", 0x208040, 0, 1, "")
	for i := 2; i < n; i++ {
		pid := busyPID(i)
		if i%4 == 0 {
			add(pid, 2, fmt.Sprintf("kworker/%d:%d-events", i%4, i), "I", 0x4208060, 0, i, "")
			continue
		}
		uid := []int{0, 33, 1000, 4242}[i%4]
		add(pid, 1, fmt.Sprintf("worker-%d", i), "S", 0x400000, uid, i,
			fmt.Sprintf("/usr/bin/worker-%d\x00--id\x00%d\x00--config\x00/etc/worker/%d.toml\x00", i, i, i))
	}
	return fsys
}

func busyPID(i int) int {
	if i < 2 {
		return i + 1
	}
	return 100 + 7*i
}

// busyTicks is how many ticks process i uses between the two snapshots:
// most processes 0 to 2, every 50th one 80 (40 %).
func busyTicks(i int) int {
	if i%50 == 7 {
		return 80
	}
	return (i * 37) % 3
}

func TestBusyMachine(t *testing.T) {
	const n = 600
	t0, err := Read(busyTree(n, 0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t1, err := Read(busyTree(n, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(t1.Procs) != n || t1.CPUs != 4 || t1.MemTotal != 8245432*1024 {
		t.Fatalf("%d processes, %d CPUs, %d bytes", len(t1.Procs), t1.CPUs, t1.MemTotal)
	}
	kernel, users := 0, map[string]int{}
	for j, p := range t1.Procs {
		if j > 0 && t1.Procs[j-1].PID >= p.PID {
			t.Fatalf("not sorted at %d: %d then %d", j, t1.Procs[j-1].PID, p.PID)
		}
		if p.Kernel {
			kernel++
			if p.Cmdline != nil || p.Exe != "" {
				t.Errorf("kernel thread %d: %+v", p.PID, p)
			}
		}
		users[p.Username]++
	}
	wantKernel := 1 // kthreadd
	for i := 2; i < n; i++ {
		if i%4 == 0 {
			wantKernel++
		}
	}
	if kernel != wantKernel {
		t.Errorf("%d kernel threads, want %d", kernel, wantKernel)
	}
	if users["4242"] == 0 || users["www-data"] == 0 || users["pi"] == 0 || users["root"] == 0 {
		t.Errorf("users %v", users)
	}

	pct := CPUPercent(t0, t1, Options{})
	if len(pct) != n {
		t.Fatalf("%d percentages", len(pct))
	}
	for i := range n {
		pid := busyPID(i)
		if want := float64(busyTicks(i)) / 2; math.Abs(pct[pid]-want) > 1e-9 {
			t.Errorf("process %d (pid %d): %v%%, want %v%%", i, pid, pct[pid], want)
		}
	}

	owners, err := InodeOwners(busyTree(n, 1))
	if err != nil {
		t.Fatal(err)
	}
	if owners[999999] != busyPID(11) || owners[uint64(100000+busyPID(3))] != busyPID(3) {
		t.Errorf("shared socket owned by %d, want the lowest PID %d; pid %d's by %d", owners[999999], busyPID(11), busyPID(3), owners[uint64(100000+busyPID(3))])
	}

	d, err := ReadDetail(busyTree(n, 1), busyPID(5), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Environment["API_TOKEN"] != Redacted || d.Environment["WORKER"] != "5" || len(d.SocketInodes) != 1 || len(d.OpenFiles) != 1 {
		t.Errorf("detail %+v", d)
	}
}

// TestFDCap gives one process more descriptors than MaxFDs of each kind.
func TestFDCap(t *testing.T) {
	fsys := busyTree(3, 0)
	dir := fmt.Sprintf("proc/%d/", busyPID(2))
	for fd := range 2*MaxFDs + 100 {
		target := fmt.Sprintf("/var/log/f%d", fd)
		if fd%2 == 1 {
			target = fmt.Sprintf("socket:[%d]", 5000+fd)
		}
		fsys[fmt.Sprintf("%sfd/%d", dir, fd)] = &fstest.MapFile{Mode: fs.ModeSymlink, Data: []byte(target)}
	}
	d, err := ReadDetail(fsys, busyPID(2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Truncated || len(d.OpenFiles) != MaxFDs || len(d.SocketInodes) != MaxFDs || d.FDCount != 2*MaxFDs+100 {
		t.Fatalf("truncated %v, %d files, %d sockets, %d fds", d.Truncated, len(d.OpenFiles), len(d.SocketInodes), d.FDCount)
	}
	for j, f := range d.OpenFiles {
		if f.FD != 2*j || f.Mode != "" { // no fdinfo in this tree
			t.Fatalf("open file %d: %+v", j, f)
		}
	}
	if last := d.SocketInodes[MaxFDs-1]; last.FD != 2*MaxFDs-1 || last.Inode != uint64(5000+2*MaxFDs-1) {
		t.Errorf("last socket %+v", last)
	}
}

// memFS is a MapFS whose ReadLink of a missing name fails at once: MapFS
// scans every entry looking for a directory of that name, which would make
// BenchmarkRead600 measure MapFS (the kernel threads have no exe).
type memFS struct{ fstest.MapFS }

func (m memFS) ReadLink(name string) (string, error) {
	if _, ok := m.MapFS[name]; !ok {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
	}
	return m.MapFS.ReadLink(name)
}

// BenchmarkRead600 reads the in-memory 600-process tree: the parsing and
// allocation cost of Read without the kernel's.
func BenchmarkRead600(b *testing.B) {
	fsys := memFS{busyTree(600, 0)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(fsys, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

package procs

import (
	"io/fs"
	"math"
	"os"
	"testing"
	"testing/fstest"
)

// treeFS copies a fixture root into a MapFS, symlinks (exe, cwd, fd/N)
// included, so a fuzz iteration can replace single files cheaply.
func treeFS(tb testing.TB, dir string) fstest.MapFS {
	tb.Helper()
	m := fstest.MapFS{}
	root := os.DirFS(dir)
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := fs.ReadLink(root, p)
			if err != nil {
				return err
			}
			m[p] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
			return nil
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		m[p] = &fstest.MapFile{Data: b}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// FuzzProcs replaces one process's files (pid 803 of the Pi fixture, which
// has every optional file) and the system-wide ones with fuzzed contents,
// then reads the tree as the process tools do: the list, one process's
// detail, its identity (what a signal is checked against) and the socket
// owners. A kernel gives well-formed files, but a process controls its own
// comm and cmdline and the parser must hold whatever they say: no panic,
// and CPU percentages within 0..100 per CPU.
func FuzzProcs(f *testing.F) {
	base := treeFS(f, "testdata/pi/t0")
	prev, err := Read(base, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stat, status, cmdline, environ, io, smaps, fdinfo, procStat, meminfo, uptime, passwd []byte) {
		root := fstest.MapFS{}
		for k, v := range base {
			root[k] = v
		}
		for name, data := range map[string][]byte{
			"proc/803/stat": stat, "proc/803/status": status, "proc/803/cmdline": cmdline,
			"proc/803/environ": environ, "proc/803/io": io, "proc/803/smaps": smaps, "proc/803/fdinfo/3": fdinfo,
			"proc/stat": procStat, "proc/meminfo": meminfo, "proc/uptime": uptime, "etc/passwd": passwd,
		} {
			if len(data) > 0 { // empty keeps the fixture's file
				root[name] = &fstest.MapFile{Data: data}
			}
		}
		if s, err := Read(root, Options{}); err == nil {
			for i := 1; i < len(s.Procs); i++ {
				if s.Procs[i-1].PID >= s.Procs[i].PID {
					t.Fatalf("processes not sorted by pid: %d then %d", s.Procs[i-1].PID, s.Procs[i].PID)
				}
			}
			for pid, pct := range CPUPercent(prev, s, Options{}) {
				if !(pct >= 0) || math.IsInf(pct, 0) || (s.CPUs > 0 && pct > 100*float64(s.CPUs)) {
					t.Fatalf("pid %d: cpu %v%% with %d CPUs", pid, pct, s.CPUs)
				}
			}
		}
		if d, err := ReadDetail(root, 803, Options{}); err == nil && d.PID != 803 {
			t.Fatalf("detail of pid 803 names pid %d", d.PID)
		}
		if id, err := ReadIdentity(root, 803); err == nil && id.PID != 803 {
			t.Fatalf("identity of pid 803 names pid %d", id.PID)
		}
		_, _ = InodeOwners(root)
	})
}

// FuzzSecret runs the redaction used on environments and command lines
// over any key and value: it must not panic, and a secret-looking key's
// value is always replaced whole.
func FuzzSecret(f *testing.F) {
	f.Add("DATABASE_URL", "postgres://app:hunter2@db.local/app")
	f.Add("API_TOKEN", "abc123")
	f.Add("PATH", "/usr/bin:/bin")
	f.Add("ARGS", "--password=hunter2 --user app")
	f.Fuzz(func(t *testing.T, key, value string) {
		out := RedactValue(key, value)
		if Secret(key) && out != Redacted {
			t.Fatalf("secret key %q: value %q shown as %q", key, value, out)
		}
	})
}

package procs

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeClock is a settable clock: the sim's readings are a function of it.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestSim(t *testing.T) (*Sim, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Unix(1_750_000_000, 0)}
	s, err := NewSim(filepath.Join(t.TempDir(), "procs.json"), SimOptions{CPUs: 4, MemTotal: 4 << 30, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func byName(s Snapshot, name string) *Proc {
	for i := range s.Procs {
		if s.Procs[i].Name == name {
			return &s.Procs[i]
		}
	}
	return nil
}

func TestSimReadsThroughTheParsers(t *testing.T) {
	s, clk := newTestSim(t)
	o := Options{ClockTick: 100, PageSize: 4096}
	a, err := Read(s.FS(), o)
	if err != nil {
		t.Fatal(err)
	}
	if a.CPUs != 4 || a.MemTotal != 4<<30 || math.Abs(a.Uptime-3600) > 1 {
		t.Fatalf("cpus %d, memory %d, uptime %.1f; want 4, 4 GiB, an hour", a.CPUs, a.MemTotal, a.Uptime)
	}
	init := a.Procs[0]
	if init.PID != 1 || init.Name != "systemd" || init.Username != "root" || init.Exe != "" {
		t.Errorf("pid 1 = %+v; want systemd of root, exe hidden from the agent's user", init)
	}
	if k := byName(a, "kthreadd"); k == nil || !k.Kernel {
		t.Errorf("kthreadd = %+v; want a kernel thread", k)
	}
	agent := byName(a, "raspi-mcp")
	if agent == nil || agent.Username != "raspi-mcp" || agent.Exe != "/usr/local/bin/raspi-mcp" || agent.Cwd != "/var/lib/raspi-mcp" {
		t.Errorf("agent = %+v; want its own exe and cwd visible", agent)
	}
	clk.t = clk.t.Add(2 * time.Second)
	b, err := Read(s.FS(), o)
	if err != nil {
		t.Fatal(err)
	}
	cpu := CPUPercent(a, b, o)
	ff := byName(b, "ffmpeg")
	if ff == nil || ff.State != "running" || ff.Nice != 10 || ff.Username != "pi" {
		t.Fatalf("ffmpeg = %+v; want pi's running job at nice 10", ff)
	}
	if got := cpu[ff.PID]; math.Abs(got-87) > 1 {
		t.Errorf("ffmpeg uses %.1f%% of a core; want 87", got)
	}
	if got := cpu[byName(b, "sshd").PID]; got != 0 {
		t.Errorf("the idle sshd uses %.1f%%; want 0", got)
	}

	d, err := ReadDetail(s.FS(), agent.PID, o)
	if err != nil {
		t.Fatal(err)
	}
	if d.Environment["USER"] != "raspi-mcp" || len(d.OpenFiles) == 0 || len(d.SocketInodes) == 0 || len(d.Maps) == 0 || d.IO == nil || len(d.Hidden) != 0 {
		t.Errorf("agent detail = %+v; want environment, files, sockets, maps and io", d)
	}
	d, err = ReadDetail(s.FS(), byName(b, "python3").PID, o)
	if err != nil {
		t.Fatal(err)
	}
	if d.Environment != nil || len(d.OpenFiles) != 0 || !slices.ContainsFunc(d.Hidden, func(h string) bool { return strings.HasPrefix(h, "environment") }) {
		t.Errorf("pi's logger detail = %+v; want its private parts hidden from the agent's user", d)
	}
	owners, err := InodeOwners(s.FS())
	if err != nil {
		t.Fatal(err)
	}
	if owners[simInodeAgentListen] != agent.PID || owners[simInodeSSHListen4] != 0 {
		t.Errorf("owners = %v; want only the agent's own sockets", owners)
	}
	if uid, ok := UserID(s.FS(), "pi"); !ok || uid != 1000 {
		t.Errorf("UserID(pi) = %d, %v", uid, ok)
	}
	if _, err := ReadIdentity(s.FS(), 4242); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an absent pid: %v; want not exist", err)
	}
}

func TestSimSignals(t *testing.T) {
	s, clk := newTestSim(t)
	o := Options{ClockTick: 100, PageSize: 4096}
	id := func(name string) Identity {
		t.Helper()
		snap, err := Read(s.FS(), o)
		if err != nil {
			t.Fatal(err)
		}
		p := byName(snap, name)
		if p == nil {
			t.Fatalf("no %s", name)
		}
		i, err := ReadIdentity(s.FS(), p.PID)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	ff := id("ffmpeg")
	// A stale start time or an unknown signal changes nothing.
	if err := s.Signal(ff.PID, ff.StartTicks+1, "TERM"); !errors.Is(err, ErrReused) {
		t.Errorf("stale start: %v; want ErrReused", err)
	}
	if err := s.Signal(ff.PID, ff.StartTicks, "PWR"); err == nil {
		t.Error("an unsimulated signal was accepted")
	}
	if err := s.Signal(99999, 0, "TERM"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("absent pid: %v", err)
	}
	if now := id("ffmpeg"); now.State != "running" {
		t.Fatalf("after refusals ffmpeg is %s", now.State)
	}

	// STOP freezes the CPU time, CONT resumes it.
	if err := s.Signal(ff.PID, ff.StartTicks, "STOP"); err != nil {
		t.Fatal(err)
	}
	a, _ := Read(s.FS(), o)
	clk.t = clk.t.Add(5 * time.Second)
	b, _ := Read(s.FS(), o)
	if p := byName(b, "ffmpeg"); p.State != "stopped" || CPUPercent(a, b, o)[p.PID] != 0 {
		t.Errorf("stopped ffmpeg: %s at %.1f%%", p.State, CPUPercent(a, b, o)[p.PID])
	}
	if err := s.Signal(ff.PID, ff.StartTicks, "CONT"); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(5 * time.Second)
	c, _ := Read(s.FS(), o)
	if p := byName(c, "ffmpeg"); p.State != "running" || CPUPercent(b, c, o)[p.PID] < 80 {
		t.Errorf("continued ffmpeg: %s at %.1f%%", p.State, CPUPercent(b, c, o)[p.PID])
	}

	// HUP is caught by a daemon and ends a plain program; TERM ends either.
	nginx := id("nginx")
	if err := s.Signal(nginx.PID, nginx.StartTicks, "HUP"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentity(s.FS(), nginx.PID); err != nil {
		t.Errorf("nginx after HUP: %v", err)
	}
	bash := id("bash")
	if err := s.Signal(ff.PID, ff.StartTicks, "TERM"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentity(s.FS(), ff.PID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ffmpeg after TERM: %v; want gone", err)
	}
	py := id("python3")
	if err := s.Signal(py.PID, py.StartTicks, "USR1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentity(s.FS(), py.PID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the logger after USR1: %v; want ended (it does not catch it)", err)
	}
	if _, err := ReadIdentity(s.FS(), bash.PID); err != nil {
		t.Errorf("bash, ffmpeg's parent, is gone too: %v", err)
	}
	if !s.IsSelf(id("raspi-mcp").PID) || s.IsSelf(bash.PID) {
		t.Error("IsSelf does not single out raspi-mcp")
	}
	// A second Sim on the same file (the other process) sees the change.
	s2, err := NewSim(s.file.Path, SimOptions{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIdentity(s2.FS(), ff.PID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a second Sim on the file still sees ffmpeg: %v", err)
	}
}

func TestSimRefusesABrokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "procs.json")
	if err := os.WriteFile(path, []byte(`{"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSim(path, SimOptions{}); err == nil {
		t.Error("a file without cpus, memory and boot was accepted")
	}
	if err := os.WriteFile(path, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSim(path, SimOptions{}); err == nil {
		t.Error("a file that is not JSON was accepted")
	}
	if b, _ := os.ReadFile(path); string(b) != "not json" {
		t.Error("the broken file was overwritten")
	}
}

func BenchmarkSimRead(b *testing.B) {
	s, err := NewSim(filepath.Join(b.TempDir(), "procs.json"), SimOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("live", func(b *testing.B) {
		for b.Loop() {
			if _, err := Read(s.FS(), Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			fsys, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Read(fsys, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fakeSystemd is a settable list of running units that records exits.
type fakeSystemd struct {
	svcs   []SimService
	exited []string
}

func (f *fakeSystemd) Services() ([]SimService, error) { return slices.Clone(f.svcs), nil }
func (f *fakeSystemd) MainExited(unit string, pid int, sig string) error {
	f.exited = append(f.exited, fmt.Sprintf("%s %d %s", unit, pid, sig))
	return nil
}

func TestSimServicesFollowTheirUnits(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_750_000_000, 0)}
	sd := &fakeSystemd{}
	s, err := NewSim(filepath.Join(t.TempDir(), "procs.json"), SimOptions{Now: clk.now, Systemd: sd})
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := s.BootTime()
	sd.svcs = []SimService{
		{Unit: "nginx.service", PID: 453, Since: boot.Add(4200 * time.Millisecond)},
		{Unit: "ssh.service", PID: 496, Since: boot.Add(5400 * time.Millisecond)},
		{Unit: "raspi-mcp.service", PID: 486}, {Unit: "raspi-mcp-helper.service", PID: 469},
	}
	pids := func() map[int]string {
		t.Helper()
		fsys, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := Read(fsys, Options{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]string{}
		for _, p := range snap.Procs {
			out[p.PID] = p.Name + "/" + p.Username
		}
		return out
	}
	got := pids()
	if got[453] != "nginx/root" || got[454] != "nginx/www-data" || got[496] != "sshd/root" {
		t.Fatalf("running units' processes: %v", got)
	}
	for _, pid := range []int{412, 429, 444} { // dbus, avahi, bluetooth: not running
		if _, ok := got[pid]; ok {
			t.Errorf("pid %d of a unit that does not run is listed: %s", pid, got[pid])
		}
	}
	if got[602] != "python3/pi" || got[536] != "sshd/root" {
		t.Errorf("processes of no unit: %v", got)
	}

	// nginx restarted at pid 520, motion started: the table follows.
	clk.t = clk.t.Add(time.Minute)
	sd.svcs[0] = SimService{Unit: "nginx.service", PID: 520, Since: clk.t}
	sd.svcs = append(sd.svcs, SimService{Unit: "motion.service", PID: 531, Since: clk.t, Exe: "/usr/bin/motion", Args: []string{"/usr/bin/motion", "-n"}, User: "motion", MemoryBytes: 30 << 20})
	got = pids()
	if _, ok := got[453]; ok || got[520] != "nginx/root" || got[521] != "nginx/www-data" || got[531] != "motion/motion" {
		t.Fatalf("after a restart and a start: %v", got)
	}
	id, err := ReadIdentity(s.FS(), 521)
	if err != nil || id.PPID != 520 || id.StartTicks != uint64((clk.t.Unix()-boot.Unix())*100) {
		t.Fatalf("the new worker: %+v %v", id, err)
	}

	// A worker's exit is the unit's own business; TERM to the master ends
	// the unit's processes and systemd hears of it.
	if err := s.Signal(521, id.StartTicks, "TERM"); err != nil {
		t.Fatal(err)
	}
	if got = pids(); got[521] != "" || len(sd.exited) != 0 {
		t.Fatalf("after TERM to the worker: %v, systemd heard %v", got, sd.exited)
	}
	master, _ := ReadIdentity(s.FS(), 520)
	if err := s.Signal(520, master.StartTicks, "TERM"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sd.exited, []string{"nginx.service 520 TERM"}) {
		t.Fatalf("systemd heard %v", sd.exited)
	}
	sd.svcs = slices.DeleteFunc(sd.svcs, func(v SimService) bool { return v.Unit == "nginx.service" })
	if got = pids(); got[520] != "" || got[521] != "" || got[531] != "motion/motion" {
		t.Fatalf("after TERM: %v", got)
	}
}

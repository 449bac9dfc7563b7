package units

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/journal"
)

func newSim(t *testing.T) (*Sim, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "units.json")
	s, err := NewSim(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func states(t *testing.T, u Units) map[string]Unit {
	t.Helper()
	list, err := u.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Unit{}
	for _, x := range list {
		out[x.Name] = x
	}
	return out
}

func TestSimSeed(t *testing.T) {
	s, _ := newSim(t)
	ctx := context.Background()
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(list, func(a, b Unit) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("List is not sorted")
	}
	want := map[string][3]string{ // active, sub, file state
		"nginx.service":            {"active", "running", "enabled"},
		"motion.service":           {"inactive", "dead", "disabled"},
		"ssh.service":              {"active", "running", "enabled"},
		"dbus.service":             {"active", "running", "static"},
		"bluetooth.service":        {"active", "running", "enabled"},
		"avahi-daemon.service":     {"active", "running", "enabled"},
		"backup.service":           {"failed", "failed", "enabled"},
		"raspi-mcp.service":        {"active", "running", "enabled"},
		"raspi-mcp-helper.service": {"active", "running", "enabled"},
	}
	got := states(t, s)
	if len(got) != len(want) {
		t.Errorf("%d units, want %d", len(got), len(want))
	}
	for name, w := range want {
		u := got[name]
		if [3]string{u.ActiveState, u.SubState, u.UnitFileState} != w || u.LoadState != "loaded" || u.Description == "" {
			t.Errorf("%s: %+v; want %v", name, u, w)
		}
		if active := u.ActiveState == "active"; active != (u.MainPID > 0 && u.MemoryBytes > 0 && u.CPUNanos > 0 && !u.ActiveSince.IsZero()) {
			t.Errorf("%s: PID, memory, CPU and ActiveSince only while active: %+v", name, u)
		}
	}
	if !got["nginx.service"].CanReload || got["motion.service"].CanReload {
		t.Error("CanReload follows ExecReload=")
	}

	d, err := s.Get(ctx, "dbus")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.RequiredBy, []string{"avahi-daemon.service", "bluetooth.service"}) || d.FragmentPath != "/lib/systemd/system/dbus.service" ||
		len(d.ExecStart) != 1 || !strings.HasPrefix(d.ExecStart[0], "/usr/bin/dbus-daemon --system") || d.Type != "notify" || d.Restart != "no" {
		t.Errorf("dbus detail %+v", d)
	}
	deps, err := s.ActiveDependents(ctx, "dbus.service")
	if err != nil || !slices.Equal(deps, []string{"avahi-daemon.service", "bluetooth.service"}) {
		t.Errorf("ActiveDependents(dbus) = %q, %v", deps, err)
	}
	b, _ := s.Get(ctx, "backup")
	if b.Environment["RESTIC_PASSWORD"] != "correct horse battery staple" || b.User != "pi" || b.WorkingDirectory != "/mnt/usb-backup" {
		t.Errorf("backup detail %+v", b)
	}
	n, _ := s.Get(ctx, "nginx")
	if !slices.Contains(n.WantedBy, "multi-user.target") || len(n.ExecStop) != 1 || !strings.HasPrefix(n.ExecStop[0], "-/sbin/start-stop-daemon") {
		t.Errorf("nginx detail %+v", n)
	}

	// The boot is in the journal: systemd's lines and the failure.
	res, err := s.Journal().Query(ctx, journal.Query{Units: []string{"backup"}, Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := messages(res); !slices.Equal(msgs, []string{
		"backup.service: Changing to the requested working directory failed: No such file or directory",
		"Failed to start backup.service - Nightly backup to the USB disk.",
	}) {
		t.Errorf("backup errors in the journal: %q", msgs)
	}
	res, _ = s.Journal().Query(ctx, journal.Query{Priority: -1, Grep: "accepted publickey"})
	if len(res.Entries) != 1 || res.Entries[0].Unit != "ssh.service" || res.Entries[0].Identifier != "sshd" {
		t.Errorf("ssh login: %+v", res.Entries)
	}
}

func messages(r journal.Result) []string {
	var out []string
	for _, e := range r.Entries {
		out = append(out, e.Message)
	}
	return out
}

func TestSimControl(t *testing.T) {
	s, _ := newSim(t)
	ctx := context.Background()
	t0 := time.Now().Add(time.Hour) // after the seeded journal
	s.now = func() time.Time { return t0 }

	res, err := s.Control(ctx, "motion", Start)
	if err != nil || res.Job != "done" || res.Before.ActiveState != "inactive" || res.After.ActiveState != "active" ||
		res.After.MainPID == 0 || !res.After.ActiveSince.Equal(t0) {
		t.Fatalf("start motion: %+v, %v", res, err)
	}
	jr, _ := s.Journal().Query(ctx, journal.Query{Units: []string{"motion.service"}, Priority: -1, Since: t0})
	if msgs := messages(jr); !slices.Equal(msgs, []string{
		"Starting motion.service - Motion detection video capture daemon...",
		"[0:motion] [NTC] [ALL] motion_startup: Motion 4.5.1 Started",
		"Started motion.service - Motion detection video capture daemon.",
	}) {
		t.Errorf("journal after start: %q", msgs)
	}
	if res, err := s.Control(ctx, "motion", Start); err != nil || res.Job != "done" || res.After.MainPID != res.Before.MainPID {
		t.Errorf("starting an active unit changes nothing: %+v, %v", res, err)
	}

	// Stopping dbus stops the units that Require it.
	res, err = s.Control(ctx, "dbus.service", Stop)
	if err != nil || res.Job != "done" || res.After.ActiveState != "inactive" || res.After.MainPID != 0 {
		t.Fatalf("stop dbus: %+v, %v", res, err)
	}
	st := states(t, s)
	for _, n := range []string{"bluetooth.service", "avahi-daemon.service"} {
		if st[n].ActiveState != "inactive" {
			t.Errorf("%s is %s after dbus stopped", n, st[n].ActiveState)
		}
	}
	// Starting bluetooth starts dbus first.
	if res, err := s.Control(ctx, "bluetooth", Start); err != nil || res.Job != "done" {
		t.Fatalf("start bluetooth: %+v, %v", res, err)
	}
	st = states(t, s)
	if st["dbus.service"].ActiveState != "active" || st["avahi-daemon.service"].ActiveState != "inactive" {
		t.Errorf("after starting bluetooth: dbus %s, avahi %s", st["dbus.service"].ActiveState, st["avahi-daemon.service"].ActiveState)
	}
	// Restarting dbus restarts bluetooth (which Requires it) with a new PID.
	pid := st["bluetooth.service"].MainPID
	if res, err := s.Control(ctx, "dbus", Restart); err != nil || res.Job != "done" || res.After.MainPID == res.Before.MainPID {
		t.Fatalf("restart dbus: %+v, %v", res, err)
	}
	if st = states(t, s); st["bluetooth.service"].ActiveState != "active" || st["bluetooth.service"].MainPID == pid {
		t.Errorf("bluetooth after dbus restart: %+v", st["bluetooth.service"])
	}

	// A unit whose working directory is missing fails as systemd does.
	res, err = s.Control(ctx, "backup", Start)
	if err != nil || res.Job != "failed" || res.After.ActiveState != "failed" {
		t.Fatalf("start backup: %+v, %v", res, err)
	}
	jr, _ = s.Journal().Query(ctx, journal.Query{Units: []string{"backup.service"}, Priority: 5, Since: t0})
	if msgs := messages(jr); len(msgs) != 4 || msgs[1] != "backup.service: Main process exited, code=exited, status=200/CHDIR" {
		t.Errorf("backup failure lines: %q", msgs)
	}

	// Reload: nginx can, motion cannot, an inactive unit cannot.
	if res, err := s.Control(ctx, "nginx", Reload); err != nil || res.Job != "done" {
		t.Errorf("reload nginx: %+v, %v", res, err)
	}
	if _, err := s.Control(ctx, "motion", Reload); err == nil || !strings.Contains(err.Error(), "not applicable") {
		t.Errorf("reload motion: %v", err)
	}
	s.Control(ctx, "nginx", Stop)
	if _, err := s.Control(ctx, "nginx", Reload); err == nil || !strings.Contains(err.Error(), "not active") {
		t.Errorf("reload inactive nginx: %v", err)
	}

	if _, err := s.Control(ctx, "nosuch", Start); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nosuch.service"`) {
		t.Errorf("unknown unit: %v", err)
	}
	if _, err := s.Control(ctx, "-x", Start); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := s.Control(ctx, "nginx", "isolate"); err == nil {
		t.Error("unknown action accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Control(cctx, "nginx", Start); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestSimSetEnabledAndValidate(t *testing.T) {
	s, _ := newSim(t)
	ctx := context.Background()
	res, err := s.SetEnabled(ctx, "motion", true)
	if err != nil || res.Before != "disabled" || res.After != "enabled" ||
		!slices.Equal(res.Changes, []Change{{"symlink", "/etc/systemd/system/multi-user.target.wants/motion.service", "/lib/systemd/system/motion.service"}}) {
		t.Fatalf("enable motion: %+v, %v", res, err)
	}
	if res, err := s.SetEnabled(ctx, "motion", true); err != nil || len(res.Changes) != 0 || res.After != "enabled" {
		t.Errorf("enable twice: %+v, %v", res, err)
	}
	res, err = s.SetEnabled(ctx, "ssh", false)
	if err != nil || res.After != "disabled" || len(res.Changes) != 2 || res.Changes[1] != (Change{Type: "unlink", File: "/etc/systemd/system/sshd.service"}) {
		t.Errorf("disable ssh (with its alias): %+v, %v", res, err)
	}
	if res, err := s.SetEnabled(ctx, "dbus", true); !errors.Is(err, ErrStatic) || res.After != "static" {
		t.Errorf("enable static dbus: %+v, %v", res, err)
	}
	if res, err := s.SetEnabled(ctx, "dbus", false); err != nil || res.After != "static" {
		t.Errorf("disable static dbus: %+v, %v", res, err)
	}
	if _, err := s.SetEnabled(ctx, "gone", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("enable unknown: %v", err)
	}

	v, err := s.Validate(ctx, "backup")
	if err != nil || v.Valid || !v.CanEnable || !slices.Equal(v.Errors, []string{"WorkingDirectory=/mnt/usb-backup does not exist"}) ||
		v.FragmentPath != "/etc/systemd/system/backup.service" {
		t.Errorf("validate backup: %+v, %v", v, err)
	}
	v, err = s.Validate(ctx, "nginx")
	if err != nil || !v.Valid || !v.CanEnable || len(v.Warnings) != 1 || !strings.HasPrefix(v.Warnings[0], "no Restart=") {
		t.Errorf("validate nginx: %+v, %v", v, err)
	}
	v, _ = s.Validate(ctx, "dbus")
	if !v.Valid || v.CanEnable {
		t.Errorf("validate dbus (static): %+v", v)
	}
	for _, n := range []string{"motion", "ssh", "raspi-mcp", "raspi-mcp-helper", "avahi-daemon", "bluetooth"} {
		if v, err := s.Validate(ctx, n); err != nil || !v.Valid {
			t.Errorf("validate %s: %+v, %v", n, v, err)
		}
	}
}

func TestSimSharedFile(t *testing.T) {
	agent, path := newSim(t)
	helper, err := NewSim(path) // the second process: the file exists, nothing is reseeded
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := helper.Control(ctx, "motion", Start); err != nil {
		t.Fatal(err)
	}
	if _, err := helper.SetEnabled(ctx, "motion", true); err != nil {
		t.Fatal(err)
	}
	d, err := agent.Get(ctx, "motion")
	if err != nil || d.ActiveState != "active" || d.UnitFileState != "enabled" {
		t.Errorf("the agent's Sim does not see the helper's change: %+v, %v", d.Unit, err)
	}
	res, _ := agent.Journal().Query(ctx, journal.Query{Units: []string{"motion"}, Priority: -1, Grep: "started motion"})
	if len(res.Entries) != 1 {
		t.Errorf("the agent's journal misses the helper's start: %+v", res)
	}
	again, err := NewSim(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := states(t, again); st["motion.service"].ActiveState != "active" {
		t.Error("NewSim on an existing file reseeded it")
	}
}

func TestSimConcurrent(t *testing.T) {
	a, path := newSim(t)
	b, err := NewSim(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for j := range 10 {
				var err error
				switch (i + j) % 5 {
				case 0:
					_, err = s.Control(ctx, "motion", Restart)
				case 1:
					_, err = s.SetEnabled(ctx, "motion", j%2 == 0)
				case 2:
					_, err = s.List(ctx)
				case 3:
					_, err = s.Journal().Query(ctx, journal.Query{Priority: -1, Limit: 50})
				case 4:
					_, err = s.Control(ctx, "dbus", Restart)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d op %d: %w", i, j, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every restart went through: the file parses, and the journal has
	// a Stopping/Started pair for each motion restart after the first start.
	res, err := a.Journal().Query(ctx, journal.Query{Units: []string{"motion"}, Priority: -1, Grep: "Started motion", Limit: 1000, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Entries) != 16 { // 8 goroutines x 10 ops, (i+j)%5 == 0 twice each
		t.Errorf("%d motion starts in the journal, want 16", len(res.Entries))
	}
	if st := states(t, b); st["bluetooth.service"].ActiveState != "active" || st["dbus.service"].ActiveState != "active" {
		t.Errorf("after concurrent restarts: %+v", st)
	}
}

func TestSimFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	if _, err := NewSim(bad); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("corrupt file: %v", err)
	}
	if _, err := NewSim(filepath.Join(dir, "no", "such", "dir.json")); err == nil || !strings.HasPrefix(err.Error(), "units: sim: ") {
		t.Errorf("missing directory: %v", err)
	}
	// An empty file (created by touch, or by an install script) is seeded.
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, nil, 0o644)
	s, err := NewSim(empty)
	if err != nil {
		t.Fatal(err)
	}
	if len(states(t, s)) != len(seedUnits()) {
		t.Error("empty file not seeded")
	}
}

func TestSimReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write a read-only file")
	}
	s, path := newSim(t)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	ro, err := NewSim(path)
	if err != nil {
		t.Fatalf("a read-only state file: %v", err)
	}
	ctx := context.Background()
	if _, err := ro.List(ctx); err != nil {
		t.Error(err)
	}
	if _, err := ro.Control(ctx, "motion", Start); err == nil {
		t.Error("a change through a read-only file succeeded")
	}
	_ = s
}

func TestSimJournalCap(t *testing.T) {
	s, path := newSim(t)
	ctx := context.Background()
	// Fill the journal past the cap, then make one change.
	err := s.update(func(st *simState) error {
		for i := range 2 * simJournalMax {
			st.log(s.now(), "x.service", "x", 1, 6, fmt.Sprint("line ", i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Control(ctx, "motion", Start); err != nil {
		t.Fatal(err)
	}
	var n int
	s.view(func(st *simState) error { n = len(st.Journal); return nil })
	if n != simJournalMax {
		t.Errorf("journal has %d entries, want the cap %d", n, simJournalMax)
	}
	res, _ := s.Journal().Query(ctx, journal.Query{Priority: -1, Limit: 1})
	if len(res.Entries) != 1 || res.Entries[0].Message != "Started motion.service - Motion detection video capture daemon." {
		t.Errorf("newest entry %+v", res.Entries)
	}
	info, _ := os.Stat(path)
	t.Logf("state file with %d journal entries: %d bytes", n, info.Size())
}

// BenchmarkSimRestart is the cost of one change with a full journal: the
// file is read, decoded, changed, encoded and written under the lock.
func BenchmarkSimRestart(b *testing.B) {
	path := filepath.Join(b.TempDir(), "units.json")
	s, err := NewSim(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for range simJournalMax / 7 {
		s.Control(ctx, "motion", Restart)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Control(ctx, "motion", Restart); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSimFS(t *testing.T) {
	fsys := simFS()
	if info, err := fs.Stat(fsys, "usr/sbin/nginx"); err != nil || !executable(info) || info.Name() != "nginx" {
		t.Errorf("nginx: %v, %v", info, err)
	}
	if info, err := fs.Stat(fsys, "home/pi"); err != nil || !info.IsDir() {
		t.Errorf("home/pi: %v, %v", info, err)
	}
	if _, err := fs.Stat(fsys, "mnt/usb-backup"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("mnt/usb-backup: %v", err)
	}
	if _, err := fs.ReadFile(fsys, "home/pi"); err == nil {
		t.Error("read a directory")
	}
	if _, err := fsys.Open("/etc/passwd"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("absolute path: %v", err)
	}
	if ok, err := inDatabase(fsys, "etc/passwd", "raspi-mcp"); !ok || err != nil {
		t.Errorf("raspi-mcp user: %v, %v", ok, err)
	}
}

//go:build linux

package units

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// A fake systemd on a private dbus-daemon: enough of the Manager and the
// unit objects for List, counting every call it answers, so a test can say
// how many D-Bus calls a listing costs.

type fakeUnit struct {
	active, sub, fileState, preset string
	canReload                      bool
	since, pid, restarts           uint64
}

type fakeSystemd struct {
	mu        sync.Mutex
	units     map[string]*fakeUnit
	loadStamp uint64
	unitPath  []string       // the manager's UnitPath; nil answers no such property
	calls     map[string]int // "GetAll Unit", "Get Service.MainPID", "ListUnitsByPatterns", ...
}

func (f *fakeSystemd) count(call string) {
	f.mu.Lock()
	f.calls[call]++
	f.mu.Unlock()
}

// take returns the calls counted since the last take and resets them.
func (f *fakeSystemd) take() (total int, calls map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, f.calls = f.calls, map[string]int{}
	for _, n := range calls {
		total += n
	}
	return total, calls
}

type fakeStatus struct {
	Name, Description, LoadState, ActiveState, SubState, Followed string
	Path                                                          godbus.ObjectPath
	JobID                                                         uint32
	JobType                                                       string
	JobPath                                                       godbus.ObjectPath
}

type fakeFile struct{ Path, Type string }

func (f *fakeSystemd) ListUnitsByPatterns(states, patterns []string) ([]fakeStatus, *godbus.Error) {
	f.count("ListUnitsByPatterns")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeStatus
	for name, u := range f.units {
		out = append(out, fakeStatus{Name: name, Description: "fake " + name, LoadState: "loaded", ActiveState: u.active, SubState: u.sub,
			Path: godbus.ObjectPath("/org/freedesktop/systemd1/unit/" + sd.PathBusEscape(name)), JobPath: "/"})
	}
	return out, nil
}

func (f *fakeSystemd) ListUnitFilesByPatterns(states, patterns []string) ([]fakeFile, *godbus.Error) {
	f.count("ListUnitFilesByPatterns")
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeFile
	for name, u := range f.units {
		out = append(out, fakeFile{Path: "/etc/systemd/system/" + name, Type: u.fileState})
	}
	return out, nil
}

// unitAt is the unit whose object path msg was sent to ("" the manager).
func (f *fakeSystemd) unitAt(msg godbus.Message) (*fakeUnit, string) {
	p, _ := msg.Headers[godbus.FieldPath].Value().(godbus.ObjectPath)
	for name, u := range f.units {
		if string(p) == "/org/freedesktop/systemd1/unit/"+sd.PathBusEscape(name) {
			return u, name
		}
	}
	return nil, ""
}

func (f *fakeSystemd) props(u *fakeUnit, name, iface string) map[string]godbus.Variant {
	v := godbus.MakeVariant
	if iface == "org.freedesktop.systemd1.Service" {
		return map[string]godbus.Variant{"MainPID": v(uint32(u.pid)), "MemoryCurrent": v(uint64(1 << 20)),
			"CPUUsageNSec": v(uint64(5e9)), "NRestarts": v(uint32(u.restarts))}
	}
	return map[string]godbus.Variant{"Id": v(name), "Description": v("fake " + name), "LoadState": v("loaded"),
		"ActiveState": v(u.active), "SubState": v(u.sub), "UnitFileState": v(u.fileState), "UnitFilePreset": v(u.preset),
		"CanStart": v(true), "CanStop": v(true), "CanReload": v(u.canReload), "ActiveEnterTimestamp": v(u.since),
		"Requires": v([]string{"a-long.service", "list-of.service", "dependencies.service"})}
}

func (f *fakeSystemd) Get(msg godbus.Message, iface, prop string) (godbus.Variant, *godbus.Error) {
	f.count("Get " + strings.TrimPrefix(iface, "org.freedesktop.systemd1.") + "." + prop)
	f.mu.Lock()
	defer f.mu.Unlock()
	u, name := f.unitAt(msg)
	if u == nil {
		if prop == "UnitsLoadTimestampMonotonic" {
			return godbus.MakeVariant(f.loadStamp), nil
		}
		if prop == "UnitPath" && f.unitPath != nil {
			return godbus.MakeVariant(f.unitPath), nil
		}
		return godbus.Variant{}, godbus.MakeFailedError(fmt.Errorf("no property %s", prop))
	}
	v, ok := f.props(u, name, iface)[prop]
	if !ok {
		return godbus.Variant{}, godbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, prop))
	}
	return v, nil
}

func (f *fakeSystemd) GetAll(msg godbus.Message, iface string) (map[string]godbus.Variant, *godbus.Error) {
	f.count("GetAll " + strings.TrimPrefix(iface, "org.freedesktop.systemd1."))
	f.mu.Lock()
	defer f.mu.Unlock()
	u, name := f.unitAt(msg)
	if u == nil {
		return nil, godbus.MakeFailedError(fmt.Errorf("no unit"))
	}
	return f.props(u, name, iface), nil
}

// startFakeSystemd runs a private dbus-daemon with f on it, and returns a
// DBus talking to it.
func startFakeSystemd(t *testing.T, f *fakeSystemd) *DBus {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("no dbus-daemon on this machine")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=`+filepath.Join(dir, "bus")+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy></busconfig>`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon address: %v", err)
	}
	addr = strings.TrimSpace(addr)
	dial := func() (*godbus.Conn, error) {
		c, err := godbus.Dial(addr)
		if err != nil {
			return nil, err
		}
		if err := c.Auth(nil); err != nil {
			c.Close()
			return nil, err
		}
		if err := c.Hello(); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	srv, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const root = "/org/freedesktop/systemd1"
	if err := srv.Export(f, root, "org.freedesktop.systemd1.Manager"); err != nil {
		t.Fatal(err)
	}
	if err := srv.ExportSubtree(f, root, "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	if reply, err := srv.RequestName("org.freedesktop.systemd1", godbus.NameFlagDoNotQueue); err != nil || reply != godbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own org.freedesktop.systemd1: %v, %v", reply, err)
	}
	d := &DBus{Root: fstest.MapFS{}, Analyze: "-", dial: func(context.Context) (*sd.Conn, error) { return sd.NewConnection(dial) }}
	d.life, d.cancel = context.WithCancel(context.Background())
	t.Cleanup(d.Close)
	return d
}

// A listing reads each loaded unit's Unit properties once per load of the
// unit files; after that, an inactive unit costs no call at all and an
// active one only the five properties that change while it runs. A
// daemon-reload (a new UnitsLoadTimestamp) reads them all again, and
// enabling a unit shows at once.
func TestListCallsPerUnit(t *testing.T) {
	f := &fakeSystemd{loadStamp: 1000, calls: map[string]int{}, units: map[string]*fakeUnit{}}
	const active, inactive = 10, 20
	for i := range active {
		f.units[fmt.Sprintf("run%02d.service", i)] = &fakeUnit{active: "active", sub: "running", fileState: "enabled", preset: "enabled",
			canReload: true, since: 1_700_000_000_000_000, pid: uint64(100 + i), restarts: 2}
	}
	for i := range inactive {
		f.units[fmt.Sprintf("idle%02d.service", i)] = &fakeUnit{active: "inactive", sub: "dead", fileState: "disabled", preset: "disabled"}
	}
	// The unit directories, long unchanged; /run/systemd/system does not
	// exist.
	f.unitPath = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system"}
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dirs := fstest.MapFS{
		"etc/systemd/system":                         {Mode: fs.ModeDir | 0o755, ModTime: old},
		"etc/systemd/system/multi-user.target.wants": {Mode: fs.ModeDir | 0o755, ModTime: old},
		"lib/systemd/system":                         {Mode: fs.ModeDir | 0o755, ModTime: old},
		"lib/systemd/system/idle00.service":          {Data: []byte("[Service]\nExecStart=/bin/true\n"), ModTime: old},
	}
	d := startFakeSystemd(t, f)
	d.Root = dirs
	ctx := context.Background()
	f.take()

	first, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n1, calls1 := f.take()
	// 2 lists + the load stamp + the unit path + GetAll per unit + 4
	// Service reads per active unit.
	if want := 4 + active + inactive + 4*active; n1 != want || calls1["GetAll Unit"] != active+inactive || calls1["Get Manager.UnitPath"] != 1 {
		t.Fatalf("first listing made %d calls, want %d: %v", n1, want, calls1)
	}

	// No unit directory changed: the unit files are not listed again.
	second, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n2, calls2 := f.take()
	if want := 2 + 5*active; n2 != want || calls2["GetAll Unit"] != 0 || calls2["Get Unit.ActiveEnterTimestamp"] != active ||
		calls2["ListUnitFilesByPatterns"] != 0 {
		t.Fatalf("second listing made %d calls, want %d: %v", n2, want, calls2)
	}
	if len(first) != len(second) {
		t.Fatalf("listings differ in length: %d, %d", len(first), len(second))
	}
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("cached listing differs:\n first %+v\nsecond %+v", first[i], second[i])
		}
	}
	if u := second[0]; u.Name != "idle00.service" || u.CanStart != true || u.Preset != "disabled" || u.UnitFileState != "disabled" {
		t.Fatalf("cached inactive unit = %+v", u)
	}
	if u := second[active+inactive-1]; u.Name != "run09.service" || u.MainPID != 109 || u.Restarts != 2 || !u.CanReload ||
		u.ActiveSince.IsZero() || u.MemoryBytes != 1<<20 {
		t.Fatalf("cached active unit = %+v", u)
	}

	// What changes without a reload shows at once: a restart (new PID,
	// restart count), enabling (file state, with the symlink it makes in a
	// .wants directory), a unit stopping.
	f.mu.Lock()
	f.units["run09.service"].pid, f.units["run09.service"].restarts = 999, 3
	f.units["idle00.service"].fileState = "enabled"
	dirs["etc/systemd/system/multi-user.target.wants"].ModTime = old.Add(time.Minute)
	f.units["run08.service"].active, f.units["run08.service"].sub = "inactive", "dead"
	f.mu.Unlock()
	third, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, calls := f.take(); calls["ListUnitFilesByPatterns"] != 1 || calls["Get Manager.UnitPath"] != 0 {
		t.Fatalf("after enabling: %v", calls)
	}
	if u := third[active+inactive-1]; u.MainPID != 999 || u.Restarts != 3 {
		t.Fatalf("after a restart: %+v", u)
	}
	if u := third[0]; u.UnitFileState != "enabled" {
		t.Fatalf("after enabling: %+v", u)
	}
	if u := third[active+inactive-2]; u.ActiveState != "inactive" || u.MainPID != 0 {
		t.Fatalf("after stopping: %+v", u)
	}

	// A directory changed within the last second may change again with
	// the same time: the unit files are listed, and not kept, until it
	// has aged.
	dirs["etc/systemd/system"].ModTime = time.Now()
	for range 2 {
		if _, err := d.List(ctx); err != nil {
			t.Fatal(err)
		}
		if _, calls := f.take(); calls["ListUnitFilesByPatterns"] != 1 {
			t.Fatalf("with a directory changed just now: %v", calls)
		}
	}
	dirs["etc/systemd/system"].ModTime = old.Add(2 * time.Minute)

	// A daemon-reload may have changed any unit file: all read again.
	f.mu.Lock()
	f.loadStamp++
	f.units["idle01.service"].canReload = true
	f.mu.Unlock()
	fourth, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, calls := f.take(); calls["GetAll Unit"] != active+inactive || calls["ListUnitFilesByPatterns"] != 1 || calls["Get Manager.UnitPath"] != 1 {
		t.Fatalf("after a reload: %v", calls)
	}
	if _, err := d.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, calls := f.take(); calls["ListUnitFilesByPatterns"] != 0 {
		t.Fatalf("the listing after a reload: %v", calls)
	}
	if u := fourth[1]; u.Name != "idle01.service" || !u.CanReload {
		t.Fatalf("after a reload: %+v", u)
	}
}

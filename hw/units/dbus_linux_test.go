//go:build linux

package units

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/journal"
	"github.com/raspi-mcp/raspi-mcp/vmtest/nobody"
)

// Tests against a real systemd (PID 1) and system bus. They run in the
// vmtest VM, as root, and skip everywhere else:
//
//	go test -c -o /tmp/unitsvm/units.test ./hw/units
//	go run ./vmtest/cmd/vmtest run --share /tmp/unitsvm -- env RASPI_MCP_VM_GUEST=1 ./units.test -test.run VM -test.v

const (
	vmA      = "raspi-mcp-vmtest-a.service"
	vmB      = "raspi-mcp-vmtest-b.service"
	vmBroken = "raspi-mcp-vmtest-broken.service"
	vmDir    = "/etc/systemd/system"
)

var vmUnitFiles = map[string]string{
	vmA: `[Unit]
Description=raspi-mcp VM test A

[Service]
ExecStart=/bin/sh -c 'echo hello from a; exec sleep infinity'
Restart=on-failure
`,
	vmB: `[Unit]
Description=raspi-mcp VM test B
Requires=raspi-mcp-vmtest-a.service
After=raspi-mcp-vmtest-a.service

[Service]
ExecStart=/bin/sh -c 'echo hello from b; exec sleep infinity'
Restart=on-failure
Environment=GREETING=hi "TOKEN=a b"

[Install]
WantedBy=multi-user.target
`,
	vmBroken: `[Unit]
Description=raspi-mcp VM test broken
Requires=raspi-mcp-vmtest-nosuch.service

[Service]
ExecStart=/nonexistent/raspi-mcp-vmtest-bin --flag
User=raspi-mcp-nosuchuser
WorkingDirectory=/nonexistent-dir
Foo=bar

[Install]
WantedBy=multi-user.target
`,
}

// vmHangGuard bounds each step of the VM tests: what must happen (a job,
// a daemon-reload, journald catching up) is waited for as a condition, and
// this only keeps a broken build from hanging. Under software emulation
// on a loaded host one daemon-reload has taken more than 8 s (issue 28),
// so every subtest gets its own bound rather than sharing one for all.
const vmHangGuard = 3 * time.Minute

// vmCtx is a context bounded by vmHangGuard for t.
func vmCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), vmHangGuard)
	t.Cleanup(cancel)
	return ctx
}

func vmGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("RASPI_MCP_VM_GUEST") != "1" {
		t.Skip("needs systemd as PID 1: runs in the vmtest VM (RASPI_MCP_VM_GUEST=1)")
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installVMUnits writes the test units and removes them (stopped and
// disabled) when the test ends.
func installVMUnits(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("installing test units needs root")
	}
	for name, body := range vmUnitFiles {
		if err := os.WriteFile(filepath.Join(vmDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "systemctl", "daemon-reload")
	t.Cleanup(func() {
		exec.Command("systemctl", "stop", vmB, vmA).Run()
		exec.Command("systemctl", "disable", vmB).Run()
		for name := range vmUnitFiles {
			os.Remove(filepath.Join(vmDir, name))
		}
		exec.Command("systemctl", "daemon-reload").Run()
		exec.Command("systemctl", "reset-failed").Run()
	})
}

func newDBus(t *testing.T) *DBus {
	t.Helper()
	d, err := NewDBus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func get(t *testing.T, d Units, name string) Detail {
	t.Helper()
	x, err := d.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return x
}

func TestVMUnits(t *testing.T) {
	vmGuest(t)
	installVMUnits(t)
	d := newDBus(t)

	t.Run("Get", func(t *testing.T) {
		ctx := vmCtx(t)
		a := get(t, d, "raspi-mcp-vmtest-a") // normalised
		if a.Name != vmA || a.LoadState != "loaded" || a.ActiveState != "inactive" || a.UnitFileState != "static" ||
			a.FragmentPath != vmDir+"/"+vmA || a.Description != "raspi-mcp VM test A" || !a.CanStart || a.CanReload {
			t.Errorf("a: %+v", a)
		}
		if !slices.Equal(a.ExecStart, []string{`/bin/sh -c "echo hello from a; exec sleep infinity"`}) || a.Restart != "on-failure" || a.Type != "simple" {
			t.Errorf("a's configuration: ExecStart %q Restart %q Type %q", a.ExecStart, a.Restart, a.Type)
		}
		b := get(t, d, vmB)
		if b.UnitFileState != "disabled" || !slices.Contains(b.Requires, vmA) || !slices.Contains(b.After, vmA) ||
			b.Environment["GREETING"] != "hi" || b.Environment["TOKEN"] != "a b" {
			t.Errorf("b: %+v", b)
		}
		if _, err := d.Get(ctx, "raspi-mcp-vmtest-nosuch"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"raspi-mcp-vmtest-nosuch.service"`) {
			t.Errorf("Get(nosuch) = %v", err)
		}
		if _, err := d.Get(ctx, "--user"); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Get(--user) = %v", err)
		}
		dbus := get(t, d, "dbus")
		if dbus.ActiveState != "active" || dbus.MainPID == 0 || dbus.MemoryBytes == 0 || dbus.CPUNanos == 0 || dbus.ActiveSince.IsZero() {
			t.Errorf("dbus.service: %+v", dbus.Unit)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := vmCtx(t)
		start := time.Now()
		list, err := d.List(ctx)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]Unit{}
		loaded := 0
		for _, u := range list {
			byName[u.Name] = u
			if u.MainPID > 0 {
				loaded++
			}
		}
		t.Logf("List: %d units (%d with a main PID) in %v", len(list), loaded, took)
		if !slices.IsSortedFunc(list, func(a, b Unit) int { return strings.Compare(a.Name, b.Name) }) {
			t.Error("not sorted")
		}
		for _, n := range []string{vmA, vmB, "dbus.service", "systemd-journald.service"} {
			if _, ok := byName[n]; !ok {
				t.Errorf("%s missing from List", n)
			}
		}
		if u := byName["systemd-journald.service"]; u.ActiveState != "active" || u.MainPID == 0 || u.UnitFileState != "static" {
			t.Errorf("journald: %+v", u)
		}
		if u := byName[vmB]; u.UnitFileState != "disabled" || u.Description != "raspi-mcp VM test B" {
			t.Errorf("b: %+v", u)
		}
		for _, u := range list {
			if !strings.HasSuffix(u.Name, ".service") || u.UnitFileState == "alias" {
				t.Errorf("unexpected entry %+v", u)
			}
		}

		// The second listing takes what only a reload changes from the
		// cache, and must show the same.
		d.cache.mu.Lock()
		cached := len(d.cache.units)
		d.cache.mu.Unlock()
		if cached == 0 {
			t.Error("nothing cached after a listing: is UnitsLoadTimestampMonotonic unreadable?")
		}
		start = time.Now()
		again, err := d.List(ctx)
		t.Logf("List again with %d units' properties cached (and the unit files, unless a directory changed in the last second): %v", cached, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range again {
			if w, ok := byName[u.Name]; ok && w.ActiveState == u.ActiveState &&
				(w.UnitFileState != u.UnitFileState || w.Preset != u.Preset || w.CanStart != u.CanStart || w.CanStop != u.CanStop ||
					w.CanReload != u.CanReload || w.Description != u.Description || (u.MainPID == 0) != (w.MainPID == 0)) {
				t.Errorf("cached listing differs:\n first %+v\nsecond %+v", w, u)
			}
		}

		// Once the unit directories' times are old enough to vouch for,
		// the unit files are not listed again, and a unit file added by
		// hand (no daemon-reload) shows all the same.
		time.Sleep(racyWindow + 100*time.Millisecond)
		if _, err := d.List(ctx); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		if _, err := d.List(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("List with the unit files kept too: %v", time.Since(start))
		const added = "raspi-mcp-vmtest-added.service"
		if err := os.WriteFile(filepath.Join(vmDir, added), []byte("[Unit]\nDescription=added by hand\n[Service]\nExecStart=/bin/true\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(vmDir, added))
		time.Sleep(racyWindow + 100*time.Millisecond)
		list, err = d.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(list, func(u Unit) bool { return u.Name == added }); i < 0 || list[i].Description != "added by hand" {
			t.Errorf("a unit file added by hand is missing from the listing after it")
		}
	})

	t.Run("SetEnabled", func(t *testing.T) {
		ctx := vmCtx(t)
		link := vmDir + "/multi-user.target.wants/" + vmB
		res, err := d.SetEnabled(ctx, vmB, true)
		if err != nil || res.Before != "disabled" || res.After != "enabled" ||
			!slices.Equal(res.Changes, []Change{{"symlink", link, vmDir + "/" + vmB}}) {
			t.Fatalf("enable b: %+v, %v", res, err)
		}
		if dest, err := os.Readlink(link); err != nil || dest != vmDir+"/"+vmB {
			t.Errorf("symlink: %q, %v", dest, err)
		}
		if out := run(t, "systemctl", "is-enabled", vmB); strings.TrimSpace(out) != "enabled" {
			t.Errorf("systemctl is-enabled: %s", out)
		}
		if res, err := d.SetEnabled(ctx, vmA, true); !errors.Is(err, ErrStatic) || res.After != "static" || len(res.Changes) != 0 {
			t.Errorf("enable static a: %+v, %v", res, err)
		}
	})

	t.Run("Control", func(t *testing.T) {
		ctx := vmCtx(t)
		res, err := d.Control(ctx, vmB, Start)
		if err != nil || res.Job != "done" || res.Before.ActiveState != "inactive" || res.After.ActiveState != "active" ||
			res.After.SubState != "running" || res.After.MainPID == 0 {
			t.Fatalf("start b: %+v, %v", res, err)
		}
		a := get(t, d, vmA)
		if a.ActiveState != "active" || !slices.Contains(a.RequiredBy, vmB) {
			t.Errorf("a after starting b (which Requires it): %s, RequiredBy %q", a.ActiveState, a.RequiredBy)
		}
		deps, err := d.ActiveDependents(ctx, vmA)
		if err != nil || !slices.Equal(deps, []string{vmB}) {
			t.Errorf("ActiveDependents(a) = %q, %v", deps, err)
		}

		res, err = d.Control(ctx, vmA, Restart)
		if err != nil || res.Job != "done" || res.After.ActiveState != "active" || res.After.MainPID == res.Before.MainPID {
			t.Errorf("restart a: %+v, %v", res, err)
		}
		if _, err := d.Control(ctx, vmB, Reload); err == nil {
			t.Error("reload of a unit without ExecReload succeeded")
		} else {
			t.Logf("reload b: %v", err)
		}

		res, err = d.Control(ctx, vmA, Stop)
		if err != nil || res.Job != "done" || res.Before.ActiveState != "active" || res.After.ActiveState != "inactive" || res.After.MainPID != 0 {
			t.Errorf("stop a: %+v, %v", res, err)
		}
		if b := get(t, d, vmB); b.ActiveState != "inactive" {
			t.Errorf("b is %s after a (which it Requires) stopped", b.ActiveState)
		}
		if deps, err := d.ActiveDependents(ctx, vmA); err != nil || len(deps) != 0 {
			t.Errorf("ActiveDependents(a) after stop = %q, %v", deps, err)
		}

		// systemd refuses to queue a start whose Requires= is missing: an
		// error, but not ErrNotFound (the unit itself exists).
		res, err = d.Control(ctx, vmBroken, Start)
		if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "raspi-mcp-vmtest-nosuch.service not found") ||
			res.After != res.Before || res.Job != "" {
			t.Errorf("start broken: %+v, %v", res, err)
		}
		t.Logf("start broken: %v", err)
		if _, err := d.Control(ctx, "raspi-mcp-vmtest-nosuch", Start); !errors.Is(err, ErrNotFound) {
			t.Errorf("start nosuch: %v", err)
		}
		short, cancel := context.WithTimeout(ctx, time.Nanosecond)
		defer cancel()
		if _, err := d.Control(short, vmA, Start); err == nil {
			t.Error("Control ignored an expired context")
		}
	})

	t.Run("Journal", func(t *testing.T) {
		ctx := vmCtx(t)
		if _, err := d.Control(ctx, vmA, Start); err != nil {
			t.Fatal(err)
		}
		// journald may lag on a busy machine: wait for the lines, bounded
		// by the subtest's hang guard, not by a clock of its own.
		var res journal.Result
		for {
			var err error
			res, err = journal.Journalctl{}.Query(ctx, journal.Query{Units: []string{"raspi-mcp-vmtest-a"}, Priority: -1, Grep: "hello from a"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Entries) >= 2 || ctx.Err() != nil {
				break // a ran twice (start, restart) before; now a third time
			}
			time.Sleep(500 * time.Millisecond)
		}
		if len(res.Entries) < 2 {
			t.Fatalf("journal entries for a: %+v", res)
		}
		e := res.Entries[len(res.Entries)-1]
		if e.Unit != vmA || e.Message != "hello from a" || e.Identifier != "sh" || e.Level != "info" || e.PID == 0 {
			t.Errorf("entry %+v", e)
		}
		t.Logf("%d 'hello from a' lines; newest %+v", len(res.Entries), e)
	})

	t.Run("Validate", func(t *testing.T) {
		ctx := vmCtx(t)
		v, err := d.Validate(ctx, vmB)
		if err != nil || !v.Valid || !v.CanEnable || len(v.Warnings) != 0 || v.FragmentPath != vmDir+"/"+vmB {
			t.Errorf("validate b: %+v, %v", v, err)
		}
		v, err = d.Validate(ctx, vmA)
		if err != nil || !v.Valid || v.CanEnable || len(v.Warnings) != 1 || !strings.HasPrefix(v.Warnings[0], "static:") {
			t.Errorf("validate a: %+v, %v", v, err)
		}
		v, err = d.Validate(ctx, vmBroken)
		if err != nil || v.Valid || !v.CanEnable {
			t.Fatalf("validate broken: %+v, %v", v, err)
		}
		for _, want := range []string{
			"ExecStart=/nonexistent/raspi-mcp-vmtest-bin: does not exist",
			"User=raspi-mcp-nosuchuser does not exist (not in /etc/passwd)",
			"WorkingDirectory=/nonexistent-dir does not exist",
			"Requires=raspi-mcp-vmtest-nosuch.service: no such unit, so this unit cannot start",
			"systemd-analyze: " + vmBroken + ": Command /nonexistent/raspi-mcp-vmtest-bin is not executable: No such file or directory",
		} {
			if !slices.Contains(v.Errors, want) {
				t.Errorf("validate broken: no error %q", want)
			}
		}
		if !slices.ContainsFunc(v.Warnings, func(w string) bool { return strings.Contains(w, "Unknown key") && strings.Contains(w, "Foo") }) {
			t.Errorf("validate broken: no warning about Foo=")
		}
		t.Logf("broken unit:\n  errors   %q\n  warnings %q", v.Errors, v.Warnings)
		if _, err := d.Validate(ctx, "raspi-mcp-vmtest-nosuch"); !errors.Is(err, ErrNotFound) {
			t.Errorf("validate nosuch: %v", err)
		}
	})

	t.Run("Disable", func(t *testing.T) {
		ctx := vmCtx(t)
		link := vmDir + "/multi-user.target.wants/" + vmB
		res, err := d.SetEnabled(ctx, vmB, false)
		if err != nil || res.Before != "enabled" || res.After != "disabled" || !slices.Equal(res.Changes, []Change{{"unlink", link, ""}}) {
			t.Errorf("disable b: %+v, %v", res, err)
		}
		if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("symlink still there: %v", err)
		}
	})

	t.Run("Reconnect", func(t *testing.T) {
		ctx := vmCtx(t)
		// A connection that went away (here: closed under DBus's feet) is
		// replaced on the next call.
		d.mu.Lock()
		old := d.conn
		old.Close()
		d.mu.Unlock()
		if _, err := d.Get(ctx, "dbus"); err != nil {
			t.Fatalf("Get after the connection dropped: %v", err)
		}
		d.mu.Lock()
		fresh := d.conn != old && d.conn.Connected()
		d.mu.Unlock()
		if !fresh {
			t.Error("no new connection")
		}
	})
}

// TestVMReadsUnprivileged runs itself again as nobody: reads over D-Bus
// work without privileges, changes and the journal do not.
func TestVMReadsUnprivileged(t *testing.T) {
	vmGuest(t)
	if os.Geteuid() == 0 {
		installVMUnits(t)
		run(t, "systemctl", "start", vmA)
		nobody.Run(t, "nobody", "^TestVMReadsUnprivileged$", nil)
		if out := run(t, "systemctl", "is-active", vmA); strings.TrimSpace(out) != "active" {
			t.Errorf("a is %s after the unprivileged run tried to stop it", out)
		}
		return
	}
	t.Logf("running as uid %d", os.Geteuid())
	ctx := context.Background()
	d := newDBus(t)
	list, err := d.List(ctx)
	if err != nil || len(list) < 10 {
		t.Fatalf("List as nobody: %d units, %v", len(list), err)
	}
	// The unit directories can be fingerprinted (an hour from now, so no
	// time is too recent): an unprivileged agent keeps the unit files too.
	c, err := d.connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := unitPath(ctx, c)
	if _, ok := unitDirsPrint(d.root(), dirs, time.Now().Add(time.Hour)); err != nil || !ok {
		t.Errorf("as nobody, the unit directories %q (%v) cannot be fingerprinted", dirs, err)
	}
	a := get(t, d, vmA)
	if a.ActiveState != "active" || a.MainPID == 0 || len(a.ExecStart) != 1 {
		t.Errorf("Get(a) as nobody: %+v", a)
	}
	if _, err := d.ActiveDependents(ctx, vmA); err != nil {
		t.Errorf("ActiveDependents as nobody: %v", err)
	}
	v, err := d.Validate(ctx, vmBroken)
	if err != nil || v.Valid {
		t.Errorf("Validate as nobody: %+v, %v", v, err)
	}
	_, err = d.Control(ctx, vmA, Stop)
	if err == nil {
		t.Fatal("nobody stopped a unit")
	}
	t.Logf("Control as nobody: %v", err)
	if _, err := d.SetEnabled(ctx, vmB, true); err == nil {
		t.Error("nobody enabled a unit")
	}
	_, err = journal.Journalctl{}.Query(ctx, journal.Query{Units: []string{vmA}, Priority: -1})
	if !errors.Is(err, journal.ErrNotReadable) || !strings.Contains(err.Error(), "systemd-journal") {
		t.Errorf("journal as nobody: %v", err)
	}
}

// TestVMBusRestart restarts the system bus under a live DBus: the next
// calls must reconnect by themselves. It runs last; systemd reconnects to
// the new bus on its own.
func TestVMBusRestart(t *testing.T) {
	vmGuest(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	d := newDBus(t)
	ctx := vmCtx(t)
	if _, err := d.Get(ctx, "dbus"); err != nil {
		t.Fatal(err)
	}
	run(t, "systemctl", "restart", "dbus.service")
	var err error
	for ctx.Err() == nil { // the bus comes back when it does; vmHangGuard keeps a broken build from hanging
		var x Detail
		if x, err = d.Get(ctx, "dbus"); err == nil && x.ActiveState == "active" {
			t.Logf("reconnected: dbus.service pid %d", x.MainPID)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("no reconnect after the bus restarted: %v", err)
	}
	if _, err := d.List(ctx); err != nil {
		t.Errorf("List after the bus restarted: %v", err)
	}
}

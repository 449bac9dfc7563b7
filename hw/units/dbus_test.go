package units

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The parts of DBus that need no bus; dbus_linux_test.go has the rest.

func TestUnloadedUnit(t *testing.T) {
	d := &DBus{Root: fstest.MapFS{
		"lib/systemd/system/motion.service":  {Data: []byte("[Unit]\nDescription=Motion daemon\n[Service]\nExecStart=/usr/bin/motion\nExecReload=/bin/kill -HUP $MAINPID\n")},
		"lib/systemd/system/getty@.service":  {Data: []byte("[Unit]\nDescription=Getty on %I\n[Service]\nExecStart=-/sbin/agetty %I\n")},
		"lib/systemd/system/reboot2.service": {Data: []byte("[Unit]\nDescription=Reboot\nRefuseManualStart=yes\n[Service]\nExecStart=/bin/true\n")},
	}}
	for _, tc := range []struct {
		file, state string
		want        Unit
	}{
		{"/lib/systemd/system/motion.service", "disabled", Unit{Name: "motion.service", Description: "Motion daemon", LoadState: "loaded",
			ActiveState: "inactive", SubState: "dead", UnitFileState: "disabled", CanStart: true, CanStop: true, CanReload: true}},
		{"/lib/systemd/system/getty@.service", "enabled", Unit{Name: "getty@.service", Description: "Getty on %I", LoadState: "loaded",
			ActiveState: "inactive", SubState: "dead", UnitFileState: "enabled"}},
		{"/lib/systemd/system/reboot2.service", "static", Unit{Name: "reboot2.service", Description: "Reboot", LoadState: "loaded",
			ActiveState: "inactive", SubState: "dead", UnitFileState: "static", CanStop: true}},
		{"/etc/systemd/system/x11-common.service", "masked", Unit{Name: "x11-common.service", LoadState: "masked",
			ActiveState: "inactive", SubState: "dead", UnitFileState: "masked"}},
		{"/lib/systemd/system/unreadable.service", "disabled", Unit{Name: "unreadable.service", LoadState: "loaded",
			ActiveState: "inactive", SubState: "dead", UnitFileState: "disabled", CanStart: true, CanStop: true}},
	} {
		if got := d.unloadedUnit(tc.file, tc.state); got != tc.want {
			t.Errorf("unloadedUnit(%s)\n got %+v\nwant %+v", tc.file, got, tc.want)
		}
	}
}

func TestReadLimited(t *testing.T) {
	fsys := fstest.MapFS{"big": {Data: []byte(strings.Repeat("x", 100))}}
	if b, err := readLimited(fsys, "big", 10); err != nil || len(b) != 10 {
		t.Errorf("readLimited = %d bytes, %v", len(b), err)
	}
	if b, err := readLimited(fsys, "big", 1000); err != nil || len(b) != 100 {
		t.Errorf("readLimited = %d bytes, %v", len(b), err)
	}
	if _, err := readLimited(fsys, "missing", 10); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestVerifyRuns(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell script")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "systemd-analyze")
	body := "#!/bin/sh\n[ \"$1 $2\" = 'verify --' ] || { echo \"bad args: $*\" >&2; exit 9; }\n" +
		"echo \"$3:4: Unknown key 'Foo' in section [Service], ignoring.\" >&2\n" +
		"echo 'x.service: Command /nope is not executable: No such file or directory' >&2\nexit 1\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := &DBus{Analyze: script}
	errs, warns := d.verify(ctx, "x.service", "/etc/systemd/system/x.service")
	if !slices.Equal(errs, []string{"systemd-analyze: x.service: Command /nope is not executable: No such file or directory"}) ||
		!slices.Equal(warns, []string{"systemd-analyze: /etc/systemd/system/x.service:4: Unknown key 'Foo' in section [Service], ignoring."}) {
		t.Errorf("errors %q\nwarnings %q", errs, warns)
	}
	d.Analyze = filepath.Join(dir, "missing")
	if errs, warns := d.verify(ctx, "x.service", "/x"); errs != nil || len(warns) != 1 || !strings.Contains(warns[0], "could not run") {
		t.Errorf("missing binary: %q %q", errs, warns)
	}
	d.Analyze = "-"
	if errs, warns := d.verify(ctx, "x.service", "/x"); errs != nil || warns != nil {
		t.Errorf("skipped: %q %q", errs, warns)
	}
	t.Setenv("PATH", dir+"/nothing-here")
	d.Analyze = ""
	if _, warns := d.verify(ctx, "x.service", "/x"); len(warns) != 1 || !strings.Contains(warns[0], "not found") {
		t.Errorf("not in PATH: %q", warns)
	}
}

func TestNewDBusWithoutBus(t *testing.T) {
	for _, p := range []string{"/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket"} {
		if _, err := os.Stat(p); err == nil {
			t.Skip("this machine has a system bus")
		}
	}
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	_, err := NewDBus(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "units: connect to the system bus: ") {
		t.Fatalf("NewDBus without a bus: %v", err)
	}
}

func TestDBusClosed(t *testing.T) {
	d := &DBus{Root: fs.FS(fstest.MapFS{})}
	d.life, d.cancel = context.WithCancel(context.Background())
	d.Close()
	if _, err := d.List(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("List after Close: %v", err)
	}
	if _, err := d.Get(context.Background(), "../x"); err == nil || !strings.HasPrefix(err.Error(), "units: unit name") {
		t.Errorf("a bad name must fail before the bus: %v", err)
	}
}

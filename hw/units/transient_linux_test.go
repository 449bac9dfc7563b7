//go:build linux

package units

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVMTransient runs real transient units: exit statuses, the
// environment, Stop while running, and a name in use (see
// dbus_linux_test.go for how to run it in the VM).
func TestVMTransient(t *testing.T) {
	vmGuest(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	d := newDBus(t)
	ctx := vmCtx(t)
	out := filepath.Join(t.TempDir(), "env")

	for _, c := range []struct {
		name string
		argv []string
		ok   bool
		code int
	}{
		{"raspi-mcp-vmtest-t-ok", []string{"/bin/sh", "-c", "echo $GREETING > " + out}, true, 0},
		{"raspi-mcp-vmtest-t-fail", []string{"/bin/sh", "-c", "exit 7"}, false, 7},
		{"raspi-mcp-vmtest-t-noexec", []string{"/nonexistent/prog"}, false, -1},
	} {
		if err := d.Start(ctx, TransientSpec{Name: c.name, Description: "raspi-mcp transient test", Argv: c.argv, Env: []string{"GREETING=hello there"}}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		st, err := d.Wait(ctx, c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.OK() != c.ok || (c.code >= 0 && st.Code != c.code) {
			t.Errorf("%s: %+v, want ok=%v code %d", c.name, st, c.ok, c.code)
		}
		if _, err := d.Status(ctx, c.name); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: after Wait, Status = %v, want ErrNotFound", c.name, err)
		}
	}
	if b, err := os.ReadFile(out); err != nil || strings.TrimSpace(string(b)) != "hello there" {
		t.Errorf("the run's environment: %q, %v", b, err)
	}

	long := "raspi-mcp-vmtest-t-long"
	if err := d.Start(ctx, TransientSpec{Name: long, Argv: []string{"/bin/sleep", "600"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, TransientSpec{Name: long, Argv: []string{"/bin/sleep", "600"}}); !errors.Is(err, ErrTransientExists) {
		t.Errorf("second Start = %v, want ErrTransientExists", err)
	}
	st, err := d.Status(ctx, long)
	if err != nil || !st.Running || st.PID == 0 {
		t.Fatalf("running: %+v, %v", st, err)
	}
	if err := d.Stop(ctx, long); err != nil {
		t.Fatal(err)
	}
	st, err = d.Wait(ctx, long)
	if err != nil || st.OK() {
		t.Errorf("stopped run: %+v, %v; want a run that did not succeed", st, err)
	}
}

package power

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVMLogind drives the real systemd-logind of the test VM (make test-vm):
// schedule, read back, compare with busctl's view, cancel.
func TestVMLogind(t *testing.T) {
	if os.Getenv("RASPI_MCP_VM_GUEST") != "1" {
		t.Skip("runs inside the test VM only: make test-vm")
	}
	l, err := NewLogind()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	t0 := time.Now()
	if _, ok, err := l.Scheduled(ctx); err != nil || ok {
		t.Fatalf("fresh logind: %v %v", ok, err)
	}
	t.Logf("first property read took %s", time.Since(t0))
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := l.Schedule(ctx, Reboot, at); err != nil {
		t.Fatal(err)
	}
	s, ok, err := l.Scheduled(ctx)
	if err != nil || !ok || s.Action != Reboot || !s.At.Equal(at) {
		t.Fatalf("scheduled = %+v %v %v, want reboot at %v", s, ok, err, at)
	}
	out, _ := exec.Command("busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "ScheduledShutdown").CombinedOutput()
	if !strings.Contains(string(out), strconv.FormatInt(at.UnixMicro(), 10)) {
		t.Fatalf("busctl says %q", out)
	}
	if c, ok, err := l.Cancel(ctx); err != nil || !ok || c.Action != Reboot {
		t.Fatalf("cancel: %+v %v %v", c, ok, err)
	}
	if _, ok, _ := l.Scheduled(ctx); ok {
		t.Fatal("still scheduled after cancel")
	}
}

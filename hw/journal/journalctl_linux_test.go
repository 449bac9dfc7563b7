//go:build linux

package journal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/vmtest/nobody"
)

// Tests against the real journal. They run in the vmtest VM, as root with
// systemd and journald, and skip everywhere else:
//
//	go test -c -o /tmp/unitsvm/journal.test ./hw/journal
//	go run ./vmtest/cmd/vmtest run --share /tmp/unitsvm -- env RASPI_MCP_VM_GUEST=1 ./journal.test -test.run VM -test.v

const (
	vmUnit   = "raspi-mcp-vmtest-j.service"
	vmScript = "/usr/local/bin/raspi-mcp-vmtest-j"
)

func vmGuest(t *testing.T) {
	t.Helper()
	if os.Getenv("RASPI_MCP_VM_GUEST") != "1" {
		t.Skip("needs journald: runs in the vmtest VM (RASPI_MCP_VM_GUEST=1)")
	}
}

// runVMUnit runs a oneshot unit whose script logs a plain line, a line
// that is not UTF-8 (journald stores it as bytes), an error through the
// "<3>" prefix, a 6000-byte line and a line on stderr; it returns when the
// unit has finished and the lines are readable.
func runVMUnit(t *testing.T) time.Time {
	t.Helper()
	script := `#!/bin/sh
echo "hello from j"
printf 'bad \377\376 bytes\n'
echo "<3>an error line from j"
head -c 6000 /dev/zero | tr '\0' x; echo
echo "warn line from j" >&2
`
	unit := "[Unit]\nDescription=raspi-mcp journal VM test\n[Service]\nType=oneshot\nExecStart=" + vmScript + "\n"
	if err := os.WriteFile(vmScript, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/systemd/system/"+vmUnit, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(vmScript)
		os.Remove("/etc/systemd/system/" + vmUnit)
		exec.Command("systemctl", "daemon-reload").Run()
	})
	for _, args := range [][]string{{"daemon-reload"}, {"start", vmUnit}} {
		if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
			t.Fatalf("systemctl %v: %v\n%s", args, err, out)
		}
	}
	started := time.Now()
	// journald may lag behind the unit, and systemd's own "Finished" line
	// comes by another socket than the script's output: wait for the last
	// line of each. The minute is only a hang guard.
	for _, last := range []string{"warn line from j", "Finished " + vmUnit} {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
			res, err := Journalctl{}.Query(context.Background(), Query{Units: []string{vmUnit}, Priority: -1, Grep: last})
			if err == nil && len(res.Entries) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q not in the journal after a minute: %v", last, err)
			}
		}
	}
	return started
}

func TestVMJournalctl(t *testing.T) {
	vmGuest(t)
	if os.Geteuid() != 0 {
		t.Skip("the unit is installed by root; see TestVMJournalUnprivileged")
	}
	before := time.Now().Add(-time.Second)
	after := runVMUnit(t)
	ctx := context.Background()
	j := Journalctl{}

	res, err := j.Query(ctx, Query{Units: []string{"raspi-mcp-vmtest-j"}, Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]Entry{}
	for _, e := range res.Entries {
		byMsg[e.Message] = e
		t.Logf("%s %-7s %-10s %-32s %.70q", e.Time.Format("15:04:05.000"), e.Level, e.Identifier, e.Unit, e.Message)
	}
	hello, ok := byMsg["hello from j"]
	if !ok || hello.Unit != vmUnit || hello.Identifier != "raspi-mcp-vmtest-j" || hello.PID == 0 || hello.Level != "info" || hello.Time.Before(before) {
		t.Errorf("hello line: %+v (found %v)", hello, ok)
	}
	if e, ok := byMsg["bad \uFFFD bytes"]; !ok || e.Unit != vmUnit {
		t.Errorf("non-UTF-8 line not decoded: %+v", res.Entries)
	}
	if e, ok := byMsg["an error line from j"]; !ok || e.Priority != 3 || e.Level != "err" {
		t.Errorf("error line: %+v", e)
	}
	if e, ok := byMsg[strings.Repeat("x", MaxMessage)+"…"]; !ok {
		t.Errorf("6000-byte line not capped to %d bytes", MaxMessage)
	} else if e.Unit != vmUnit {
		t.Errorf("long line: %+v", e)
	}
	// systemd's own line about the unit is attributed to the unit.
	if e, ok := byMsg["Finished "+vmUnit+" - raspi-mcp journal VM test."]; !ok || e.PID != 1 || e.Identifier != "systemd" {
		t.Errorf("systemd's Finished line: %+v (found %v)", e, ok)
	}

	for _, tc := range []struct {
		name string
		q    Query
		want []string
	}{
		{"priority err", Query{Units: []string{vmUnit}, Priority: 3}, []string{"an error line from j"}},
		{"grep folds case", Query{Units: []string{vmUnit}, Priority: -1, Grep: "HELLO FROM J"}, []string{"hello from j"}},
		{"glob unit", Query{Units: []string{"raspi-mcp-vmtest-*"}, Priority: -1, Grep: "warn line"}, []string{"warn line from j"}},
		{"limit keeps the newest", Query{Units: []string{vmUnit}, Priority: -1, Limit: 1}, []string{res.Entries[len(res.Entries)-1].Message}},
		{"since and until", Query{Units: []string{vmUnit}, Priority: -1, Since: before, Until: after.Add(time.Minute), Grep: "hello"}, []string{"hello from j"}},
		{"until before the run", Query{Units: []string{vmUnit}, Priority: -1, Until: before}, nil},
		{"since after the run", Query{Units: []string{vmUnit}, Priority: -1, Since: time.Now().Add(time.Minute)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := j.Query(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range res.Entries {
				got = append(got, e.Message)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// The whole journal with a grep that never matches: bounded by ScanLimit,
	// and journalctl is killed rather than read to the end.
	start := time.Now()
	res, err = j.Query(ctx, Query{Priority: -1, Grep: "no line says this", ScanLimit: 200})
	if err != nil || !res.ScanLimited || res.Scanned != 200 {
		t.Errorf("scan limit: %+v, %v", res, err)
	}
	t.Logf("200-entry scan of the real journal: %v", time.Since(start))
	start = time.Now()
	res, err = j.Query(ctx, Query{Priority: -1})
	t.Logf("newest 100 of the whole journal: %d entries, %d scanned, truncated %v, %v (%v)", len(res.Entries), res.Scanned, res.Truncated, time.Since(start), err)
}

// TestVMJournalUnprivileged runs itself as nobody, which may not read the
// system journal, and as nobody in group systemd-journal, which may.
func TestVMJournalUnprivileged(t *testing.T) {
	vmGuest(t)
	ctx := context.Background()
	switch os.Getenv("RASPI_MCP_VM_AS") {
	case "":
		if os.Geteuid() != 0 {
			t.Skip("needs root to start")
		}
		runVMUnit(t)
		nobody.Run(t, "nobody", "^TestVMJournalUnprivileged$", []string{"RASPI_MCP_VM_AS=nobody"})
		g, err := user.LookupGroup("systemd-journal")
		if err != nil {
			t.Fatal(err)
		}
		gid, _ := strconv.Atoi(g.Gid)
		nobody.Run(t, "journal", "^TestVMJournalUnprivileged$", []string{"RASPI_MCP_VM_AS=journal"}, uint32(gid))
	case "nobody":
		_, err := Journalctl{}.Query(ctx, Query{Units: []string{vmUnit}, Priority: -1})
		if !errors.Is(err, ErrNotReadable) || !strings.Contains(err.Error(), "journal: not readable by uid 65534: add the user to group systemd-journal") {
			t.Fatalf("as nobody: %v", err)
		}
		t.Logf("as nobody: %v", err)
	case "journal":
		res, err := Journalctl{}.Query(ctx, Query{Units: []string{vmUnit}, Priority: -1, Grep: "hello from j"})
		if err != nil || len(res.Entries) == 0 {
			t.Fatalf("as nobody in systemd-journal: %+v, %v", res, err)
		}
		t.Logf("as nobody in systemd-journal: %d entries", len(res.Entries))
	}
}

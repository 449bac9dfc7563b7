package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperBinary builds raspi-mcp-simhelper once for the tests that start it
// as a child, as `serve --sim` and `selftest` do.
var helperBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "raspi-mcp-simhelper-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "raspi-mcp-simhelper")
	if out, err := exec.Command("go", "build", "-o", bin, "../raspi-mcp-simhelper").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build raspi-mcp-simhelper: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := helperBinary(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func runSelftest(t *testing.T, o selftestOptions) (string, error) {
	t.Helper()
	if o.Helper == "" {
		bin, err := helperBinary()
		if err != nil {
			t.Fatal(err)
		}
		o.Helper = bin
	}
	// The command's own default: a hang guard, not a speed requirement.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	o.Out, o.Log = &out, &log
	err := selftest(ctx, o)
	if log.Len() > 0 {
		t.Logf("agent and helper warnings:\n%s", log.String())
	}
	return out.String(), err
}

func TestSelftestPasses(t *testing.T) {
	out, err := runSelftest(t, selftestOptions{})
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("selftest failed: %v", err)
	}
	for _, s := range selftestSteps() {
		if !regexp.MustCompile(`(?m)^ok   ` + s.name + ` `).MatchString(out) {
			t.Errorf("no ok line for step %s", s.name)
		}
	}
	if strings.Contains(out, "FAIL") || !strings.Contains(out, "selftest passed: ") || !strings.Contains(out, "runtime: ") {
		t.Errorf("want a passing report with runtime and total time")
	}
	// The temporary directory, named on the config line, is gone.
	m := regexp.MustCompile(`(?m)^ok   config +(\S+),`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("config line does not name the directory")
	}
	if _, err := os.Stat(m[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s left behind (%v)", m[1], err)
	}
	// The helper ran as a child, and is gone.
	m = regexp.MustCompile(`(?m)^ok   helper +.*, pid (\d+),`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("helper line does not name the child's pid")
	}
	pid, _ := strconv.Atoi(m[1])
	if pid == os.Getpid() {
		t.Errorf("the helper served from the selftest's own process")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("helper child %d still there after the selftest (%v)", pid, err)
	}
}

// A helper that cannot be started fails the helper step, and nothing that
// needs it runs.
func TestSelftestNoHelper(t *testing.T) {
	out, err := runSelftest(t, selftestOptions{Helper: filepath.Join(t.TempDir(), "raspi-mcp-simhelper")})
	t.Logf("\n%s", out)
	if err == nil {
		t.Fatal("selftest passed without a helper")
	}
	if !regexp.MustCompile(`(?m)^FAIL helper +start .*raspi-mcp-simhelper: `).MatchString(out) || strings.Contains(out, "ok   agent") ||
		!strings.Contains(out, "1 of 15 steps failed, 12 not run") {
		t.Errorf("want the helper step to fail with the path and the agent not to start")
	}
}

func TestSelftestKeepsDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "st")
	if _, err := runSelftest(t, selftestOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.toml", "state.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("--dir: %v", err)
		}
	}
}

// A failing check fails the run but not the checks after it.
func TestSelftestFailingStep(t *testing.T) {
	steps := selftestSteps()
	i := slices.IndexFunc(steps, func(s selftestStep) bool { return s.name == "tools_list" })
	steps = slices.Insert(steps, i+1, selftestStep{name: "broken", run: func(*selftestRig, context.Context) (string, error) {
		return "", errors.New("injected failure")
	}})
	out, err := runSelftest(t, selftestOptions{Steps: steps})
	t.Logf("\n%s", out)
	if err == nil {
		t.Fatal("selftest passed with a broken step")
	}
	if !regexp.MustCompile(`(?m)^FAIL broken +injected failure`).MatchString(out) {
		t.Errorf("no FAIL line for the broken step")
	}
	if !strings.Contains(out, "ok   store_reopen") || !strings.Contains(out, "selftest FAILED: 1 of 16 steps failed") {
		t.Errorf("the steps after a failed check must still run")
	}
}

// A failed setup step stops the run: nothing after it can work.
func TestSelftestUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runSelftest(t, selftestOptions{Dir: file})
	t.Logf("\n%s", out)
	if err == nil {
		t.Fatal("selftest passed in a directory that is a file")
	}
	if !strings.HasPrefix(out, "FAIL config ") || strings.Contains(out, "ok ") ||
		!strings.Contains(out, "1 of 15 steps failed, 14 not run") {
		t.Errorf("want config to fail and nothing else to run")
	}
}

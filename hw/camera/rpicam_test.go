//go:build unix

package camera

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fake tool bodies. DIR is replaced with the directory holding the script,
// where the scripts leave their arguments and child PIDs for the test.
const (
	scriptOK = `printf '%s\n' "$@" > DIR/args
out=
while [ $# -gt 0 ]; do
	if [ "$1" = -o ]; then out=$2; fi
	shift
done
printf 'fake image data' > "$out"
`
	scriptNoCamera = `echo "[0:00:00.1] INFO Camera camera_manager.cpp:330 libcamera v0.3.0" >&2
echo "ERROR: *** no cameras available ***" >&2
exit 1
`
	scriptBusy = `echo "ERROR: *** failed to acquire camera /base/soc/i2c0mux/i2c@1/imx219@10 ***" >&2
echo "Device or resource busy" >&2
exit 1
`
	scriptHang = `sleep 600 &
echo $! > DIR/child.pid
wait
`
	scriptEmpty = `exit 0
`
	scriptFail = `echo "some noise" >&2
echo "ERROR: *** unsupported frobnication ***" >&2
exit 3
`
)

// fakeTools is a directory of fake capture tools plus a LookPath that only
// looks there, so tests never pick up a real rpicam-still.
type fakeTools struct {
	dir string
}

func newFakeTools(t *testing.T) *fakeTools {
	return &fakeTools{dir: t.TempDir()}
}

func (f *fakeTools) add(t *testing.T, name, body string) {
	t.Helper()
	script := "#!/bin/sh\n" + strings.ReplaceAll(body, "DIR", f.dir)
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeTools) lookPath(name string) (string, error) {
	p := filepath.Join(f.dir, name)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
	}
	return p, nil
}

func (f *fakeTools) args(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func newTestRpicam(f *fakeTools, root string, timeout time.Duration, procRoot string) *Rpicam {
	return NewRpicam(RpicamOptions{MediaRoot: root, Timeout: timeout, LookPath: f.lookPath, ProcRoot: procRoot})
}

var req720 = Request{Width: 1280, Height: 720, Format: "jpeg"}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s has %d leftover files, want none", dir, len(entries))
	}
}

func TestRpicamCaptureArgs(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	root := t.TempDir()
	before := time.Now()
	p, err := newTestRpicam(f, root, 0, t.TempDir()).Capture(context.Background(), req720)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--nopreview", "-t", "1", "--width", "1280", "--height", "720", "-e", "jpg", "-q", "85", "-o", p.Path}
	if got := f.args(t); !reflect.DeepEqual(got, want) {
		t.Errorf("args = %q\nwant   %q", got, want)
	}
	if filepath.Dir(p.Path) != root || !namePattern.MatchString(filepath.Base(p.Path)) {
		t.Errorf("path %q not a generated name inside %q", p.Path, root)
	}
	if p.Width != 1280 || p.Height != 720 || p.Format != "jpeg" || p.SizeBytes != int64(len("fake image data")) || p.Taken.Before(before) {
		t.Errorf("photo = %+v", p)
	}
	data, err := ReadCapped(p, 1024)
	if err != nil || string(data) != "fake image data" {
		t.Errorf("ReadCapped = %q, %v", data, err)
	}
}

func TestRpicamPNGArgs(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	p, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(),
		Request{Width: 640, Height: 480, Format: "png", Quality: 40})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--nopreview", "-t", "1", "--width", "640", "--height", "480", "-e", "png", "-q", "40", "-o", p.Path}
	if got := f.args(t); !reflect.DeepEqual(got, want) {
		t.Errorf("args = %q\nwant   %q", got, want)
	}
	if !strings.HasSuffix(p.Path, ".png") {
		t.Errorf("path %q lacks .png", p.Path)
	}
}

func TestRpicamFallbackToLibcamera(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolLibcamera, scriptOK)
	p, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(), req720)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.args(t); got[len(got)-1] != p.Path {
		t.Errorf("libcamera-still not run with -o %q: %q", p.Path, got)
	}
}

func TestRpicamPrefersRpicam(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	f.add(t, toolLibcamera, scriptFail)
	if _, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(), req720); err != nil {
		t.Fatalf("rpicam-still not preferred: %v", err)
	}
}

func TestRpicamNoTool(t *testing.T) {
	f := newFakeTools(t)
	root := filepath.Join(t.TempDir(), "media")
	_, err := newTestRpicam(f, root, 0, t.TempDir()).Capture(context.Background(), req720)
	if !errors.Is(err, ErrNoCamera) {
		t.Fatalf("err = %v, want ErrNoCamera", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("media root created without a tool: %v", err)
	}
}

func TestRpicamNoCameraMessage(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptNoCamera)
	root := t.TempDir()
	_, err := newTestRpicam(f, root, 0, t.TempDir()).Capture(context.Background(), req720)
	if !errors.Is(err, ErrNoCamera) {
		t.Fatalf("err = %v, want ErrNoCamera", err)
	}
	assertEmptyDir(t, root)
}

// fakeProc builds a /proc lookalike where pid 1234 (python3) holds
// /dev/video0 and pid 99 holds only /dev/null.
func fakeProc(t *testing.T) string {
	t.Helper()
	proc := t.TempDir()
	for _, p := range []struct{ pid, comm, dev string }{{"1234", "python3", "/dev/video0"}, {"99", "bash", "/dev/null"}} {
		fd := filepath.Join(proc, p.pid, "fd")
		if err := os.MkdirAll(fd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p.dev, filepath.Join(fd, "5")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, p.pid, "comm"), []byte(p.comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(proc, "sys"), 0o755); err != nil {
		t.Fatal(err)
	}
	return proc
}

func TestRpicamBusyNamesHolder(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptBusy)
	root := t.TempDir()
	_, err := newTestRpicam(f, root, 0, fakeProc(t)).Capture(context.Background(), req720)
	var be *BusyError
	if !errors.Is(err, ErrBusy) || !errors.As(err, &be) {
		t.Fatalf("err = %v, want *BusyError", err)
	}
	if be.Holder != "python3 (pid 1234)" {
		t.Errorf("Holder = %q, want %q", be.Holder, "python3 (pid 1234)")
	}
	assertEmptyDir(t, root)
}

func TestRpicamBusyUnknownHolder(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, `echo "ERROR: *** failed to acquire camera ***" >&2; exit 1`)
	_, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(), req720)
	var be *BusyError
	if !errors.As(err, &be) || be.Holder != "unknown" {
		t.Fatalf("err = %v, want BusyError with Holder unknown", err)
	}
}

func TestRpicamBusyCaptureRunning(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	c := newTestRpicam(f, t.TempDir(), 0, t.TempDir())
	c.mu.Lock() // a capture in progress
	_, err := c.Capture(context.Background(), req720)
	c.mu.Unlock()
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "capture already running") {
		t.Fatalf("err = %v, want ErrBusy: capture already running", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "args")); err == nil {
		t.Error("tool ran although a capture was in progress")
	}
}

// processGone reports whether pid has exited. A zombie counts as gone: in
// a container nobody may reap the orphaned sleep, but it no longer runs.
func processGone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func waitChildGone(t *testing.T, f *fakeTools) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "child.pid"))
	if err != nil {
		t.Fatalf("hang script did not record its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // a hang guard
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child sleep (pid %d) still running after the capture was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRpicamTimeoutKillsGroup lets the capture time out while the tool's
// child runs. A loaded machine may not even have started the child within
// the timeout; then the run proves nothing about the child, and it is
// repeated with a doubled timeout until the child was there to be killed.
func TestRpicamTimeoutKillsGroup(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptHang)
	for timeout := 300 * time.Millisecond; ; timeout *= 2 {
		os.Remove(filepath.Join(f.dir, "child.pid"))
		root := t.TempDir()
		_, err := newTestRpicam(f, root, timeout, t.TempDir()).Capture(context.Background(), req720)
		if err == nil || !strings.Contains(err.Error(), "timed out after "+timeout.String()) {
			t.Fatalf("err = %v, want a timeout after %v", err, timeout)
		}
		assertEmptyDir(t, root)
		if b, err := os.ReadFile(filepath.Join(f.dir, "child.pid")); err == nil && strings.HasSuffix(string(b), "\n") {
			waitChildGone(t, f)
			return
		}
		if timeout > 20*time.Second {
			t.Fatalf("the hang script never started its child within %v", timeout)
		}
	}
}

// TestRpicamCancelKillsGroup cancels once the tool's child is running.
func TestRpicamCancelKillsGroup(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptHang)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(ctx, req720)
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) { // a hang guard
		if b, err := os.ReadFile(filepath.Join(f.dir, "child.pid")); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hang script did not start its child")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitChildGone(t, f)
}

func TestRpicamEmptyOutput(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptEmpty)
	root := t.TempDir()
	_, err := newTestRpicam(f, root, 0, t.TempDir()).Capture(context.Background(), req720)
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("err = %v, want empty output error", err)
	}
	assertEmptyDir(t, root)
}

func TestRpicamOtherFailure(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptFail)
	_, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(), req720)
	if err == nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrNoCamera) {
		t.Fatalf("err = %v, want a plain failure", err)
	}
	for _, want := range []string{"rpicam-still", "exit status 3", "unsupported frobnication"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err %q lacks %q", err, want)
		}
	}
}

func TestRpicamPathStaysInRoot(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	base := t.TempDir()
	// An untidy root must still yield a path directly inside its clean form.
	messy := filepath.Join(base, "a") + "/../media/./"
	p, err := newTestRpicam(f, messy, 0, t.TempDir()).Capture(context.Background(), req720)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "media")
	if filepath.Dir(p.Path) != root {
		t.Fatalf("path %q not directly inside %q", p.Path, root)
	}
	if got := f.args(t); got[len(got)-1] != p.Path {
		t.Errorf("-o %q, want %q", got[len(got)-1], p.Path)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "media" {
		t.Errorf("files outside the media root: %v", entries)
	}
}

func TestRpicamInvalidRequestRunsNothing(t *testing.T) {
	f := newFakeTools(t)
	f.add(t, toolRpicam, scriptOK)
	_, err := newTestRpicam(f, t.TempDir(), 0, t.TempDir()).Capture(context.Background(),
		Request{Width: 4056, Height: 3040, Format: "jpeg"})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("err = %v, want ErrInvalidRequest", err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "args")); err == nil {
		t.Error("tool ran for an invalid request")
	}
}

func TestNewRpicamDefaults(t *testing.T) {
	c := NewRpicam(RpicamOptions{MediaRoot: "/srv/media"})
	if c.opts.Timeout != DefaultTimeout || c.opts.LookPath == nil || c.opts.ProcRoot != "/proc" {
		t.Errorf("defaults not applied: %+v", c.opts)
	}
}

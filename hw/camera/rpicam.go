package camera

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds one rpicam-still run when RpicamOptions.Timeout is
// zero. A normal capture takes a few seconds; a hung one must not hold the
// camera mutex forever.
const DefaultTimeout = 20 * time.Second

// maxToolOutput caps how much of the tool's output is kept for error
// messages; libcamera logging can be chatty.
const maxToolOutput = 64 << 10

// waitDelay is how long Wait waits for the tool's pipes to close after it
// is killed, in case something outside the process group kept them open.
const waitDelay = 2 * time.Second

// Tool names in order of preference: rpicam-still is the current name,
// libcamera-still the one on Bullseye-era images.
const (
	toolRpicam    = "rpicam-still"
	toolLibcamera = "libcamera-still"
)

// RpicamOptions configures Rpicam. Zero values give the production setup.
type RpicamOptions struct {
	MediaRoot string                       // where photos are written; created 0750 if missing
	Timeout   time.Duration                // per capture; DefaultTimeout if zero
	LookPath  func(string) (string, error) // exec.LookPath if nil; injectable for tests
	ProcRoot  string                       // "/proc" if empty; scanned to name a busy camera's holder
}

// Rpicam captures photos by running rpicam-still (or libcamera-still).
// Shelling out keeps the helper free of cgo and of libcamera's C++ ABI.
type Rpicam struct {
	opts RpicamOptions
	mu   sync.Mutex // held for the whole capture; TryLock gives ErrBusy
}

var _ Camera = (*Rpicam)(nil)

// NewRpicam returns an Rpicam with defaults filled in.
func NewRpicam(o RpicamOptions) *Rpicam {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	return &Rpicam{opts: o}
}

// Capture takes one photo. The file is created by this package before the
// tool runs (claiming a unique name inside MediaRoot) and removed again if
// the capture fails, so failed captures leave nothing behind.
func (c *Rpicam) Capture(ctx context.Context, r Request) (Photo, error) {
	r, err := Normalize(r)
	if err != nil {
		return Photo{}, err
	}
	if !c.mu.TryLock() {
		return Photo{}, fmt.Errorf("%w: capture already running", ErrBusy)
	}
	defer c.mu.Unlock()

	bin, tool, err := c.findTool()
	if err != nil {
		return Photo{}, err
	}
	taken := time.Now()
	f, err := Reserve(c.opts.MediaRoot, taken, r.Format)
	if err != nil {
		return Photo{}, err
	}
	path := f.Name()
	f.Close()

	photo, err := c.run(ctx, bin, tool, path, r)
	if err != nil {
		os.Remove(path)
		return Photo{}, err
	}
	photo.Taken = taken
	return photo, nil
}

// findTool resolves the capture binary, preferring rpicam-still.
func (c *Rpicam) findTool() (bin, tool string, err error) {
	for _, name := range []string{toolRpicam, toolLibcamera} {
		if p, err := c.opts.LookPath(name); err == nil {
			return p, name, nil
		}
	}
	return "", "", fmt.Errorf("%w: neither %s nor %s found", ErrNoCamera, toolRpicam, toolLibcamera)
}

// args builds the tool's command line. "-t 1" skips the default five second
// preview delay; --nopreview keeps it from looking for a display.
// rpicam-still ignores -q for PNG, so it is passed unconditionally.
func args(r Request, path string) []string {
	return []string{
		"--nopreview",
		"-t", "1",
		"--width", strconv.Itoa(r.Width),
		"--height", strconv.Itoa(r.Height),
		"-e", ext(r.Format),
		"-q", strconv.Itoa(r.Quality),
		"-o", path,
	}
}

// run executes the tool and turns its outcome into a Photo or a typed error.
func (c *Rpicam) run(ctx context.Context, bin, tool, path string, r Request) (Photo, error) {
	runCtx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()

	out := &cappedBuffer{max: maxToolOutput}
	cmd := exec.CommandContext(runCtx, bin, args(r, path)...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = waitDelay
	ownProcessGroup(cmd)

	if err := cmd.Run(); err != nil {
		switch {
		case ctx.Err() != nil:
			return Photo{}, fmt.Errorf("camera: %s cancelled: %w", tool, ctx.Err())
		case runCtx.Err() != nil:
			return Photo{}, fmt.Errorf("camera: %s timed out after %s", tool, c.opts.Timeout)
		}
		return Photo{}, c.toolError(tool, err, out.String())
	}

	fi, err := os.Stat(path)
	if err != nil {
		return Photo{}, fmt.Errorf("camera: %s left no output at %q: %w", tool, path, err)
	}
	if fi.Size() == 0 {
		return Photo{}, fmt.Errorf("camera: %s exited successfully but %q is empty", tool, path)
	}
	return Photo{Path: path, Width: r.Width, Height: r.Height, Format: r.Format, SizeBytes: fi.Size()}, nil
}

// toolError maps the tool's failure to ErrNoCamera, a *BusyError or a plain
// error quoting its last output line. The tool's exit codes are not
// specific, so its messages are the only signal available.
func (c *Rpicam) toolError(tool string, runErr error, output string) error {
	lower := strings.ToLower(output)
	switch {
	case strings.Contains(lower, "no cameras available"):
		return fmt.Errorf("%w: %s reports no cameras available", ErrNoCamera, tool)
	case strings.Contains(lower, "device or resource busy"),
		strings.Contains(lower, "failed to acquire camera"):
		return &BusyError{Holder: findHolder(c.opts.ProcRoot)}
	}
	return fmt.Errorf("camera: %s failed: %w: %s", tool, runErr, lastLine(output))
}

// lastLine returns the last non-blank line of s, which for libcamera tools
// is usually the actual error after pages of INFO logging.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// findHolder names the processes with a video or media device open, by
// scanning procRoot/*/fd. It is best effort: unreadable entries are skipped
// and "unknown" is returned when nothing is found.
func findHolder(procRoot string) string {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return "unknown"
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fdDir := filepath.Join(procRoot, e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			if strings.HasPrefix(target, "/dev/video") || strings.HasPrefix(target, "/dev/media") {
				pids = append(pids, pid)
				break
			}
		}
	}
	if len(pids) == 0 {
		return "unknown"
	}
	slices.Sort(pids)
	names := make([]string, 0, len(pids))
	for _, pid := range pids {
		comm, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
		name := strings.TrimSpace(string(comm))
		if err != nil || name == "" {
			name = "?"
		}
		names = append(names, fmt.Sprintf("%s (pid %d)", name, pid))
	}
	return strings.Join(names, ", ")
}

// cappedBuffer keeps the last max bytes written and drops the rest, so a
// runaway tool cannot exhaust memory while the final error line survives.
// It never returns an error, which would make the tool die of SIGPIPE
// mid-capture.
type cappedBuffer struct {
	b   []byte
	max int
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > 2*w.max {
		w.b = append([]byte(nil), w.b[len(w.b)-w.max:]...)
	}
	return len(p), nil
}

func (w *cappedBuffer) String() string {
	if len(w.b) > w.max {
		return string(w.b[len(w.b)-w.max:])
	}
	return string(w.b)
}

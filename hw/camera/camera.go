// Package camera takes still photos with the Raspberry Pi camera.
//
// Only the root helper runs the camera, so everything here assumes a
// privileged caller and is built to be hard to misuse: output files are
// always named by this package and always land inside one media root, only a
// few fixed sizes are accepted, and only one capture runs at a time.
package camera

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Errors callers are expected to branch on with errors.Is.
var (
	// ErrNoCamera means there is no capture tool installed, or the tool
	// reported that no camera is connected.
	ErrNoCamera = errors.New("camera: no camera available")
	// ErrBusy means a capture by this process is already running, or another
	// process holds the camera (then the error is a *BusyError).
	ErrBusy = errors.New("camera: busy")
	// ErrInvalidRequest means the Request is outside what this package
	// accepts; it is the caller's mistake, not the hardware's.
	ErrInvalidRequest = errors.New("camera: invalid request")
	// ErrTooLarge means a photo is bigger than the caller is willing to read
	// into memory.
	ErrTooLarge = errors.New("camera: photo too large")
)

// BusyError reports that another process holds the camera device. Holder is
// best effort ("unknown" when it cannot be found) because it is only there
// to tell the operator what to stop.
type BusyError struct {
	Holder string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("camera: busy: held by %s", e.Holder)
}

// Is makes errors.Is(err, ErrBusy) true for a *BusyError.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Request describes the photo to take.
type Request struct {
	Width, Height int    // one of 640x480, 1280x720, 1920x1080
	Format        string // "jpeg" or "png"
	Quality       int    // jpeg 1..100, 0 means DefaultQuality
}

// DefaultQuality is the JPEG quality used when Request.Quality is zero.
const DefaultQuality = 85

// Photo describes a file written by Capture.
type Photo struct {
	Path          string
	Width, Height int
	Format        string
	SizeBytes     int64
	Taken         time.Time
}

// Camera takes a photo. Implementations allow one capture at a time and
// return ErrBusy rather than queueing, so a slow capture never piles up
// requests behind it.
type Camera interface {
	Capture(ctx context.Context, r Request) (Photo, error)
}

// Normalize validates r and fills in defaults: the sizes, formats and
// qualities every Camera accepts.
func Normalize(r Request) (Request, error) {
	// A fixed list of sizes keeps memory and disk use on a Pi Zero
	// predictable and avoids passing arbitrary numbers to the capture tool.
	sizeOK := false
	for _, s := range [...][2]int{{640, 480}, {1280, 720}, {1920, 1080}} {
		if r.Width == s[0] && r.Height == s[1] {
			sizeOK = true
			break
		}
	}
	if !sizeOK {
		return r, fmt.Errorf("%w: size %dx%d not one of 640x480, 1280x720, 1920x1080", ErrInvalidRequest, r.Width, r.Height)
	}
	if r.Format != "jpeg" && r.Format != "png" {
		return r, fmt.Errorf("%w: format %q not \"jpeg\" or \"png\"", ErrInvalidRequest, r.Format)
	}
	if r.Quality == 0 {
		r.Quality = DefaultQuality
	}
	if r.Quality < 1 || r.Quality > 100 {
		return r, fmt.Errorf("%w: quality %d not in 1..100", ErrInvalidRequest, r.Quality)
	}
	return r, nil
}

// ext is the file extension for a validated format; it doubles as the value
// of rpicam-still's -e flag.
func ext(format string) string {
	if format == "png" {
		return "png"
	}
	return "jpg"
}

// mediaDir returns the absolute media root, creating it if needed. The
// absolute form lets Reserve check containment with a plain prefix test.
func mediaDir(root string) (string, error) {
	if root == "" {
		return "", errors.New("camera: media root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("camera: media root %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return "", fmt.Errorf("camera: create media root %q: %w", abs, err)
	}
	return abs, nil
}

// Reserve creates a new empty file with a server-generated name inside root
// and returns it open. Creating it with O_EXCL claims the name, so two
// captures in the same second cannot overwrite each other even though the
// random suffix is short enough to read.
func Reserve(root string, now time.Time, format string) (*os.File, error) {
	dir, err := mediaDir(root)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 16 {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("camera: random name suffix: %w", err)
		}
		name := fmt.Sprintf("photo-%s-%s.%s", now.UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:]), ext(format))
		path := filepath.Join(dir, name)
		if !within(dir, path) {
			return nil, fmt.Errorf("camera: generated path %q escapes media root %q", path, dir)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("camera: create %q: %w", path, err)
		}
		lastErr = err
	}
	return nil, fmt.Errorf("camera: no free file name in %q: %w", dir, lastErr)
}

// within reports whether path is a direct child of dir, which is the only
// place this package ever writes.
func within(dir, path string) bool {
	return filepath.Dir(path) == filepath.Clean(dir) && !strings.ContainsRune(filepath.Base(path), filepath.Separator)
}

// ReadCapped reads the photo's file so it can be returned inline (base64),
// refusing files above max bytes so a large PNG cannot blow up the
// response or the helper's memory. It refuses anything but a regular file so
// a swapped-in symlink cannot make it read elsewhere.
func ReadCapped(p Photo, max int64) ([]byte, error) {
	fi, err := os.Lstat(p.Path)
	if err != nil {
		return nil, fmt.Errorf("camera: read photo: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("camera: read photo %q: not a regular file (%s)", p.Path, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%w: %q is %d bytes, limit %d", ErrTooLarge, p.Path, fi.Size(), max)
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, fmt.Errorf("camera: read photo: %w", err)
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("camera: read photo %q: %w", p.Path, err)
	}
	if !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("camera: read photo %q: file changed while opening", p.Path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("camera: read photo %q: %w", p.Path, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: %q grew past limit %d bytes", ErrTooLarge, p.Path, max)
	}
	return data, nil
}

package camsim

import (
	"bytes"
	"context"
	"errors"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/hw/camera"
)

var namePattern = regexp.MustCompile(`^photo-\d{8}T\d{6}Z-[0-9a-f]{4}\.(jpg|png)$`)

func TestSimSizesAndFormats(t *testing.T) {
	root := filepath.Join(t.TempDir(), "media") // must be created
	s := New(root)
	for _, size := range [][2]int{{640, 480}, {1280, 720}, {1920, 1080}} {
		for _, format := range []string{"jpeg", "png"} {
			p, err := s.Capture(context.Background(), camera.Request{Width: size[0], Height: size[1], Format: format})
			if err != nil {
				t.Fatalf("%v %s: %v", size, format, err)
			}
			if p.Width != size[0] || p.Height != size[1] || p.Format != format || p.Taken.IsZero() {
				t.Errorf("photo = %+v", p)
			}
			data, err := os.ReadFile(p.Path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) != p.SizeBytes {
				t.Errorf("SizeBytes = %d, file has %d", p.SizeBytes, len(data))
			}
			img, got, err := image.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("decode %s: %v", p.Path, err)
			}
			if got != format {
				t.Errorf("decoded format %q, want %q", got, format)
			}
			if b := img.Bounds(); b.Dx() != size[0] || b.Dy() != size[1] {
				t.Errorf("decoded size %v, want %v", b, size)
			}
		}
	}
	fi, err := os.Stat(root)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^0o750 != 0 {
		t.Errorf("media root mode %v, want at most 0750", perm)
	}
}

func TestSimDeterministic(t *testing.T) {
	s := New(t.TempDir())
	r := camera.Request{Width: 640, Height: 480, Format: "png"}
	var files [2][]byte
	for i := range files {
		p, err := s.Capture(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if files[i], err = os.ReadFile(p.Path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two captures of the same request differ")
	}
}

func TestSimNamesUniqueInsideRoot(t *testing.T) {
	root := t.TempDir()
	s := New(root)
	seen := map[string]bool{}
	for range 20 {
		p, err := s.Capture(context.Background(), camera.Request{Width: 640, Height: 480, Format: "jpeg"})
		if err != nil {
			t.Fatal(err)
		}
		if seen[p.Path] {
			t.Fatalf("duplicate path %q", p.Path)
		}
		seen[p.Path] = true
		if filepath.Dir(p.Path) != root {
			t.Errorf("path %q not directly inside %q", p.Path, root)
		}
		if !namePattern.MatchString(filepath.Base(p.Path)) {
			t.Errorf("name %q does not match %v", filepath.Base(p.Path), namePattern)
		}
	}
}

func TestSimBusyWhileCapturing(t *testing.T) {
	s := New(t.TempDir())
	s.mu.Lock() // a capture in progress
	_, err := s.Capture(context.Background(), camera.Request{Width: 640, Height: 480, Format: "jpeg"})
	s.mu.Unlock()
	if !errors.Is(err, camera.ErrBusy) {
		t.Fatalf("err = %v, want camera.ErrBusy", err)
	}
}

func TestSimConcurrentCaptures(t *testing.T) {
	s := New(t.TempDir())
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Capture(context.Background(), camera.Request{Width: 1920, Height: 1080, Format: "png"})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, camera.ErrBusy):
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok == 0 {
		t.Error("no capture succeeded")
	}
}

func TestSimCancelled(t *testing.T) {
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(root).Capture(ctx, camera.Request{Width: 640, Height: 480, Format: "jpeg"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("cancelled capture left %d files", len(entries))
	}
}

package camera

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// namePattern is the name Reserve gives every capture.
var namePattern = regexp.MustCompile(`^photo-\d{8}T\d{6}Z-[0-9a-f]{4}\.(jpg|png)$`)

func TestNormalize(t *testing.T) {
	got, err := Normalize(Request{Width: 1280, Height: 720, Format: "jpeg"})
	if err != nil || got.Quality != DefaultQuality {
		t.Fatalf("Normalize = %+v, %v; want quality %d", got, err, DefaultQuality)
	}
	bad := []Request{
		{Width: 800, Height: 600, Format: "jpeg"},
		{Width: 720, Height: 1280, Format: "jpeg"},
		{Width: 640, Height: 480, Format: "gif"},
		{Width: 640, Height: 480, Format: ""},
		{Width: 640, Height: 480, Format: "jpeg", Quality: 101},
		{Width: 640, Height: 480, Format: "jpeg", Quality: -1},
	}
	for _, r := range bad {
		if _, err := Normalize(r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Normalize(%+v) err = %v, want ErrInvalidRequest", r, err)
		}
	}
}

func TestBusyErrorIs(t *testing.T) {
	err := error(&BusyError{Holder: "python3 (pid 7)"})
	if !errors.Is(err, ErrBusy) {
		t.Error("BusyError is not ErrBusy")
	}
	if got, want := err.Error(), "camera: busy: held by python3 (pid 7)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestReserveExclusive(t *testing.T) {
	root := t.TempDir()
	now := time.Date(2026, 11, 22, 4, 30, 0, 0, time.UTC)
	seen := map[string]bool{}
	// 200 names in the same second: O_EXCL plus retry must keep them apart.
	for range 200 {
		f, err := Reserve(root, now, "jpeg")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if seen[f.Name()] {
			t.Fatalf("name %q reused", f.Name())
		}
		seen[f.Name()] = true
		if filepath.Dir(f.Name()) != root || !namePattern.MatchString(filepath.Base(f.Name())) {
			t.Fatalf("bad name %q", f.Name())
		}
	}
}

func TestReadCapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "photo.jpg")
	if err := os.WriteFile(path, []byte("0123456789"), 0o640); err != nil {
		t.Fatal(err)
	}
	p := Photo{Path: path}
	data, err := ReadCapped(p, 10)
	if err != nil || string(data) != "0123456789" {
		t.Fatalf("ReadCapped(10) = %q, %v", data, err)
	}
	if _, err := ReadCapped(p, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("ReadCapped(9) err = %v, want ErrTooLarge", err)
	}
	link := filepath.Join(dir, "link.jpg")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCapped(Photo{Path: link}, 100); err == nil {
		t.Error("ReadCapped followed a symlink")
	}
	if _, err := ReadCapped(Photo{Path: filepath.Join(dir, "missing")}, 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file err = %v, want ErrNotExist", err)
	}
}

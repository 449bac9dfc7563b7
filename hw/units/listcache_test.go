package units

import (
	"io/fs"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	godbus "github.com/godbus/dbus/v5"
)

// unitDirsPrint changes with any entry added to or removed from a unit
// directory or one of its subdirectories (each changes that directory's
// time), not with a unit file's own time, and vouches for nothing while a
// directory's time is too recent to trust or a directory cannot be read.
func TestUnitDirsPrint(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	dir := func(t time.Time) *fstest.MapFile { return &fstest.MapFile{Mode: fs.ModeDir | 0o755, ModTime: t} }
	fsys := fstest.MapFS{
		"etc/systemd/system":                         dir(old),
		"etc/systemd/system/multi-user.target.wants": dir(old),
		"etc/systemd/system/a.service":               {Data: []byte("[Service]\n"), ModTime: old},
		"lib/systemd/system":                         dir(old),
	}
	dirs := []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system"}
	print := func() uint64 {
		t.Helper()
		p, ok := unitDirsPrint(fsys, dirs, now)
		if !ok {
			t.Fatal("unitDirsPrint: not ok")
		}
		return p
	}
	base := print()
	if again := print(); again != base {
		t.Fatalf("same tree, different prints: %x, %x", base, again)
	}

	fsys["etc/systemd/system/a.service"].ModTime = old.Add(time.Minute) // edited in place
	if p := print(); p != base {
		t.Error("a unit file's own time changed the print")
	}

	fsys["etc/systemd/system/multi-user.target.wants"].ModTime = old.Add(time.Minute) // enabled
	enabled := print()
	if enabled == base {
		t.Error("a .wants directory's new time left the print as it was")
	}

	fsys["run/systemd/system"] = dir(old) // a directory that was missing
	if p := print(); p == enabled {
		t.Error("a unit directory that appeared left the print as it was")
	}

	fsys["lib/systemd/system/b.service.d"] = dir(now.Add(-racyWindow / 2)) // a drop-in directory just made
	if _, ok := unitDirsPrint(fsys, dirs, now); ok {
		t.Error("a directory changed within racyWindow of now was vouched for")
	}
	fsys["lib/systemd/system/b.service.d"].ModTime = now.Add(-2 * racyWindow)
	print()

	fsys["lib/systemd/system"] = &fstest.MapFile{Data: []byte("not a directory")}
	if _, ok := unitDirsPrint(fsys, dirs, now); ok {
		t.Error("a unit directory that is a file was vouched for")
	}
}

// parseStrings reads back what godbus's Variant.String makes of a string
// array, the form go-systemd's GetManagerProperty hands over.
func TestParseStrings(t *testing.T) {
	for _, want := range [][]string{
		{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system"},
		{"/odd, \"quoted\"\tpath", "/ünicode"},
		{"one"},
		nil,
	} {
		s := godbus.MakeVariant(want).String()
		if want == nil {
			s = godbus.MakeVariant([]string{}).String()
		}
		got, err := parseStrings(s)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseStrings(%s) = %q, %v; want %q", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "[", "[\"a\"", "[\"a\" \"b\"]", "[a]", "@t 5", "[\"a\",\"b\"]"} {
		if got, err := parseStrings(bad); err == nil {
			t.Errorf("parseStrings(%q) = %q, want an error", bad, got)
		}
	}
}

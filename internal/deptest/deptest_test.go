package deptest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The module in testdata/fenced has a -> b -> net/http, and c on strings.
func fenced(t *testing.T, f Fence) []Violation {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list")
	}
	f.GOOS = []string{"linux"}
	vs, err := f.Violations(filepath.Join("testdata", "fenced"))
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestFenceCatchesIndirectImport: the fence must fail, with the chain, when
// a fenced package reaches a forbidden one through another package.
func TestFenceCatchesIndirectImport(t *testing.T) {
	vs := fenced(t, Fence{Packages: []string{"./a"}, Forbidden: map[string]string{"net/http": "no HTTP here"}})
	if len(vs) != 1 {
		t.Fatalf("violations = %v, want one", vs)
	}
	want := []string{"example.com/fenced/a", "example.com/fenced/b", "net/http"}
	if v := vs[0]; v.Dep != "net/http" || !slices.Equal(v.Chain, want) || v.Reason != "no HTTP here" || v.GOOS != "linux" {
		t.Fatalf("violation = %+v, want chain %v", v, want)
	}
	if s := vs[0].String(); !strings.Contains(s, "a -> example.com/fenced/b -> net/http (no HTTP here)") {
		t.Fatalf("violation reads %q", s)
	}
}

func TestFencePrefix(t *testing.T) {
	vs := fenced(t, Fence{Packages: []string{"./..."}, Forbidden: map[string]string{"example.com/fenced/b/...": "b is off limits"}})
	if len(vs) != 1 || vs[0].Dep != "example.com/fenced/b" {
		t.Fatalf("violations = %v, want b", vs)
	}
	// A prefix is a path prefix, not a string prefix.
	if vs := fenced(t, Fence{Packages: []string{"./..."}, Forbidden: map[string]string{"net/ht/...": "x"}}); len(vs) != 0 {
		t.Fatalf("net/ht/... matched %v", vs)
	}
}

func TestFenceStdlibOnly(t *testing.T) {
	vs := fenced(t, Fence{Packages: []string{"./a"}, StdlibOnly: true})
	if len(vs) != 1 || vs[0].Dep != "example.com/fenced/b" {
		t.Fatalf("violations = %v, want b, the one non-standard dependency", vs)
	}
	if vs := fenced(t, Fence{Packages: []string{"./c"}, StdlibOnly: true}); len(vs) != 0 {
		t.Fatalf("c uses the standard library only, yet: %v", vs)
	}
}

// TestFenceAllows: a fence that holds reports nothing.
func TestFenceAllows(t *testing.T) {
	if vs := fenced(t, Fence{Packages: []string{"./..."}, Forbidden: map[string]string{"database/sql": "no databases"}}); len(vs) != 0 {
		t.Fatalf("violations = %v, want none", vs)
	}
}

// TestFenceRefusesVacuous: a fence that names no package, a package that
// does not exist, or nothing forbidden is an error, not a pass.
func TestFenceRefusesVacuous(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	dir := filepath.Join("testdata", "fenced")
	for _, f := range []Fence{
		{Forbidden: map[string]string{"net/http": "x"}},
		{Packages: []string{"./a"}},
		{Packages: []string{"./nope"}, Forbidden: map[string]string{"net/http": "x"}},
	} {
		if vs, err := f.Violations(dir); err == nil {
			t.Errorf("fence %+v: %v, want an error", f, vs)
		}
	}
}

package netinfo

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// fixture is a board's file tree under testdata.
func fixture(board string) fs.FS { return os.DirFS(path.Join("testdata", board)) }

// mapFixture copies testdata/<board> into a MapFS so a test can add,
// delete or rewrite single files.
func mapFixture(t testing.TB, board string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := fixture(board)
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		m[p] = &fstest.MapFile{Data: b}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fixtureAddrs is the AddrFunc of the fixture boards: what
// net.InterfaceByName(name).Addrs() returned there (IPv6 included, which
// Interfaces must ignore in favour of if_inet6).
func fixtureAddrs(name string) ([]netip.Prefix, error) {
	p := netip.MustParsePrefix
	switch name {
	case "lo":
		return []netip.Prefix{p("127.0.0.1/8"), p("::1/128")}, nil
	case "eth0":
		return []netip.Prefix{p("192.168.1.23/24"), p("10.8.0.6/31"), p("fe80::dea6:32ff:fe01:203/64")}, nil
	case "wlan0":
		return []netip.Prefix{p("192.168.1.24/24")}, nil
	case "docker0":
		return []netip.Prefix{p("172.17.0.1/16")}, nil
	}
	return nil, nil
}

// v6offAddrs is the AddrFunc of the v6off board.
func v6offAddrs(name string) ([]netip.Prefix, error) {
	switch name {
	case "lo":
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}, nil
	case "eth0":
		return []netip.Prefix{netip.MustParsePrefix("10.0.0.23/24")}, nil
	}
	return nil, nil
}

// needLittleEndian skips tests whose fixtures hold host-order hex words
// written by a little-endian Pi; the parser decodes them in the running
// machine's byte order, as the kernel wrote them.
func needLittleEndian(t testing.TB) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("fixtures hold little-endian /proc words")
	}
}

// wantErr checks that err is non-nil, starts with the package name and
// mentions every fragment (the file, the line, the bad value).
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", fragments)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "netinfo: ") {
		t.Errorf("error %q does not start with the package name", msg)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not mention %q", msg, f)
		}
	}
}

// same fails the test with a readable diff when got != want.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %s\nwant %s", what, dump(got), dump(want))
	}
}

// dump renders values as JSON so pointers show their targets.
func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

func TestHelpers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true}, {"ff", 255, true}, {"FFFFFFFF", 0xffffffff, true},
		{"ffffffffffffffff", 1<<64 - 1, true}, {"", 0, false}, {"0x1", 0, false},
		{"g", 0, false}, {"11111111111111111", 0, false},
	} {
		if v, ok := parseHex(tc.in); v != tc.want || ok != tc.ok {
			t.Errorf("parseHex(%q) = %d, %v; want %d, %v", tc.in, v, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-1", -1, true}, {"65536", 65536, true}, {"", 0, false},
		{"-", 0, false}, {"1.5", 0, false}, {"18446744073709551616", 0, false},
		{"9223372036854775808", 0, false},
	} {
		if v, ok := parseInt(tc.in); v != tc.want || ok != tc.ok {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, v, ok, tc.want, tc.ok)
		}
	}
	var f [3]string
	if n := fields(" a\tbb  c d\n", f[:]); n != 3 || f != [3]string{"a", "bb", "c"} {
		t.Errorf("fields = %d %q", n, f)
	}
	if got := trim([]byte("\t x y \n")); string(got) != "x y" {
		t.Errorf("trim = %q", got)
	}
}

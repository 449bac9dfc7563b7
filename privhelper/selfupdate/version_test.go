package selfupdate

import "testing"

func TestCompareOrdersAsDpkg(t *testing.T) {
	// Each pair is a < b, as `dpkg --compare-versions a lt b` says.
	for _, tc := range [][2]string{
		{"0.1.0", "0.2.0"},
		{"0.9", "0.10"},
		{"1.0~beta1", "1.0"},
		{"1.0~beta1", "1.0~beta2"},
		{"1.0~~", "1.0~"},
		{"1.0", "1.0+next"},
		{"1.0", "1.0.1"},
		{"1.0-1", "1.0-2"},
		{"1.0-9", "1.0-10"},
		{"1.0a", "1.0b"},
		{"1.0a", "1.0+"},
		{"9.9", "1:0.1"},
		{"0.1.0-5-gabc", "0.1.0-6-gabc"},
		{"1.00000000000000000000001", "1.00000000000000000000002"},
	} {
		if c := Compare(tc[0], tc[1]); c != -1 {
			t.Errorf("Compare(%q, %q) = %d, want -1", tc[0], tc[1], c)
		}
		if c := Compare(tc[1], tc[0]); c != 1 {
			t.Errorf("Compare(%q, %q) = %d, want 1", tc[1], tc[0], c)
		}
	}
	for _, v := range []string{"1.0", "0:1.0", "1.00", "1.0-1"} {
		if c := Compare(v, v); c != 0 {
			t.Errorf("Compare(%q, itself) = %d", v, c)
		}
	}
	if Compare("0:1.0", "1.0") != 0 || Compare("01.0", "1.0") != 0 {
		t.Error("a zero epoch or a leading zero changed the order")
	}
}

func TestValidVersion(t *testing.T) {
	for _, v := range []string{"0.1.0", "1:2.3-4", "0.1.0+next", "1.0~beta1", "0.1.0-5-gabc123"} {
		if err := ValidVersion(v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"", "-1.0", "v1.0", "1.0 2.0", "1.0;rm", "a:1.0", ":1.0", "1.0-", "1.0/..", "1:", string(make([]byte, 65))} {
		if err := ValidVersion(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

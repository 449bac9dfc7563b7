package tool

import "testing"

func TestTraceparentFrom(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		in   any
		want string
	}{
		{good, good},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", ""}, // uppercase
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""}, // zero trace id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""}, // zero parent id
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}, // unknown version
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", ""}, // short
		{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", ""}, // not hex
		{good + "\n", ""},
		{42, ""},
		{nil, ""},
	} {
		meta := map[string]any{}
		if tc.in != nil {
			meta[MetaTraceparent] = tc.in
		}
		if got := TraceparentFrom(meta); got != tc.want {
			t.Errorf("TraceparentFrom(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := TraceparentFrom(nil); got != "" {
		t.Errorf("TraceparentFrom(nil) = %q", got)
	}
}

package selfupdate

import "testing"

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

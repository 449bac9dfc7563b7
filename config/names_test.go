package config

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The hand-written name checks accept exactly what the regular expressions
// they replaced accepted.
func TestNameChecksMatchRegexps(t *testing.T) {
	checks := []struct {
		re *regexp.Regexp
		f  func(string) bool
	}{
		{regexp.MustCompile(`^[a-z][a-z0-9]{0,15}$`), validUpstreamName},
		{regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`), validEnvName},
		{regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`), validHostLabel},
	}
	in := []string{"", "a", "A", "_", "-", "0", "a-", "-a", "a-b", "a_b", "hs4", "Hs4", "9a", "a\n", "é", "a.b", "@", "[", "`", "{",
		strings.Repeat("a", 16), strings.Repeat("a", 17), strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 61) + "a", "a" + strings.Repeat("-", 62) + "a"}
	const alphabet = "aAzZ09_-.@[`{ \x80é"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(20))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		in = append(in, string(b))
	}
	for i, c := range checks {
		for _, s := range in {
			if got, want := c.f(s), c.re.MatchString(s); got != want {
				t.Errorf("check %d (%s) of %q = %v, want %v", i, c.re, s, got, want)
			}
		}
	}
}

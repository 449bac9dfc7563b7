package apt

import (
	"fmt"
	"strings"
	"testing"
)

// bigSimulation is apt-get -s output for n upgrades, the size of a
// desktop image's monthly upgrade when n is a few hundred.
func bigSimulation(n int) string {
	var b strings.Builder
	b.WriteString("Reading package lists...\nThe following packages will be upgraded:\n")
	for i := range n {
		fmt.Fprintf(&b, "Inst libexample%d [1.%d-1] (1.%d-2 Debian:12.8/stable, Debian-Security:12/stable-security [arm64])\n", i, i, i)
		fmt.Fprintf(&b, "Conf libexample%d (1.%d-2 Debian:12.8/stable [arm64])\n", i, i)
	}
	return b.String()
}

// BenchmarkParseSimulate reads a 300-package simulation, which the
// preview, the check and every apply do once each.
func BenchmarkParseSimulate(b *testing.B) {
	out := bigSimulation(300)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSimulate(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanHash hashes a 300-package plan.
func BenchmarkPlanHash(b *testing.B) {
	p, err := ParseSimulate(bigSimulation(300))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Hash()
	}
}

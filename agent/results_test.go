package agent

import (
	"encoding/json"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
)

// Small helpers for reading typed tool results (callAs, decodeResult) in
// tests, beside harness_test.go's.

// pluck is f of each of xs: the names in a typed list, say.
func pluck[T, V any](xs []T, f func(T) V) []V {
	var out []V
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

// isCode reports whether e is an error with code; for checks that go on
// after a mismatch, where wantErr would stop the test.
func isCode(e *tool.Error, code string) bool { return e != nil && e.Code == code }

// asJSON is v as JSON, for a search through everything a result says:
// unlike fmt's %v it shows what pointer fields point to.
func asJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

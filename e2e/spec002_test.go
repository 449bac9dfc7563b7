package e2e

import (
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/spec002"
)

// The tool catalog's example requests (spec 002 §2.6 and the addendum) succeed
// through `raspi-mcp stdio` on the simulated board, as a client that read the
// spec sends them; the invalid one is refused as invalid. Where the spec and
// this server differ on purpose (spec002.Differences) the example is retried
// with what the difference says, and must then succeed.
func TestSpecExamplesThroughStdio(t *testing.T) {
	tools, _, err := spec002.Load("../agent/testdata/spec002")
	if err != nil {
		t.Fatal(err)
	}
	s := startSim(t)
	cs := s.session(t)
	ran := 0
	for specID, st := range tools {
		if _, unserved := spec002.Find(specID, "", "not-served"); unserved {
			continue
		}
		for _, ex := range st.Examples {
			id, args := spec002.Call(specID, ex)
			name := strings.ReplaceAll(id, ".", "_")
			res, m := call(t, cs, name, args)
			ran++
			switch {
			case ex.ExpectError:
				if code(m) != "invalid_argument" {
					t.Errorf("%s %q: want invalid_argument, got %v", specID, ex.Label, m)
				}
			case res.IsError:
				d, ok := spec002.Find(specID, "example: "+ex.Label, "example")
				if !ok || d.Retry == nil {
					t.Errorf("%s %q: %v", specID, ex.Label, m)
					continue
				}
				for k, v := range d.Retry {
					args[k] = v
				}
				if res, m := call(t, cs, name, args); res.IsError {
					t.Errorf("%s %q with %v: %v", specID, ex.Label, d.Retry, m)
				}
			}
		}
	}
	if ran < 12 {
		t.Fatalf("only %d examples ran", ran)
	}
}

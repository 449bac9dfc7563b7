package privhelper_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// forbidden are modules the root helper must never link: the MCP SDK parses
// untrusted free text from the model, and bbolt is the agent's state store.
// Keeping both out keeps the code running as root small and auditable.
var forbidden = []string{
	"github.com/modelcontextprotocol/go-sdk",
	"go.etcd.io/bbolt",
}

func isForbidden(pkg string) bool {
	for _, f := range forbidden {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

// goList runs `go list` in the module root and returns its output lines.
func goList(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return strings.Fields(string(out))
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("go command not found: %v", err)
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("cannot find the module root (go env GOMOD = %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod)
}

func TestHelperDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root := moduleRoot(t)

	// The check itself must be able to see a forbidden import.
	if !slices.ContainsFunc(goList(t, root, "-deps", "github.com/modelcontextprotocol/go-sdk/mcp"), isForbidden) {
		t.Fatal("isForbidden does not recognise the MCP SDK; the check below would be vacuous")
	}

	check := func(args ...string) {
		t.Helper()
		deps := goList(t, root, args...)
		if len(deps) == 0 {
			t.Fatalf("go list %v listed nothing", args)
		}
		for _, d := range deps {
			if isForbidden(d) {
				t.Errorf("go list %v: helper-side code depends on %s", args, d)
			}
		}
	}
	check("-deps", "./privhelper/...", "./hw/power")
	if _, err := os.Stat(filepath.Join(root, "cmd", "raspi-mcp-helper")); err == nil {
		// -e: the binary may be mid-edit by someone else; its imports still count.
		check("-e", "-deps", "./cmd/raspi-mcp-helper")
	}

	// proto is shared with the agent and must stay stdlib-only.
	nonStd := goList(t, root, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./privhelper/proto")
	if want := []string{"github.com/raspi-mcp/raspi-mcp/privhelper/proto"}; !slices.Equal(nonStd, want) {
		t.Fatalf("privhelper/proto has non-stdlib dependencies: %v", nonStd)
	}
}

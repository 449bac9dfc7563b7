// Package deptest fences what a package may link. A Fence names packages
// and the imports they must never reach, each with the reason; Check runs
// `go list -deps` and fails a test with the import chain that breaks it. It
// keeps the root helper free of the MCP SDK and the agent's store, the device
// packages free of transports, and the helper protocol stdlib-only, so that a
// convenient import in a small package cannot quietly widen what runs as root.
package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Fence is one rule: none of Packages may depend on any of Forbidden.
type Fence struct {
	// Packages are `go list` patterns, relative to the module root
	// ("./privhelper/...", "./cmd/raspi-mcp-helper").
	Packages []string
	// Forbidden maps an import path to why it must not be linked. A path
	// ending in "/..." forbids the path and everything under it.
	Forbidden map[string]string
	// StdlibOnly forbids every package outside the standard library except
	// Packages themselves.
	StdlibOnly bool
	// GOOS are the systems the dependencies are listed for (build tags
	// differ); nil means linux, where raspi-mcp ships, and darwin, where
	// laptop mode runs.
	GOOS []string
}

// Violation is one forbidden dependency and how it is reached.
type Violation struct {
	GOOS   string
	Dep    string   // the forbidden package
	Chain  []string // from a fenced package to Dep, each importing the next
	Reason string
}

func (v Violation) String() string {
	return fmt.Sprintf("GOOS=%s: %s (%s)", v.GOOS, strings.Join(v.Chain, " -> "), v.Reason)
}

// pkg is what go list -json says of one package.
type pkg struct {
	ImportPath string
	Standard   bool
	DepOnly    bool
	Imports    []string
	Error      *struct{ Err string }
}

// Violations lists the fence's broken rules for the module in dir.
func (f Fence) Violations(dir string) ([]Violation, error) {
	if len(f.Packages) == 0 {
		return nil, errors.New("deptest: a fence with no packages checks nothing")
	}
	if len(f.Forbidden) == 0 && !f.StdlibOnly {
		return nil, errors.New("deptest: a fence with nothing forbidden checks nothing")
	}
	goos := f.GOOS
	if goos == nil {
		goos = []string{"linux", "darwin"}
	}
	var out []Violation
	for _, g := range goos {
		pkgs, err := list(dir, g, f.Packages)
		if err != nil {
			return nil, err
		}
		out = append(out, f.check(g, pkgs)...)
	}
	return out, nil
}

// Check fails t for every broken rule, naming the chain of imports. It
// skips under -short, as it runs the go command.
func (f Fence) Check(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("deptest runs go list")
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := f.Violations(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("forbidden dependency: %s", v)
	}
}

// ModuleRoot is the directory of the go.mod of the package under test.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("deptest: cannot find the module root (go env GOMOD = %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}

func list(dir, goos string, patterns []string) (map[string]pkg, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-json=ImportPath,Standard,DepOnly,Imports,Error"}, patterns...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("deptest: GOOS=%s go list %v: %v\n%s", goos, patterns, err, stderr.String())
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("deptest: GOOS=%s go list %v: %w", goos, patterns, err)
		}
		if p.Error != nil && !p.DepOnly {
			// -e: a package mid-edit still lists its imports, but one that
			// does not exist would make the fence vacuous.
			if len(p.Imports) == 0 {
				return nil, fmt.Errorf("deptest: GOOS=%s %s: %s", goos, p.ImportPath, p.Error.Err)
			}
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("deptest: GOOS=%s go list %v listed nothing", goos, patterns)
	}
	return pkgs, nil
}

// reason says why dep is forbidden, or "" if it is not.
func (f Fence) reason(dep string, roots map[string]bool, p pkg) string {
	for path, why := range f.Forbidden {
		if dep == path {
			return why
		}
		if prefix, ok := strings.CutSuffix(path, "/..."); ok && (dep == prefix || strings.HasPrefix(dep, prefix+"/")) {
			return why
		}
	}
	if f.StdlibOnly && !p.Standard && !roots[dep] {
		return "the fenced packages may use the standard library only"
	}
	return ""
}

func (f Fence) check(goos string, pkgs map[string]pkg) []Violation {
	roots := map[string]bool{}
	for path, p := range pkgs {
		if !p.DepOnly {
			roots[path] = true
		}
	}
	var out []Violation
	for _, dep := range slices.Sorted(maps.Keys(pkgs)) {
		why := f.reason(dep, roots, pkgs[dep])
		if why == "" {
			continue
		}
		out = append(out, Violation{GOOS: goos, Dep: dep, Chain: chain(pkgs, roots, dep), Reason: why})
	}
	return out
}

// chain finds a shortest import path from any root to dep.
func chain(pkgs map[string]pkg, roots map[string]bool, dep string) []string {
	prev := map[string]string{}
	var queue []string
	for _, r := range slices.Sorted(maps.Keys(roots)) {
		prev[r] = ""
		queue = append(queue, r)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var c []string
			for ; p != ""; p = prev[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return c
		}
		for _, next := range pkgs[p].Imports {
			if _, seen := prev[next]; !seen {
				prev[next] = p
				queue = append(queue, next)
			}
		}
	}
	return []string{dep}
}

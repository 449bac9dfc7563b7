package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// manText is a man page with the roff markup that matters here undone:
// "\-" is "-", and font requests (.B, .BR, ...) are dropped.
func manText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), `\-`, "-")
	s = regexp.MustCompile(`(?m)^\.(B|BR|RB|IR|BI|I|TP|PP|br|RS|RE|nf|fi)\b ?`).ReplaceAllString(s, "")
	return regexp.MustCompile(`\\f[BIRP]`).ReplaceAllString(s, "")
}

// The packaged man page says what `raspi-mcp --help` says: every command
// and every flag of the usage text is in raspi-mcp(1), and every command
// the man page describes is one the binary has.
func TestManPageMatchesUsage(t *testing.T) {
	man := manText(t, "../../packaging/man/raspi-mcp.1")
	flag := regexp.MustCompile(`-{1,2}[a-z][a-z-]*`)
	commands := map[string]bool{}
	for _, line := range strings.Split(usage, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "raspi-mcp" {
			continue
		}
		cmd := fields[1]
		if len(fields) > 2 && (cmd == "audit" || cmd == "config" || cmd == "token") {
			cmd += " " + fields[2]
		}
		commands[cmd] = true
		if !strings.Contains(man, "raspi-mcp "+cmd) {
			t.Errorf("raspi-mcp(1) has no synopsis for %q", cmd)
		}
		for _, f := range flag.FindAllString(strings.Join(fields[2:], " "), -1) {
			if !strings.Contains(man, f) {
				t.Errorf("raspi-mcp(1) does not mention %s of %q", f, cmd)
			}
		}
	}
	// The COMMANDS section: one ".TP" + ".B command" entry per command.
	raw := strings.ReplaceAll(string(mustRead(t, "../../packaging/man/raspi-mcp.1")), `\-`, "-")
	entries := regexp.MustCompile(`(?m)^\.TP\n\.B ([a-z ]+)$`).FindAllStringSubmatch(raw, -1)
	if len(entries) < len(commands) {
		t.Errorf("raspi-mcp(1) describes %d commands, --help lists %d", len(entries), len(commands))
	}
	for _, m := range entries {
		if !commands[m[1]] {
			t.Errorf("raspi-mcp(1) describes %q, which --help does not list", m[1])
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// raspi-mcp-helper(8) documents each flag of the helper and of
// raspi-mcp-simhelper, and those of the daemon both run.
func TestHelperManPageHasItsFlags(t *testing.T) {
	man := manText(t, "../../packaging/man/raspi-mcp-helper.8")
	found := 0
	for _, f := range []string{"../raspi-mcp-helper/main.go", "../raspi-mcp-helper/selfupdate.go", "../raspi-mcp-simhelper/main.go", "../../privhelper/daemon/daemon.go"} {
		src := string(mustRead(t, f))
		for _, m := range regexp.MustCompile(`\.(?:String|Bool|Duration|Int)\("([a-z-]+)"`).FindAllStringSubmatch(src, -1) {
			found++
			if !strings.Contains(man, "--"+m[1]) {
				t.Errorf("raspi-mcp-helper(8) does not mention --%s (%s)", m[1], f)
			}
		}
	}
	if found < 7 { // config, version, id, power-log, sim-units, sim-procs, sim-apt
		t.Fatalf("found %d flags in the helpers' sources: the pattern no longer matches how they declare them", found)
	}
}

// Package install is the end-to-end test of the path a Pi owner takes: the
// README's install section, run command by command against a Debian VM
// (real systemd, sshd, gpio-sim) with the freshly built .deb, then an MCP
// client on the host over `ssh -T`. See install_test.go.
package install

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Block is one fenced code block of the README's install section.
type Block struct {
	Section string // the ### heading it is under: Install, Upgrade, Remove
	Where   string // "laptop", "pi" or "ssh-config"
	Text    string
}

// The section of README.md that make test-e2e runs.
const installHeading = "## Install on a Raspberry Pi"

// ReadmeBlocks returns the install section's code blocks in order. A shell
// block must say where it runs in its first line ("# on the laptop..." or
// "# on the Pi..."), so that a command added to the README can never be
// skipped silently by the test.
func ReadmeBlocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out               []Block
		inSection, inCode bool
		sub, lang         string
		buf               []string
		lineNo            int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		lineNo++
		switch {
		case inCode && line == "```":
			inCode = false
			if !inSection {
				continue
			}
			b, err := classify(sub, lang, buf)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, lineNo, err)
			}
			out = append(out, b)
		case inCode:
			buf = append(buf, line)
		case strings.HasPrefix(line, "```"):
			inCode, lang, buf = true, strings.TrimPrefix(line, "```"), nil
		case strings.HasPrefix(line, "## "):
			inSection = line == installHeading
		case inSection && strings.HasPrefix(line, "### "):
			sub = strings.TrimPrefix(line, "### ")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no code blocks under %q", path, installHeading)
	}
	return out, nil
}

func classify(sub, lang string, lines []string) (Block, error) {
	b := Block{Section: sub, Text: strings.Join(lines, "\n") + "\n"}
	first := ""
	if len(lines) > 0 {
		first = lines[0]
	}
	switch {
	case lang == "ssh-config":
		b.Where = "ssh-config"
	case lang == "sh" && strings.HasPrefix(first, "# on the laptop"):
		b.Where = "laptop"
	case lang == "sh" && strings.HasPrefix(first, "# on the Pi"):
		b.Where = "pi"
	default:
		return b, fmt.Errorf("a %q block under %q that says neither \"# on the laptop\" nor \"# on the Pi\" first", lang, sub)
	}
	return b, nil
}

// The ### sections of the install section, as the VM test runs them.
const (
	secInstall = "Install"                // the package built on the laptop, copied, apt install ./
	secUpgrade = "Upgrade"                // the same with a newer build
	secRepo    = "From an apt repository" // the signed repository's route
	secRemove  = "Remove"
)

// Select returns the blocks of one ### section.
func Select(blocks []Block, section string) []Block {
	var out []Block
	for _, b := range blocks {
		if b.Section == section {
			out = append(out, b)
		}
	}
	return out
}

// Runs in every `make test`: the README's install section parses, every
// shell block says where it runs, and the steps the VM test relies on are
// there. The VM test (install_test.go) runs them.
func TestReadmeInstallSectionIsRunnable(t *testing.T) {
	blocks, err := ReadmeBlocks("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ section, where, text string }{
		{secInstall, "laptop", readmeBuild},
		{secInstall, "laptop", "scp dist/raspi-mcp_*_arm64.deb " + readmePi + ":"},
		{secInstall, "pi", "sudo apt install ./raspi-mcp_*_arm64.deb\n"},
		{secInstall, "pi", "sudo usermod -aG raspi-mcp $USER"},
		{secInstall, "laptop", `restrict,command="/usr/bin/raspi-mcp stdio"`},
		{secInstall, "ssh-config", "Host pi-mcp"},
		{secInstall, "ssh-config", "User " + readmeUser + "\n"},
		{secUpgrade, "laptop", readmeBuild},
		{secUpgrade, "pi", "sudo apt install ./raspi-mcp_*_arm64.deb\n"},
		{secRepo, "pi", "curl -fsSL " + readmeRepo + "/raspi-mcp-archive-keyring.gpg | sudo tee /etc/apt/keyrings/raspi-mcp-archive-keyring.gpg"},
		{secRepo, "pi", "URIs: " + readmeRepo + "\nSuites: stable\nComponents: main\nSigned-By: /etc/apt/keyrings/raspi-mcp-archive-keyring.gpg\n"},
		{secRepo, "pi", "sudo apt update && sudo apt install raspi-mcp\n"},
		{secRepo, "pi", "sudo apt update && sudo apt upgrade\n"},
		{secRemove, "pi", "sudo dpkg -r raspi-mcp"},
		{secRemove, "pi", "sudo dpkg --purge raspi-mcp"},
	} {
		found := false
		for _, b := range Select(blocks, want.section) {
			found = found || (b.Where == want.where && strings.Contains(b.Text, want.text))
		}
		if !found {
			t.Errorf("README install section: no %s block under %q with %q", want.where, want.section, want.text)
		}
	}
}

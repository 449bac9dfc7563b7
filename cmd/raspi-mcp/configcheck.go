package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/raspi-mcp/raspi-mcp/config"
)

func cmdConfig(args []string) error { return runConfig(args, os.Stdout, os.Stderr) }

// runConfig is `raspi-mcp config check FILE`: every problem of the file and
// its drop-ins at once, each with its file and line, then the warnings of
// a file that loads (settings that are valid but probably not meant).
func runConfig(args []string, stdout, stderr io.Writer) error {
	cmd := newCommand("config check", "FILE", "validate a configuration file and its config.d drop-ins: every unknown key, wrong type and bad value, with its line")
	if len(args) == 0 || args[0] != "check" {
		sub := ""
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			sub, args = args[0], args[1:]
		}
		return groupUsage("config", "check a configuration file", sub, args, "raspi-mcp config check FILE")
	}
	pos, err := cmd.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cmd.wrongArgs("config check takes one FILE")
	}
	file := pos[0]
	c, err := config.Load(file)
	var probs config.Problems
	if errors.As(err, &probs) {
		for _, p := range probs {
			fmt.Fprintln(stderr, p.Error())
		}
		n := "1 problem"
		if len(probs) > 1 {
			n = fmt.Sprintf("%d problems", len(probs))
		}
		return &exitError{code: 1, msg: fmt.Sprintf("%s: %s; the agent and the helper refuse to start with it", file, n)}
	}
	if err != nil {
		return err
	}
	files := file
	if dropins, _ := config.DropIns(file); len(dropins) > 0 {
		files += " + " + strings.Join(dropins, " + ")
	}
	var ups []string
	for _, u := range c.Upstreams {
		if u.IsEnabled() {
			ups = append(ups, u.Name)
		}
	}
	fmt.Fprintf(stdout, "%s: ok (writes on: %s; %d users and %d groups mapped to roles; upstreams: %s)\n", files,
		orNone(strings.Join(c.WritesOn(), ", ")), len(c.Roles.Users), len(c.Roles.Groups), orNone(strings.Join(ups, ", ")))
	for _, w := range c.Warnings() {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	return nil
}

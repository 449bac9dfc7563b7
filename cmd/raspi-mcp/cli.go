package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand's help: what it does, its synopsis (flags and
// named positional arguments) and its flags, printed by `raspi-mcp CMD --help`.
type command struct {
	name     string // "audit tail"
	synopsis string // "[--dir DIR] [-n N] [--json]"
	summary  string // one line: what it does
	fs       *flag.FlagSet
}

// newCommand makes the FlagSet of a subcommand. Its errors come back to
// the caller (ContinueOnError) so a bad flag prints the usage and exits 2
// and --help prints it and exits 0, the way every other tool does it.
func newCommand(name, synopsis, summary string) *command {
	c := &command{name: name, synopsis: synopsis, summary: summary, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(io.Discard)
	return c
}

func (c *command) usageLine() string {
	return "usage: raspi-mcp " + c.name + " " + c.synopsis
}

// usage writes the command's help: the summary, the synopsis, and each flag
// with two dashes (one for single letters) and its argument's name.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "raspi-mcp %s: %s\n\n%s\n", c.name, c.summary, c.usageLine())
	var lines [][2]string
	width := 0
	c.fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		left := dash + f.Name
		if arg != "" {
			left += " " + strings.ToUpper(arg)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			text += " (default " + f.DefValue + ")"
		}
		width = max(width, len(left))
		lines = append(lines, [2]string{left, text})
	})
	if len(lines) > 0 {
		fmt.Fprintln(w, "\nflags:")
		for _, l := range lines {
			fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], l[1])
		}
	}
}

// parse reads flags wherever they stand, before or after the positional
// arguments (`call TOOL --json` as well as `call --json TOOL`); after "--"
// everything is positional. It returns the positional arguments, or an
// exitError: 0 after printing the help, 2 after a bad flag.
func (c *command) parse(args []string) ([]string, error) {
	var rest []string
	if i := indexOf(args, "--"); i >= 0 {
		args, rest = args[:i], args[i+1:]
	}
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.usage(os.Stdout)
				return nil, &exitError{code: 0}
			}
			c.usage(os.Stderr)
			return nil, &exitError{code: 2, msg: err.Error()}
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// wrongArgs is the exit for a wrong number of positional arguments.
func (c *command) wrongArgs(why string) error {
	c.usage(os.Stderr)
	return &exitError{code: 2, msg: why}
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

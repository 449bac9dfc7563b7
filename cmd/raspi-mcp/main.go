// Command raspi-mcp is the MCP agent of a Raspberry Pi and its command line:
//
//	raspi-mcp serve [--config FILE] [--sim [--dir DIR]]   run the agent (laptop mode with --sim)
//	raspi-mcp stdio [--dir DIR]                            bridge stdin/stdout to the agent (for ssh -T pi raspi-mcp stdio)
//	raspi-mcp status [--dir DIR] [--json]                  is everything up, what happened lately
//	raspi-mcp call [--dir DIR] TOOL [JSON]                 call one tool
//	raspi-mcp metrics [--dir DIR] [--hours H]              sparklines of the recent history
//	raspi-mcp audit verify|tail [--dir DIR] [--db FILE]    check or show the audit trail
//	raspi-mcp config check FILE                            validate a configuration file
//	raspi-mcp selftest [--dir DIR]                         in-process check of this binary on the simulated board
//	raspi-mcp version
package main

import (
	"errors"
	"fmt"
	"os"
)

// version and commit are set at link time (-X main.version=... -X main.commit=...).
var (
	version = "0.1.0-dev"
	commit  = "dev"
)

const usage = `raspi-mcp: MCP server for a Raspberry Pi

usage:
  raspi-mcp serve [--config FILE]           run the agent (systemd runs this)
  raspi-mcp serve --sim [--dir DIR]         laptop mode: agent + helper on a simulated board
  raspi-mcp stdio [--dir DIR]               MCP over stdin/stdout, for: ssh -T pi raspi-mcp stdio
  raspi-mcp status [--dir DIR] [--json]     agent, helper, audit and recent problems
  raspi-mcp call [--dir DIR] TOOL [JSON]    call one tool, e.g. raspi-mcp call system_get_health_snapshot
  raspi-mcp metrics [--dir DIR] [--hours H] a small chart of the last hours (cpu, temperature, memory, load)
  raspi-mcp audit verify [--dir DIR]        check the audit trail's hash chain
  raspi-mcp audit tail [--dir DIR] [-n N]   newest audit records
  raspi-mcp config check FILE               validate a configuration file
  raspi-mcp selftest [--dir DIR]            check this binary: agent, helper and store in one process, simulated board
  raspi-mcp version

--dir DIR points every client command at a laptop-mode agent started with --sim --dir DIR.
`

// exitError carries a specific exit code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		err = cmdServe(args)
	case "stdio":
		err = cmdStdio(args)
	case "status":
		err = cmdStatus(args)
	case "call":
		err = cmdCall(args)
	case "audit":
		err = cmdAudit(args)
	case "metrics":
		err = cmdMetrics(args)
	case "config":
		err = cmdConfig(args)
	case "selftest":
		err = cmdSelftest(args)
	case "version", "--version", "-v":
		fmt.Printf("raspi-mcp %s (%s)\n", version, commit)
	case "help", "--help", "-h":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "raspi-mcp: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "raspi-mcp:", ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "raspi-mcp:", err)
		os.Exit(1)
	}
}

// Command raspi-mcp is the MCP agent of a Raspberry Pi and its command line.
// `raspi-mcp --help` lists the commands; `raspi-mcp CMD --help` explains one.
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
	// selfCheckFault is empty in every release. A test build sets it
	// (-X main.selfCheckFault=...) to make a package whose agent fails the
	// start-up check it reports after manage_update_server, so the rollback
	// is tested on a really broken release. No config or flag reaches it.
	selfCheckFault = ""
)

// usage is `raspi-mcp --help`; the man page test checks raspi-mcp(1) has
// every command and flag of it.
const usage = `raspi-mcp: MCP server for a Raspberry Pi, and its command line

usage:
  raspi-mcp serve [--config FILE]               run the agent (systemd runs this on a Pi)
  raspi-mcp serve --sim [--dir DIR]             laptop mode: agent + helper on a simulated board
  raspi-mcp stdio [--dir DIR]                   MCP over stdin/stdout, for: ssh -T pi raspi-mcp stdio
  raspi-mcp status [--dir DIR] [--json] [--check]
                                                agent, helper, audit and recent problems;
                                                --check: the live device's self-test
  raspi-mcp tools [--dir DIR] [--json] [NAME]   the tools with risk and role, or one tool's parameters
  raspi-mcp call [--dir DIR] [--json] [--timeout D] TOOL [JSON | KEY=VALUE...]
                                                call one tool: raspi-mcp call gpio_read_pin pin=17
  raspi-mcp metrics [--dir DIR] [--hours H]     a small chart of the last hours, with units
  raspi-mcp audit verify [--dir DIR] [--db FILE] check the audit trail's hash chain
  raspi-mcp audit tail [--dir DIR] [-n N]       the newest audit records
  raspi-mcp config check FILE                   validate a configuration file
  raspi-mcp token create NAME --role ROLE [--expires 90d] [--config FILE]
                                                a bearer token for the HTTP endpoint (as root)
  raspi-mcp token list [--json] [--config FILE] the HTTP endpoint's tokens, never a secret
  raspi-mcp token revoke NAME [--config FILE]   delete a token: its next request is refused
  raspi-mcp pair NAME --role ROLE [--expires 90d] [--address HOST:PORT] [--config FILE]
                                                a laptop's token with the Pi's address and certificate
                                                fingerprint, as one line and a QR code (as root)
  raspi-mcp approve [--dir DIR] [--wait DURATION] [ID]
                                                at the Pi, as root or a [guard] approver: show the calls
                                                that wait for the device and answer each, or approve ID
  raspi-mcp deny [--dir DIR] ID                 decline the call ID that waits for the device
  raspi-mcp sim press [--long] [--wait D] [--dir DIR]
                                                laptop mode: press the simulated approval button
                                                (short approves the call waiting, --long declines it)
  raspi-mcp selftest [--dir DIR]                check this binary: agent, store and an MCP session, simulated board
  raspi-mcp version                             print the version

Client commands find the agent by themselves: the Pi's (/run/raspi-mcp/mcp.sock), else the
laptop-mode agent of "raspi-mcp serve --sim"; --dir DIR points them at one started with --dir DIR.
"raspi-mcp COMMAND --help" explains a command and all its flags.
`

// exitError carries a specific exit code; msg, when set, goes to stderr.
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
	case "tools":
		err = cmdTools(args)
	case "call":
		err = cmdCall(args)
	case "audit":
		err = cmdAudit(args)
	case "metrics":
		err = cmdMetrics(args)
	case "config":
		err = cmdConfig(args)
	case "token":
		err = cmdToken(args)
	case "pair":
		err = cmdPair(args)
	case "selftest":
		err = cmdSelftest(args)
	case "sim":
		err = cmdSim(args)
	case "approve":
		err = cmdApprove(args, false)
	case "deny":
		err = cmdApprove(args, true)
	case "version", "--version", "-version", "-v":
		fmt.Printf("raspi-mcp %s (%s)\n", version, commit)
	case "help", "--help", "-help", "-h":
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

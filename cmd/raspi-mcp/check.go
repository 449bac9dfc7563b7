package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent"
)

// statusCheck is `raspi-mcp status --check`: the agent's selftest_run, the
// live device's pass/warn/fail matrix, with the fix for each failure. Exit
// 0 when nothing failed (warnings allowed), 2 when a check failed; the
// caller exits 1 when the agent itself is down.
func statusCheck(ctx context.Context, s *mcp.ClientSession, out io.Writer, asJSON bool) error {
	var st agent.SelftestOut
	if _, err := callTool(ctx, s, "selftest_run", nil, &st); err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(out, string(b))
	} else {
		printCheck(out, st)
	}
	if st.Status == agent.CheckFail {
		return &exitError{code: 2}
	}
	return nil
}

func printCheck(out io.Writer, st agent.SelftestOut) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, c := range st.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(c.Status), c.Name, c.Detail)
		if c.FixHint != "" && c.Status != agent.CheckPass {
			fmt.Fprintf(tw, "\t\t  fix: %s\n", c.FixHint)
		}
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%s: %d pass, %d warn, %d fail (%s, %s mode, raspi-mcp %s)\n", strings.ToUpper(st.Status), st.Pass, st.Warn, st.Fail, orNone(st.Device), st.Mode, st.Version)
}

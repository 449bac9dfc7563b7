package agent

import (
	"fmt"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Critical tools run in two steps, change_prepare and change_commit: the
// pipeline's (agent/tool/change.go), registered here with the catalog.

// The change tools' arguments and results.
type (
	changePrepareIn  = tool.PrepareIn
	changePrepareOut = tool.PrepareOut
	changeCommitIn   = tool.CommitIn
	changeCommitOut  = tool.CommitOut
)

func (a *Agent) registerChange() {
	tool.Add(a.tools, tool.Spec[changePrepareIn, changePrepareOut]{
		ID: tool.PrepareID, Title: "Prepare a change",
		Description: "Stage a critical call: checks policy, returns its plan and a single-use token for change_commit.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Risk: tool.RiskLow},
		Props:       []tool.Prop{tool.P("tool", tool.MinLen(1), tool.MaxLen(100))},
		OutProps:    []tool.Prop{tool.P("expires_at", tool.Format("date-time"))},
		Example:     &changePrepareIn{Tool: "system_shutdown"},
		Run:         a.pipe.Prepare,
		Summary: func(_ changePrepareIn, o changePrepareOut) string {
			return fmt.Sprintf("prepared %s; commit with change_commit before %s", o.Tool, o.ExpiresAt)
		},
	})
	tool.Add(a.tools, tool.Spec[changeCommitIn, changeCommitOut]{
		ID: tool.CommitID, Title: "Commit a change",
		Description: "Run the call a change_prepare token stands for.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Risk: tool.RiskLow},
		Destructive: true,
		Props:       []tool.Prop{tool.P("token", tool.MinLen(8), tool.MaxLen(64))},
		Example:     &changeCommitIn{Token: "tok-does-not-exist"}, // passes the schema; the commit finds no such token
		Run:         a.pipe.Commit,
		Summary:     func(_ changeCommitIn, o changeCommitOut) string { return "committed " + o.Tool },
	})
}

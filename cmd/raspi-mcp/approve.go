package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/approval"
)

// cmdApprove is `raspi-mcp approve` and `raspi-mcp deny`: the owner at the
// Pi answers a call that waits for the device. The agent knows who runs it
// from the console socket's peer credentials (root, or a user of [guard]
// approvers); nothing an MCP client holds gets there.
func cmdApprove(args []string, deny bool) error {
	name := "approve"
	if deny {
		name = "deny"
	}
	cmd := newCommand(name, "[--dir DIR] [--wait DURATION] [ID]",
		"answer a call that waits for an approval on this Pi: without ID, show each and ask; with ID, "+name+" it")
	var w where
	w.flags(cmd.fs)
	wait := cmd.fs.Duration("wait", 0, "with no ID: when nothing waits, wait this long for a call to arrive (e.g. 2m)")
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return cmd.wrongArgs(name + " takes at most one ID")
	}
	path := approval.SocketPath(w.agentSocket())
	ctx, cancel := context.WithTimeout(context.Background(), *wait+30*time.Second)
	defer cancel()
	if len(pos) == 1 {
		op := "approve"
		if deny {
			op = "deny"
		}
		r, err := approval.Ask(ctx, path, approval.Request{Op: op, ID: pos[0]})
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		fmt.Printf("call %s %s by %s\n", pos[0], done(op), r.Approver)
		return nil
	}
	if deny {
		return cmd.wrongArgs("deny needs the ID of the call (raspi-mcp approve lists them)")
	}
	r, err := approval.Ask(ctx, path, approval.Request{Op: "list", WaitMS: wait.Milliseconds()})
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	if len(r.Waiting) == 0 {
		fmt.Println("nothing waits for an approval on this Pi")
		return nil
	}
	return askEach(ctx, os.Stdin, os.Stdout, path, r.Waiting)
}

// askEach shows each waiting call and asks on the terminal. The answer is
// bound to what was shown: a call that changed meanwhile is not answered.
func askEach(ctx context.Context, in io.Reader, out io.Writer, path string, ws []approval.Waiting) error {
	lines := bufio.NewScanner(in)
	for _, w := range ws {
		fmt.Fprint(out, describeWaiting(w))
		fmt.Fprintf(out, "Approve call %s? [y/N] ", w.ID)
		answer := ""
		if lines.Scan() {
			answer = strings.ToLower(strings.TrimSpace(lines.Text()))
		}
		op := "deny"
		if answer == "y" || answer == "yes" {
			op = "approve"
		}
		if _, err := approval.Ask(ctx, path, approval.Request{Op: op, ID: w.ID, Bind: w.Bind}); err != nil {
			fmt.Fprintf(out, "  %v\n", err)
			continue
		}
		fmt.Fprintf(out, "  call %s: %s\n", w.ID, done(op))
	}
	return nil
}

// describeWaiting is one waiting call as the person at the console reads
// it: who, the tool, the plan, then the model's words, quoted.
func describeWaiting(w approval.Waiting) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\ncall %s: %s (%s) asks to run %s (%s risk) over %s\n", w.ID, w.Principal, w.Role, w.Name, w.Risk, w.Transport)
	if w.Plan != "" {
		fmt.Fprintf(&b, "  plan:      %s\n", w.Plan)
	}
	fmt.Fprintf(&b, "  arguments: %s\n", w.Arguments)
	fmt.Fprintf(&b, "  why here:  %s\n", w.Why)
	if w.Reason != "" {
		fmt.Fprintf(&b, "  reason (the model's words): %q\n", w.Reason)
	}
	if w.Intent != "" {
		fmt.Fprintf(&b, "  intent (the model's words): %q\n", w.Intent)
	}
	fmt.Fprintf(&b, "  waiting since %s, declined at %s\n", w.Since.Local().Format("15:04:05"), w.Expires.Local().Format("15:04:05"))
	return b.String()
}

// done is an answer in the past tense.
func done(op string) string {
	if op == "approve" {
		return "approved"
	}
	return "denied"
}

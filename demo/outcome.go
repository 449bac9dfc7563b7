package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outcome is what a call showed a person: done or refused (with the
// error's code), and whether someone was asked and what they answered.
type outcome struct {
	Code   string // the error's code; "" when the call was done
	Person string // who was asked and their answer; "" when nobody was
}

// What a person did, as the audit record's channel and decision say.
const (
	acceptedAtClient   = "the person accepted at the client"
	declinedAtClient   = "the person declined at the client"
	approvedWithButton = "approved on the device with the button"
	declinedWithButton = "declined on the device with the button"
	approvedAtConsole  = "approved on the device at the console"
	declinedAtConsole  = "declined on the device at the console"
)

// done is a call that did what it was asked, nobody asked.
var done = outcome{}

// refused is a call refused with code, nobody asked.
func refused(code string) outcome { return outcome{Code: code} }

func (o outcome) String() string {
	s := "done"
	if o.Code != "" {
		s = "refused (" + o.Code + ")"
	}
	if o.Person != "" {
		s += ", " + o.Person
	}
	return s
}

// personOf reads who answered a call from its audit record: the channel
// that approved or refused it and the decision.
func personOf(channel, decision string) string {
	ok := decision == "allow"
	pick := func(yes, no string) string {
		if ok {
			return yes
		}
		return no
	}
	switch {
	case channel == "client:elicitation":
		return pick(acceptedAtClient, declinedAtClient)
	case channel == "button":
		return pick(approvedWithButton, declinedWithButton)
	case channel == "console" || strings.HasPrefix(channel, "console:"):
		return pick(approvedAtConsole, declinedAtConsole)
	}
	return "" // the client's own guard (confirm, a change token), or none
}

// outcomeOf finds what a call showed: its error code from the result, and
// who was asked from the call's audit record, the agent's own account.
// A call without a record (a read) asked nobody, unless the demo's person
// answered a question during it, which is then a wrong story too.
func (d *demo) outcomeOf(ctx context.Context, cs *mcp.ClientSession, res *mcp.CallToolResult, m map[string]any) (outcome, error) {
	var o outcome
	if res.IsError {
		o.Code = "error"
		if e, ok := m["error"].(map[string]any); ok {
			if c, _ := e["code"].(string); c != "" {
				o.Code = c
			}
		}
	}
	var client string
	for len(d.asked) > 0 {
		client = <-d.asked
	}
	ref, _ := res.Meta["audit_ref"].(string)
	if ref == "" {
		switch client {
		case "accept":
			o.Person = acceptedAtClient
		case "decline":
			o.Person = declinedAtClient
		}
		return o, nil
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(ref, "audit:"), 10, 64)
	if err != nil {
		return o, fmt.Errorf("demo: audit_ref %q is not audit:N", ref)
	}
	log, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "logs_get_recent_audit_logs", Arguments: map[string]any{"limit": 20}})
	if err != nil {
		return o, fmt.Errorf("demo: reading the audit record of %s: %w", ref, err)
	}
	var page struct {
		Entries []struct {
			Seq      uint64 `json:"seq"`
			Decision string `json:"decision"`
			Channel  string `json:"channel"`
		} `json:"entries"`
	}
	if err := remarshal(log.StructuredContent, &page); err != nil {
		return o, fmt.Errorf("demo: reading the audit record of %s: %w", ref, err)
	}
	// The step's records are those after the last step's: a commit
	// records itself and the call it ran, which the device approved.
	found := false
	for _, e := range page.Entries {
		if e.Seq == seq {
			found = true
		}
		if e.Seq > d.lastSeq && e.Seq <= seq {
			if p := personOf(e.Channel, e.Decision); p != "" {
				o.Person = p
			}
		}
	}
	if !found {
		return o, fmt.Errorf("demo: the audit trail has no record %s among its newest 20", ref)
	}
	d.lastSeq = seq
	return o, nil
}

// check compares what a step showed with what its title promised, and
// says so loudly when they differ.
func (d *demo) check(title string, want, got outcome) {
	d.checked++
	if want == got {
		return
	}
	d.wrong = append(d.wrong, fmt.Sprintf("%q promised %s, showed %s", title, want, got))
	d.scr.mark(2, "MISMATCH", "the title promises: "+want.String())
	d.scr.mark(2, "MISMATCH", "the call showed:    "+got.String())
}

// verdict ends the demo: an error when a step told a wrong story, else
// what a person can type next.
func (d *demo) verdict() error {
	s := d.scr
	if len(d.wrong) > 0 {
		s.step(fmt.Sprintf("MISMATCH: %d of %d steps showed something else than their titles say", len(d.wrong), d.checked))
		for _, w := range d.wrong {
			s.mark(2, "✗", w)
		}
		return fmt.Errorf("%d of %d steps showed something else than their titles say (the demo's story is out of date)", len(d.wrong), d.checked)
	}
	s.step(fmt.Sprintf("Checked: each of the %d calls above showed what its title says", d.checked))
	raspi := filepath.Join(d.binDir, "raspi-mcp")
	s.step("Your turn: the same simulated board, with your own assistant")
	s.line(2, "`%s serve --sim` keeps the agent running and prints the command for your MCP client (Claude, Cursor, VS Code, ...); `make install` puts raspi-mcp on your PATH.", raspi)
	s.line(0, "Next, type: %s serve --sim", raspi)
	return nil
}

// remarshal turns the SDK's decoded JSON value into v.
func remarshal(from, v any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

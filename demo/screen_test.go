package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// Lines wrap at the width at spaces, continue under their text, keep a
// table's leading spaces, and cut JSON after a comma rather than anywhere.
func TestScreenWraps(t *testing.T) {
	var b bytes.Buffer
	s := newScreen(&b, 40)
	s.step("a title long enough to need a second line here")
	s.mark(2, "✓", "done, and a summary that goes on past the edge")
	s.line(4, "%6s %s", "PID", "USER")
	s.json(4, `{"model":"Raspberry Pi 4","mode":"sim","uptime_s":3600}`)
	s.block(4, "  indented\n"+strings.Repeat("x", 50))
	want := `
== a title long enough to need a second
   line here
  ✓ done, and a summary that goes on
    past the edge
       PID USER
    {"model":"Raspberry Pi 4",
    "mode":"sim","uptime_s":3600}
      indented
    xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
      xxxxxxxxxxxxxx
`
	if b.String() != want {
		t.Errorf("screen:\n%s\nwant:\n%s", b.String(), want)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if utf8.RuneCountInString(l) > 40 {
			t.Errorf("line wider than 40: %q", l)
		}
	}
}

// A step whose call showed something else than its title promised is
// printed as a MISMATCH and fails the demo; a true story ends with what to
// type next.
func TestCheckFailsTheDemoOnAMismatch(t *testing.T) {
	var b bytes.Buffer
	d := &demo{scr: newScreen(&b, 200), binDir: "bin"}
	d.check("Shutdown: the person is asked, declines", outcome{Code: "permission_denied", Person: declinedAtConsole}, refused("failed_precondition"))
	d.check("A pin the owner did not allow is refused", refused("permission_denied"), refused("permission_denied"))
	err := d.verdict()
	if err == nil || !strings.Contains(err.Error(), "1 of 2 steps") {
		t.Errorf("verdict = %v, want 1 of 2 steps wrong", err)
	}
	out := b.String()
	for _, w := range []string{"MISMATCH the title promises: refused (permission_denied), declined on the device at the console",
		"MISMATCH the call showed:    refused (failed_precondition)"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "Next, type") {
		t.Errorf("a wrong story still ends with what to type next:\n%s", out)
	}

	b.Reset()
	d = &demo{scr: newScreen(&b, 80), binDir: "bin"}
	d.check("A pin the owner did not allow is refused", refused("permission_denied"), refused("permission_denied"))
	if err := d.verdict(); err != nil {
		t.Errorf("verdict of a true story: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); lines[len(lines)-1] != "Next, type: bin/raspi-mcp serve --sim" {
		t.Errorf("last line %q", lines[len(lines)-1])
	}
}

// Who answered comes from the audit record's channel and decision.
func TestPersonOf(t *testing.T) {
	for _, c := range []struct{ channel, decision, want string }{
		{"client:elicitation", "allow", acceptedAtClient},
		{"client:elicitation", "declined_by_user", declinedAtClient},
		{"button", "allow", approvedWithButton},
		{"button", "declined_by_user", declinedWithButton},
		{"console:root", "declined_by_user", declinedAtConsole},
		{"console:root", "allow", approvedAtConsole},
		{"client:confirm", "allow", ""},
		{"client:change_token", "allow", ""},
		{"", "deny", ""},
	} {
		if got := personOf(c.channel, c.decision); got != c.want {
			t.Errorf("personOf(%q, %q) = %q, want %q", c.channel, c.decision, got, c.want)
		}
	}
}

package units

import (
	"slices"
	"testing"
)

// verifyBad is what `systemd-analyze verify` printed on Debian trixie
// (systemd 257) for a unit with an unknown key, a missing Requires= and a
// missing executable (exit status 1), plus a line about another unit.
const verifyBad = `/etc/systemd/system/probe-bad.service:8: Unknown key 'Foo' in section [Service], ignoring.
/lib/systemd/system/other.service:3: Standard output type syslog is obsolete, automatically updating to journal.
probe-bad.service: Failed to create probe-bad.service/start: Unit nosuch.service not found.
probe-bad.service: Command /nonexistent/bin is not executable: No such file or directory
`

func TestVerifyFindings(t *testing.T) {
	errs, warns := verifyFindings(verifyBad, true, "probe-bad.service", "/etc/systemd/system/probe-bad.service")
	wantErrs := []string{
		"systemd-analyze: probe-bad.service: Failed to create probe-bad.service/start: Unit nosuch.service not found.",
		"systemd-analyze: probe-bad.service: Command /nonexistent/bin is not executable: No such file or directory",
	}
	wantWarns := []string{"systemd-analyze: /etc/systemd/system/probe-bad.service:8: Unknown key 'Foo' in section [Service], ignoring."}
	if !slices.Equal(errs, wantErrs) || !slices.Equal(warns, wantWarns) {
		t.Errorf("errors %q\nwarnings %q", errs, warns)
	}

	// Exit status 0: whatever it says about the unit is a warning.
	errs, warns = verifyFindings("x.service: Something odd.\n", false, "x.service", "/etc/systemd/system/x.service")
	if len(errs) != 0 || !slices.Equal(warns, []string{"systemd-analyze: x.service: Something odd."}) {
		t.Errorf("errors %q warnings %q", errs, warns)
	}
	// A failure that does not name the unit still fails the validation.
	errs, _ = verifyFindings("Failed to initialize manager: Permission denied\n", true, "x.service", "/x")
	if !slices.Equal(errs, []string{"systemd-analyze: verify failed: Failed to initialize manager: Permission denied"}) {
		t.Errorf("errors %q", errs)
	}
	if errs, warns := verifyFindings("", false, "x.service", "/x"); errs != nil || warns != nil {
		t.Errorf("clean output: %q %q", errs, warns)
	}
}

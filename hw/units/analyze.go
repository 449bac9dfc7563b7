package units

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// verifyTimeout bounds systemd-analyze verify, which loads every unit the
// checked one refers to and takes seconds on a Pi Zero.
const verifyTimeout = 60 * time.Second

// verify runs `systemd-analyze verify FRAGMENT` and sorts its findings.
// A missing or failing systemd-analyze is a warning, not an error: the
// package's own checks have run.
func (d *DBus) verify(ctx context.Context, name, frag string) (errs, warns []string) {
	if d.Analyze == "-" {
		return nil, nil
	}
	bin := d.Analyze
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("systemd-analyze"); err != nil {
			return nil, []string{"systemd-analyze not found: only raspi-mcp's own checks ran"}
		}
	}
	vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(vctx, bin, "verify", "--", frag)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C.UTF-8", "SYSTEMD_LOG_COLOR=0", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER="}
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if vctx.Err() != nil {
		return nil, []string{fmt.Sprintf("systemd-analyze verify did not finish: %v", vctx.Err())}
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, []string{fmt.Sprintf("systemd-analyze verify could not run: %v", err)}
	}
	return verifyFindings(string(out), err != nil, name, frag)
}

// verifyFindings sorts systemd-analyze verify's output. Only lines that
// mention the unit (its name, fragment or drop-ins) are kept: verify also
// loads every unit the checked one refers to and reports their problems,
// which are not this unit's. A line systemd says it is "ignoring", or
// that calls something deprecated or obsolete, is a warning; any other
// line is an error if verify failed (exit status not 0) and a warning if
// it did not. Each finding is prefixed "systemd-analyze: ".
func verifyFindings(out string, failed bool, name, frag string) (errs, warns []string) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || !(strings.Contains(line, name) || (frag != "" && strings.Contains(line, frag))) {
			continue
		}
		msg := "systemd-analyze: " + line
		lower := strings.ToLower(line)
		switch {
		case strings.Contains(lower, "ignoring") || strings.Contains(lower, "deprecated") || strings.Contains(lower, "obsolete"):
			warns = append(warns, msg)
		case failed:
			errs = append(errs, msg)
		default:
			warns = append(warns, msg)
		}
	}
	if failed && len(errs) == 0 {
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if first == "" {
			first = "no output"
		}
		errs = append(errs, "systemd-analyze: verify failed: "+first)
	}
	return errs, warns
}

package config

import (
	"strings"
	"testing"
	"time"
)

// [helper] systemd_timeout and job_timeout: the bounds on the helper's
// methods that wait on systemd (issue 28), sized for a Pi Zero by default.
func TestHelperSystemdTimeouts(t *testing.T) {
	d := Default()
	if d.Helper.SystemdTimeout.D() != 90*time.Second || d.Helper.JobTimeout.D() != 120*time.Second {
		t.Fatalf("defaults: systemd %s, job %s", d.Helper.SystemdTimeout.D(), d.Helper.JobTimeout.D())
	}
	if d.Helper.SystemdTimeout.D() <= d.Helper.Timeout.D() {
		t.Fatal("the systemd bound is not above the quick one")
	}
	c, err := Parse([]byte("[helper]\nsystemd_timeout = \"3m\"\njob_timeout = \"10s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Helper.SystemdTimeout.D() != 3*time.Minute || c.Helper.JobTimeout.D() != 10*time.Second {
		t.Fatalf("parsed: %+v", c.Helper)
	}
	for _, tc := range []struct{ in, want string }{
		{"[helper]\nsystemd_timeout = \"8s\"\n", "helper.systemd_timeout: want 10s..30m, got 8s"},
		{"[helper]\nsystemd_timeout = \"0s\"\n", "helper.systemd_timeout"},
		{"[helper]\nsystemd_timeout = \"31m\"\n", "helper.systemd_timeout"},
		{"[helper]\nsystemd_timeout = \"soon\"\n", "systemd_timeout"},
		{"[helper]\njob_timeout = \"-1s\"\n", "helper.job_timeout: want 10s..30m"},
		{"[helper]\njob_timeout = \"2h\"\n", "helper.job_timeout"},
	} {
		if _, err := Parse([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

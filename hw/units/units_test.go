package units

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	ok := map[string]string{
		"nginx":             "nginx.service",
		"nginx.service":     "nginx.service",
		"ssh.socket":        "ssh.socket",
		"multi-user.target": "multi-user.target",
		"getty@tty1":        "getty@tty1.service",
		"getty@.service":    "getty@.service",
		"foo.bar":           "foo.bar.service",
		"systemd-fsck@dev-disk-by\\x2dlabel-root.service": "systemd-fsck@dev-disk-by\\x2dlabel-root.service",
		"a:b_c":                        "a:b_c.service",
		strings.Repeat("a", MaxName-8): strings.Repeat("a", MaxName-8) + ".service",
	}
	for in, want := range ok {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "-f", "--now", ".service", "nginx service", "a/b", "../x", "a;b", "a\nb", "ä.service", "a@b@c",
		"@x.service", "$(reboot)", "a*", strings.Repeat("a", MaxName+1), strings.Repeat("a", MaxName-3),
	} {
		if got, err := Normalize(in); err == nil || !strings.HasPrefix(err.Error(), "units: ") {
			t.Errorf("Normalize(%q) = %q, %v; want a units: error", in, got, err)
		}
	}
}

func TestCheckAction(t *testing.T) {
	for _, a := range []string{Start, Stop, Restart, Reload} {
		if err := checkAction(a); err != nil {
			t.Error(err)
		}
	}
	for _, a := range []string{"", "enable", "kill", "START", "isolate"} {
		if err := checkAction(a); err == nil {
			t.Errorf("checkAction(%q) accepted", a)
		}
	}
}

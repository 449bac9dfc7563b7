package laptop

import (
	"slices"
	"strings"
	"testing"
)

// ssh gets -T and BatchMode always, a connection master only where it has
// one (not Windows) and a control directory was found, and the host after
// "--" so it cannot be read as an option; hosts that would be are refused.
func TestSSHArgs(t *testing.T) {
	s := SSH{Host: "pi@raspberrypi.local", Master: true, ControlDir: "/home/ada/.cache/raspi-mcp/ssh"}
	got := s.Args("darwin")
	want := []string{"-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o", "ControlMaster=auto",
		"-o", "ControlPath=/home/ada/.cache/raspi-mcp/ssh/%C", "-o", "ControlPersist=10m", "--", "pi@raspberrypi.local", DefaultCommand}
	if !slices.Equal(got, want) {
		t.Errorf("darwin:\n got %q\nwant %q", got, want)
	}
	got = s.Args("windows")
	if slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "Control") }) || got[0] != "-T" {
		t.Errorf("windows has no master: %q", got)
	}
	s.ControlDir = ""
	if got := s.Args("linux"); slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "Control") }) {
		t.Errorf("no control dir, no master: %q", got)
	}
	s.Command = "/opt/raspi-mcp stdio --socket /run/x.sock"
	if got := s.Args("linux"); got[len(got)-1] != s.Command {
		t.Errorf("command: %q", got)
	}
	for _, bad := range []string{"", "-oProxyCommand=sh", "pi host", "pi\n"} {
		if err := (SSH{Host: bad}).Check(); err == nil {
			t.Errorf("host %q accepted", bad)
		}
	}
	if err := (SSH{Host: "pi", Command: "  "}).Check(); err == nil {
		t.Error("a blank command accepted")
	}
	if d := ControlDir(strings.Repeat("x", 80)); d != "" {
		t.Errorf("a control dir too long for a socket: %q", d)
	}
}

// How ssh failed becomes the reason, with ssh's own last line, and a fix
// that fits it.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		stderr  string
		code    int
		goos    string
		reason  string
		fixHint string
	}{
		{"pi@127.0.0.1: Permission denied (publickey).\r\n", 255, "linux", "refused this laptop's SSH key (ssh: pi@127.0.0.1: Permission denied (publickey).)", "ssh-copy-id pi"},
		{"ssh: Could not resolve hostname nopi: Name or service not known\n", 255, "linux", `name "pi" does not resolve (ssh: Could not resolve hostname nopi`, "IP address"},
		{"ssh: connect to host 127.0.0.1 port 1: Connection refused\n", 255, "darwin", "nothing accepts SSH", "systemctl enable --now ssh"},
		{"ssh: connect to host 10.0.0.9 port 22: Connection timed out\n", 255, "linux", "cannot be reached", "is on"},
		{"@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.\n", 255, "linux", "host key (ssh: Host key verification failed.)", "ssh-keygen -R"},
		{"bash: line 1: /usr/bin/raspi-mcp: No such file or directory\n", 127, "linux", `has no "/usr/bin/raspi-mcp"`, "--command"},
		{"", 255, "windows", "status 255 and said nothing", "PROGRAMDATA"},
		{"something else\n", 3, "linux", "exit status 3) (ssh: something else)", "ssh pi true"},
	} {
		d := Classify("pi", DefaultCommand, tc.code, tc.stderr, tc.goos)
		if !strings.Contains(d.Reason, tc.reason) || !strings.Contains(d.FixHint, tc.fixHint) {
			t.Errorf("%q (exit %d): got %q / %q, want %q / %q", tc.stderr, tc.code, d.Reason, d.FixHint, tc.reason, tc.fixHint)
		}
	}
}

package laptop

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The environment ssh.exe gets from a Claude desktop app's reduced one:
// PROGRAMDATA (without which it exits 255 in silence), SystemRoot (Winsock,
// CryptoAPI), USERPROFILE (~\.ssh) and HOME are filled in; what is set is
// kept as it is, in whatever case Windows spelled it; other systems get
// their environment unchanged.
func TestSSHEnv(t *testing.T) {
	for _, tc := range []struct {
		name, goos, profile string
		env, want           []string
	}{
		{name: "claude desktop's reduced environment", goos: "windows", profile: `C:\Users\ada`,
			env: []string{`PATH=C:\Windows\system32`, `SystemDrive=D:`, `ProgramData=`},
			want: []string{`PATH=C:\Windows\system32`, `SystemDrive=D:`, `SystemRoot=D:\Windows`, `windir=D:\Windows`,
				`PROGRAMDATA=D:\ProgramData`, `ALLUSERSPROFILE=D:\ProgramData`, `USERPROFILE=C:\Users\ada`, `HOME=C:\Users\ada`}},
		{name: "nothing at all", goos: "windows",
			env:  nil,
			want: []string{`SystemRoot=C:\Windows`, `windir=C:\Windows`, `PROGRAMDATA=C:\ProgramData`, `ALLUSERSPROFILE=C:\ProgramData`}},
		{name: "what is set stays, any case", goos: "windows", profile: `C:\Users\other`,
			env: []string{`SYSTEMROOT=E:\Win`, `programdata=E:\PD`, `userprofile=E:\Users\ada`, `HOME=/home/ada`},
			want: []string{`SYSTEMROOT=E:\Win`, `programdata=E:\PD`, `userprofile=E:\Users\ada`, `HOME=/home/ada`,
				`windir=E:\Win`, `ALLUSERSPROFILE=E:\PD`}},
		{name: "from their siblings", goos: "windows",
			env: []string{`windir=F:\WINDOWS`, `ALLUSERSPROFILE=F:\All`, `HOMEDRIVE=F:`, `HOMEPATH=\Users\bo`},
			want: []string{`windir=F:\WINDOWS`, `ALLUSERSPROFILE=F:\All`, `HOMEDRIVE=F:`, `HOMEPATH=\Users\bo`,
				`SystemRoot=F:\WINDOWS`, `PROGRAMDATA=F:\All`, `USERPROFILE=F:\Users\bo`, `HOME=F:\Users\bo`}},
		{name: "darwin unchanged", goos: "darwin", profile: "/Users/ada",
			env: []string{"PATH=/usr/bin", "HOME=/Users/ada"}, want: []string{"PATH=/usr/bin", "HOME=/Users/ada"}},
		{name: "linux unchanged", goos: "linux",
			env: []string{"PATH=/usr/bin"}, want: []string{"PATH=/usr/bin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := slices.Clone(tc.env)
			got := SSHEnv(env, tc.goos, tc.profile)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SSHEnv (-want +got):\n%s", diff)
			}
			if !slices.Equal(env, tc.env) {
				t.Errorf("SSHEnv changed its input: %q", env)
			}
		})
	}
}

// ssh on PATH first; on Windows, with a PATH that has none, the one Windows
// ships under SystemRoot; otherwise an error that says to install it.
func TestFindSSH(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	onPath := func(string) (string, error) { return "/usr/bin/ssh", nil }
	at := func(want string) func(string) bool { return func(p string) bool { return p == want } }
	if p, err := FindSSH("windows", nil, onPath, at("")); err != nil || p != "/usr/bin/ssh" {
		t.Errorf("on PATH: %q %v", p, err)
	}
	if p, err := FindSSH("windows", []string{`SYSTEMROOT=D:\Win`}, none, at(`D:\Win\System32\OpenSSH\ssh.exe`)); err != nil || p != `D:\Win\System32\OpenSSH\ssh.exe` {
		t.Errorf("Windows' own: %q %v", p, err)
	}
	if _, err := FindSSH("windows", nil, none, at("")); !errors.Is(err, errNoSSH) {
		t.Errorf("none on Windows: %v", err)
	}
	if _, err := FindSSH("darwin", nil, none, at("")); !errors.Is(err, errNoSSH) {
		t.Errorf("none on macOS: %v", err)
	}
}

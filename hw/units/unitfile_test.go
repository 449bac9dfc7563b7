package units

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// testFS is a small root filesystem for CheckUnitFile.
func testFS() fstest.MapFS {
	return fstest.MapFS{
		"etc/passwd":              {Data: []byte("root:x:0:0:root:/root:/bin/bash\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\npi:x:1000:1000::/home/pi:/bin/bash\n")},
		"etc/group":               {Data: []byte("root:x:0:\nwww-data:x:33:\npi:x:1000:\n")},
		"usr/bin/python3":         {Mode: 0o755},
		"usr/sbin/nginx":          {Mode: 0o755},
		"opt/my app/run":          {Mode: 0o755},
		"opt/app/config.yaml":     {Mode: 0o644},
		"opt/app/not-exec.sh":     {Mode: 0o644},
		"opt/app/data":            {Mode: fs.ModeDir | 0o755},
		"usr/local/bin/backup.sh": {Mode: 0o750},
	}
}

// exists knows a few units, as systemd would.
func exists(name string) (bool, error) {
	switch name {
	case "network-online.target", "postgresql.service", "redis.service":
		return true, nil
	case "broken.service":
		return false, errors.New("bus went away")
	}
	return false, nil
}

const goodUnit = `# A well-formed service.
[Unit]
Description=Sensor logger
Requires=postgresql.service
Wants=redis.service network-online.target
After=network-online.target

[Service]
Type=simple
User=pi
Group=pi
WorkingDirectory=/opt/app/data
Environment="LOG_LEVEL=info" API_TOKEN=s3cr3t
ExecStartPre=-/usr/bin/python3 -m app.migrate
ExecStart=/usr/bin/python3 -u \
    /opt/app/logger.py --config /opt/app/config.yaml
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure

[Install]
WantedBy=multi-user.target
`

func TestCheckUnitFileGood(t *testing.T) {
	v := CheckUnitFile(testFS(), goodUnit, exists)
	// /bin/kill is not in testFS: the only finding.
	want := Validation{Valid: false, CanEnable: true, Errors: []string{"ExecReload=/bin/kill: does not exist"}}
	if !equalValidation(v, want) {
		t.Fatalf("got %+v\nwant %+v", v, want)
	}
	fsys := testFS()
	fsys["bin/kill"] = &fstest.MapFile{Mode: 0o755}
	if v := CheckUnitFile(fsys, goodUnit, exists); !v.Valid || len(v.Errors)+len(v.Warnings) != 0 || !v.CanEnable {
		t.Fatalf("good unit: %+v", v)
	}
}

func TestCheckUnitFileBroken(t *testing.T) {
	text := `[Service]
User=nosuchuser
Group=nosuchgroup
WorkingDirectory=/srv/missing
ExecStart=/opt/app/not-exec.sh
ExecStartPost=/opt/app/data
ExecStop=-/usr/bin/missing-but-optional
ExecStopPost=missing-tool --flag

[Unit]
Requires=nosuch.service
Wants=alsonot.service
BindsTo=broken.service
`
	v := CheckUnitFile(testFS(), text, exists)
	wantErrs := []string{
		"ExecStart=/opt/app/not-exec.sh: is not executable (mode -rw-r--r--)",
		"ExecStartPost=/opt/app/data: is not a regular file",
		"ExecStopPost=missing-tool: not found in /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"User=nosuchuser does not exist (not in /etc/passwd)",
		"Group=nosuchgroup does not exist (not in /etc/group)",
		"WorkingDirectory=/srv/missing does not exist",
		"Requires=nosuch.service: no such unit, so this unit cannot start",
	}
	wantWarns := []string{
		"static: no [Install] section with WantedBy= (or RequiredBy=, Alias=, Also=), so it cannot be enabled; it runs only when another unit pulls it in",
		"no Description=: listings will show only the unit name",
		"no Restart=: systemd will not restart it if it exits or crashes (Restart=on-failure is usual)",
		"ExecStop=/usr/bin/missing-but-optional: does not exist (ignored: the command has the '-' prefix)",
		"BindsTo=broken.service not checked: bus went away",
		"Wants=alsonot.service: no such unit (ignored by systemd)",
	}
	want := Validation{Valid: false, CanEnable: false, Errors: wantErrs, Warnings: wantWarns}
	if !equalValidation(v, want) {
		t.Errorf("got\n  errors   %q\n  warnings %q\nwant\n  errors   %q\n  warnings %q", v.Errors, v.Warnings, want.Errors, want.Warnings)
	}
}

func TestCheckUnitFileCases(t *testing.T) {
	for _, tc := range []struct {
		name, text     string
		errs, warns    []string
		canEnable      bool
		skipDependency bool
	}{
		{name: "no unit section", text: "[Service]\nExecStart=/usr/sbin/nginx\nRestart=always\n",
			warns: []string{"no [Unit] section", staticWarning, "no Description=: listings will show only the unit name"}},
		{name: "no service section", text: "[Unit]\nDescription=x\n[Install]\nWantedBy=multi-user.target\n",
			errs: []string{"no [Service] section"}, canEnable: true},
		{name: "no ExecStart", text: "[Unit]\nDescription=x\n[Service]\nRestart=always\n[Install]\nAlias=y.service\n",
			errs: []string{"no ExecStart=: a service needs a command (only Type=oneshot may have none)"}, canEnable: true},
		{name: "oneshot needs neither ExecStart nor Restart", text: "[Unit]\nDescription=x\n[Service]\nType=oneshot\nRemainAfterExit=yes\n[Install]\nWantedBy=multi-user.target\n", canEnable: true},
		{name: "drop-in resets ExecStart", text: "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/bin/python3 a.py\nRestart=always\n" +
			"[Service]\nExecStart=\nExecStart=/usr/bin/gone\n",
			errs: []string{"ExecStart=/usr/bin/gone: does not exist"}, warns: []string{staticWarning}},
		{name: "drop-in empties ExecStart", text: "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/bin/python3 a.py\nRestart=always\n[Service]\nExecStart=\n",
			errs: []string{"no ExecStart=: a service needs a command (only Type=oneshot may have none)"}, warns: []string{staticWarning}},
		{name: "prefixes, quotes, bare names", text: "[Unit]\nDescription=x\n[Service]\nExecStart=@-:+/usr/sbin/nginx nginx-main\nExecStartPre=!!\"/opt/my app/run\" x\nExecStartPost=python3 -V\nExecStop=/bin/%i\nExecReload=${BIN}/reload\nRestart=always\n",
			warns: []string{staticWarning}},
		{name: "numeric ids, specifiers, dynamic user, optional and home dirs",
			text: "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/sbin/nginx\nUser=1234\nGroup=%i\nWorkingDirectory=-/srv/gone\nRestart=always\n", warns: []string{staticWarning}},
		{name: "dynamic user", text: "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/sbin/nginx\nDynamicUser=yes\nUser=made-up\nWorkingDirectory=~\nRestart=always\n", warns: []string{staticWarning}},
		{name: "working directory is a file", text: "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/sbin/nginx\nWorkingDirectory=/opt/app/config.yaml\nRestart=always\n",
			errs: []string{"WorkingDirectory=/opt/app/config.yaml is not a directory"}, warns: []string{staticWarning}},
		{name: "dependencies unchecked without a resolver", text: "[Unit]\nDescription=x\nRequires=nosuch.service\n[Service]\nExecStart=/usr/sbin/nginx\nRestart=always\n",
			warns: []string{staticWarning}, skipDependency: true},
		{name: "comments, continuation and whitespace", text: "; comment\n[Unit]\n  Description = spaced  \n[Service]\nExecStart=/usr/sbin/nginx \\\n# inside\n  -g x\nRestart = always\n[Install]\nRequiredBy = x.target\n", canEnable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resolver := exists
			if tc.skipDependency {
				resolver = nil
			}
			v := CheckUnitFile(testFS(), tc.text, resolver)
			want := Validation{Valid: len(tc.errs) == 0, Errors: tc.errs, Warnings: tc.warns, CanEnable: tc.canEnable}
			if !equalValidation(v, want) {
				t.Errorf("got\n  %+v\nwant\n  %+v", v, want)
			}
		})
	}
}

const staticWarning = "static: no [Install] section with WantedBy= (or RequiredBy=, Alias=, Also=), so it cannot be enabled; it runs only when another unit pulls it in"

func TestCheckUnitFileUnreadableDatabases(t *testing.T) {
	fsys := testFS()
	delete(fsys, "etc/passwd")
	v := CheckUnitFile(fsys, "[Unit]\nDescription=x\n[Service]\nExecStart=/usr/sbin/nginx\nUser=pi\nRestart=always\n", nil)
	if !v.Valid || len(v.Warnings) != 2 || !strings.HasPrefix(v.Warnings[1], "User=pi not checked: cannot read /etc/passwd") {
		t.Errorf("%+v", v)
	}
}

func TestParseUnitFile(t *testing.T) {
	f := parseUnitFile(goodUnit)
	if got := f.last("Service", "ExecStart"); got != "/usr/bin/python3 -u /opt/app/logger.py --config /opt/app/config.yaml" {
		t.Errorf("continued ExecStart = %q", got)
	}
	if got := f.list("Unit", "Wants"); !slices.Equal(got, []string{"redis.service", "network-online.target"}) {
		t.Errorf("Wants = %q", got)
	}
	env := environment(f.values("Service", "Environment"))
	if len(env) != 2 || env["LOG_LEVEL"] != "info" || env["API_TOKEN"] != "s3cr3t" {
		t.Errorf("Environment = %v", env)
	}
	if got := splitWords(`a "b c" 'd e' f\g "h\"i"`); !slices.Equal(got, []string{"a", "b c", "d e", `f\g`, `h"i`}) {
		t.Errorf("splitWords = %q", got)
	}
	if got := firstWord(`"/opt/my app/run" x`); got != "/opt/my app/run" {
		t.Errorf("firstWord = %q", got)
	}
	if p, r := splitExecPrefix("-@:/bin/x a"); p != "-@:" || r != "/bin/x a" {
		t.Errorf("splitExecPrefix = %q %q", p, r)
	}
}

func equalValidation(a, b Validation) bool {
	return a.Valid == b.Valid && a.CanEnable == b.CanEnable && a.FragmentPath == b.FragmentPath &&
		slices.Equal(a.Errors, b.Errors) && slices.Equal(a.Warnings, b.Warnings)
}

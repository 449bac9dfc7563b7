package units

import (
	"io/fs"
	"strings"
	"time"
)

// The seeded board: a Raspberry Pi OS image with a web server, a camera
// daemon that is installed but off, the usual system services, a backup
// job that fails because its USB disk is not mounted, and raspi-mcp
// itself. The unit files are close to Debian's, so Get and Validate show
// what they would on a real Pi (nginx and bluetooth really have no
// Restart=, which Validate warns about).

// seedUnit is one seeded unit: its file and whether it is enabled.
type seedUnit struct {
	name, path, state, preset, file string
}

func seedUnits() []seedUnit {
	return []seedUnit{
		{"avahi-daemon.service", "/lib/systemd/system/avahi-daemon.service", "enabled", "enabled", `[Unit]
Description=Avahi mDNS/DNS-SD Stack
Requires=dbus.service avahi-daemon.socket
After=dbus.service

[Service]
Type=dbus
BusName=org.freedesktop.Avahi
ExecStart=/usr/sbin/avahi-daemon -s
ExecReload=/usr/sbin/avahi-daemon -r
NotifyAccess=main
Restart=on-failure

[Install]
WantedBy=multi-user.target
Also=avahi-daemon.socket
Alias=dbus-org.freedesktop.Avahi.service
`},
		{"backup.service", "/etc/systemd/system/backup.service", "enabled", "enabled", `[Unit]
Description=Nightly backup to the USB disk
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
User=pi
WorkingDirectory=/mnt/usb-backup
Environment=BACKUP_KEEP=7 "RESTIC_PASSWORD=correct horse battery staple"
ExecStart=/usr/local/bin/backup.sh --target /mnt/usb-backup

[Install]
WantedBy=multi-user.target
`},
		{"bluetooth.service", "/lib/systemd/system/bluetooth.service", "enabled", "enabled", `[Unit]
Description=Bluetooth service
Documentation=man:bluetoothd(8)
Requires=dbus.service
After=dbus.service

[Service]
Type=dbus
BusName=org.bluez
ExecStart=/usr/libexec/bluetooth/bluetoothd
NotifyAccess=main
LimitNPROC=1
ProtectHome=true

[Install]
WantedBy=bluetooth.target
Alias=dbus-org.bluez.service
`},
		{"dbus.service", "/lib/systemd/system/dbus.service", "static", "", `[Unit]
Description=D-Bus System Message Bus
Documentation=man:dbus-daemon(1)
Requires=dbus.socket

[Service]
Type=notify
NotifyAccess=main
ExecStart=/usr/bin/dbus-daemon --system --address=systemd: --nofork --nopidfile --systemd-activation --syslog-only
ExecReload=/usr/bin/dbus-send --print-reply --system --type=method_call --dest=org.freedesktop.DBus / org.freedesktop.DBus.ReloadConfig
OOMScoreAdjust=-900
`},
		{"motion.service", "/lib/systemd/system/motion.service", "disabled", "disabled", `[Unit]
Description=Motion detection video capture daemon
Documentation=man:motion(1)

[Service]
Type=simple
User=motion
ExecStart=/usr/bin/motion -n
Restart=on-failure

[Install]
WantedBy=multi-user.target
`},
		{"nginx.service", "/lib/systemd/system/nginx.service", "enabled", "enabled", `[Unit]
Description=A high performance web server and a reverse proxy server
Documentation=man:nginx(8)
After=network.target nss-lookup.target

[Service]
Type=forking
PIDFile=/run/nginx.pid
ExecStartPre=/usr/sbin/nginx -t -q -g 'daemon on; master_process on;'
ExecStart=/usr/sbin/nginx -g 'daemon on; master_process on;'
ExecReload=/usr/sbin/nginx -g 'daemon on; master_process on;' -s reload
ExecStop=-/sbin/start-stop-daemon --quiet --stop --retry QUIT/5 --pidfile /run/nginx.pid
TimeoutStopSec=5
KillMode=mixed

[Install]
WantedBy=multi-user.target
`},
		{"raspi-mcp-helper.service", "/etc/systemd/system/raspi-mcp-helper.service", "enabled", "enabled", `[Unit]
Description=raspi-mcp root helper

[Service]
Type=notify
ExecStart=/usr/local/bin/raspi-mcp-helper
Restart=on-failure

[Install]
WantedBy=multi-user.target
`},
		{"raspi-mcp.service", "/etc/systemd/system/raspi-mcp.service", "enabled", "enabled", `[Unit]
Description=raspi-mcp agent: MCP server for this Raspberry Pi
Wants=raspi-mcp-helper.service
After=network-online.target raspi-mcp-helper.service

[Service]
Type=notify
User=raspi-mcp
ExecStart=/usr/local/bin/raspi-mcp serve
Restart=on-failure
RestartSec=2

[Install]
WantedBy=multi-user.target
`},
		{"ssh.service", "/lib/systemd/system/ssh.service", "enabled", "enabled", `[Unit]
Description=OpenBSD Secure Shell server
Documentation=man:sshd(8) man:sshd_config(5)
After=network.target auditd.service

[Service]
EnvironmentFile=-/etc/default/ssh
ExecStartPre=/usr/sbin/sshd -t
ExecStart=/usr/sbin/sshd -D $SSHD_OPTS
ExecReload=/usr/sbin/sshd -t
ExecReload=/bin/kill -HUP $MAINPID
KillMode=process
Restart=on-failure
RestartPreventExitStatus=255
Type=notify

[Install]
WantedBy=multi-user.target
Alias=sshd.service
`},
	}
}

// simFS is the filesystem the sim's unit files are checked against: the
// seeded units' executables, users, groups and directories, and no
// /mnt/usb-backup. It is built per call so nothing package-level can be
// changed.
func simFS() memFS {
	exe := memFile{mode: 0o755}
	dir := memFile{mode: fs.ModeDir | 0o755}
	fsys := memFS{
		"etc/passwd": {mode: 0o644, data: `root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
messagebus:x:100:107::/nonexistent:/usr/sbin/nologin
sshd:x:101:65534::/run/sshd:/usr/sbin/nologin
avahi:x:102:109:Avahi mDNS daemon,,,:/run/avahi-daemon:/usr/sbin/nologin
motion:x:103:110::/var/lib/motion:/usr/sbin/nologin
raspi-mcp:x:998:998:raspi-mcp agent:/var/lib/raspi-mcp:/usr/sbin/nologin
pi:x:1000:1000:,,,:/home/pi:/bin/bash
`},
		"etc/group": {mode: 0o644, data: `root:x:0:
daemon:x:1:
adm:x:4:pi
video:x:44:pi,motion
www-data:x:33:
nogroup:x:65534:
messagebus:x:107:
avahi:x:109:
motion:x:110:
systemd-journal:x:999:raspi-mcp
raspi-mcp:x:998:
pi:x:1000:
`},
		"home/pi":           dir,
		"var/lib/motion":    dir,
		"var/www/html":      dir,
		"var/lib/raspi-mcp": dir,
	}
	for _, p := range []string{
		"bin/sh", "bin/kill", "sbin/start-stop-daemon",
		"usr/sbin/nginx", "usr/sbin/sshd", "usr/sbin/avahi-daemon",
		"usr/bin/motion", "usr/bin/dbus-daemon", "usr/bin/dbus-send", "usr/bin/python3",
		"usr/libexec/bluetooth/bluetoothd",
		"usr/local/bin/backup.sh", "usr/local/bin/raspi-mcp", "usr/local/bin/raspi-mcp-helper",
	} {
		fsys[p] = exe
	}
	return fsys
}

// greeting is the first line a seeded service logs when it starts.
func greeting(name string) string {
	switch name {
	case "ssh.service":
		return "Server listening on 0.0.0.0 port 22."
	case "motion.service":
		return "[0:motion] [NTC] [ALL] motion_startup: Motion 4.5.1 Started"
	case "avahi-daemon.service":
		return "Server startup complete. Host name is raspberrypi.local. Local service cookie is 2815561389."
	case "bluetooth.service":
		return "Bluetooth daemon 5.66"
	case "dbus.service":
		return "[system] Successfully activated service 'org.freedesktop.systemd1'"
	case "raspi-mcp.service":
		return "raspi-mcp: serving MCP on /run/raspi-mcp/mcp.sock"
	case "raspi-mcp-helper.service":
		return "raspi-mcp-helper: listening on /run/raspi-mcp-helper/helper.sock"
	case "backup.service":
		return "backup: starting restic backup to /mnt/usb-backup"
	}
	return ""
}

// seedState boots the seeded board an hour before now: every enabled unit
// is started in name order (which starts dbus.service for the units that
// Require it and fails backup.service), then a login and a few lines of
// the last hour follow. Going through start gives a journal consistent
// with the states.
func seedState(now time.Time) *simState {
	st := &simState{Version: 1, NextPID: 412, Units: map[string]*simUnit{}}
	for _, u := range seedUnits() {
		st.Units[u.name] = &simUnit{Path: u.path, File: u.file, Active: "inactive", Sub: "dead", FileState: u.state, Preset: u.preset}
	}
	boot := now.Add(-time.Hour).Truncate(time.Second)
	st.log(boot, "", "kernel", 0, 5, "Linux version 6.6.51+rpt-rpi-v8 (serge@raspberrypi.com) (aarch64-linux-gnu-gcc-12 (Debian 12.2.0-14) 12.2.0) #1 SMP PREEMPT Debian 1:6.6.51-1+rpt3 (2024-10-08)")
	st.log(boot.Add(900*time.Millisecond), "", "kernel", 0, 4, "Under-voltage detected! (0x00050005)")
	at := boot.Add(3 * time.Second)
	for _, n := range st.names() {
		if st.Units[n].FileState == "enabled" {
			st.start(n, at, map[string]bool{})
			at = at.Add(400 * time.Millisecond)
		}
	}
	st.log(at.Add(2*time.Second), "", "systemd", 1, 6, "Startup finished in 2.482s (kernel) + 9.117s (userspace) = 11.600s.")
	login := now.Add(-10 * time.Minute)
	sshPID := st.Units["ssh.service"].MainPID
	st.log(login, "ssh.service", "sshd", sshPID+40, 6, "Accepted publickey for pi from 192.168.1.20 port 51514 ssh2: ED25519 SHA256:q5Jb0v2Kx9yQm3YfT7cW1nA8eR4uI6oP0sD2fG5hJ7k")
	st.log(login.Add(time.Second), "ssh.service", "sshd", sshPID+40, 6, "pam_unix(sshd:session): session opened for user pi(uid=1000) by pi(uid=0)")
	st.log(now.Add(-2*time.Minute), "", "kernel", 0, 3, "mmc0: Timeout waiting for hardware cmd interrupt.")
	return st
}

// memFS is a read-only in-memory filesystem of explicitly listed files and
// directories: enough for CheckUnitFile's Stat and ReadFile, and it keeps
// testing/fstest out of the agent and helper binaries.
type memFS map[string]memFile

type memFile struct {
	data string
	mode fs.FileMode
}

func (m memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memOpen{info: memInfo{name: name, f: f}, r: strings.NewReader(f.data)}, nil
}

type memOpen struct {
	info memInfo
	r    *strings.Reader
}

func (o *memOpen) Stat() (fs.FileInfo, error) { return o.info, nil }
func (o *memOpen) Close() error               { return nil }
func (o *memOpen) Read(p []byte) (int, error) {
	if o.info.f.mode.IsDir() {
		return 0, &fs.PathError{Op: "read", Path: o.info.name, Err: fs.ErrInvalid}
	}
	return o.r.Read(p)
}

type memInfo struct {
	name string
	f    memFile
}

func (i memInfo) Name() string       { return i.name[strings.LastIndexByte(i.name, '/')+1:] }
func (i memInfo) Size() int64        { return int64(len(i.f.data)) }
func (i memInfo) Mode() fs.FileMode  { return i.f.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.f.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

package procs

import (
	"slices"
	"strconv"
	"time"
)

// The seeded board, booted an hour before the table is created: the
// system daemons of Raspberry Pi OS, nginx, raspi-mcp (agent and helper),
// pi's sensor logger and an SSH login whose shell runs an ffmpeg
// time-lapse render at nice 10 that keeps most of one core busy. The
// socket inodes match the connections of the simulated network
// (netinfo.Sim), so a socket's owner is found as on a Pi. The services'
// pids and start times are those the simulated systemd (hw/units) seeds
// for their units' main processes, and the SSH login is the one its
// journal records, so the service and process tools agree on a fresh
// board.

// simPasswd is the simulated board's etc/passwd: the same accounts as the
// simulated systemd's unit files use.
const simPasswd = `root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
messagebus:x:100:107::/nonexistent:/usr/sbin/nologin
sshd:x:101:65534::/run/sshd:/usr/sbin/nologin
avahi:x:102:109:Avahi mDNS daemon,,,:/run/avahi-daemon:/usr/sbin/nologin
motion:x:103:110::/var/lib/motion:/usr/sbin/nologin
raspi-mcp:x:998:998:raspi-mcp agent:/var/lib/raspi-mcp:/usr/sbin/nologin
pi:x:1000:1000:,,,:/home/pi:/bin/bash
`

// Socket inodes: netinfo.Sim lists its sockets with the same numbers, so
// an owner resolves for a reader allowed to see the process's fd/ (the
// agent's user sees only its own, as on a Pi).
const (
	simInodeSSHListen4   = 18201
	simInodeSSHListen6   = 18203
	simInodeSSHSession   = 24117
	simInodeHTTPListen   = 18411
	simInodeMDNS         = 17020
	simInodeMQTT         = 20544
	simInodeAgentListen  = 19002
	simInodeJournalOut   = 19001
	simInodeHelperListen = 18900
)

func seedProcs(now time.Time, o SimOptions) *simState {
	if o.CPUs <= 0 {
		o.CPUs = 4
	}
	if o.MemTotal == 0 {
		o.MemTotal = 4 << 30
	}
	boot := now.Add(-time.Hour).Unix()
	up := float64(now.Unix() - boot)
	std := func(sock int) []simFD {
		return []simFD{{0, "/dev/null", "r"}, {1, socketName(sock), "w"}, {2, socketName(sock), "w"}}
	}
	ps := []*simProc{
		{PID: 1, UID: 0, Comm: "systemd", Cmdline: []string{"/sbin/init", "splash"}, Exe: "/usr/lib/systemd/systemd", Cwd: "/",
			State: "S", Start: 0.31, Rate: 0.0008, RSS: 11_904, VMS: 168_484, Threads: 1, Daemon: true},
		{PID: 2, Comm: "kthreadd", State: "S", Start: 0.31, Rate: 0.00001, Threads: 1, Kernel: true},
		{PID: 3, PPID: 2, Comm: "rcu_gp", State: "I", Start: 0.31, Threads: 1, Kernel: true},
		{PID: 14, PPID: 2, Comm: "ksoftirqd/0", State: "S", Start: 0.32, Rate: 0.0004, Threads: 1, Kernel: true},
		{PID: 96, PPID: 2, Comm: "kworker/1:2-events", State: "I", Start: 1.8, Rate: 0.0002, Threads: 1, Kernel: true},
		{PID: 131, PPID: 2, Comm: "mmc_complete", State: "I", Start: 1.1, Threads: 1, Kernel: true},
		{PID: 189, PPID: 1, Comm: "systemd-journal", Cmdline: []string{"/lib/systemd/systemd-journald"}, Exe: "/usr/lib/systemd/systemd-journald", Cwd: "/",
			State: "S", Start: 1.5, Rate: 0.001, RSS: 9_820, VMS: 42_112, Threads: 1, Daemon: true},
		{PID: 221, PPID: 1, Comm: "systemd-udevd", Cmdline: []string{"/lib/systemd/systemd-udevd"}, Exe: "/usr/lib/systemd/systemd-udevd", Cwd: "/",
			State: "S", Start: 1.9, Rate: 0.0002, RSS: 6_012, VMS: 25_700, Threads: 1, Daemon: true},
		{Unit: "dbus.service", PID: 412, PPID: 1, UID: 100, Comm: "dbus-daemon", Cmdline: []string{"/usr/bin/dbus-daemon", "--system", "--address=systemd:", "--nofork", "--nopidfile", "--systemd-activation", "--syslog-only"},
			Exe: "/usr/bin/dbus-daemon", Cwd: "/", State: "S", Start: 3.0, Rate: 0.0003, RSS: 4_480, VMS: 8_930, Threads: 1, Daemon: true},
		{Unit: "avahi-daemon.service", PID: 429, PPID: 1, UID: 102, Comm: "avahi-daemon", Cmdline: []string{"avahi-daemon: running [raspberrypi.local]"}, Exe: "/usr/sbin/avahi-daemon", Cwd: "/etc/avahi",
			State: "S", Start: 3.0, Rate: 0.0002, RSS: 3_520, VMS: 7_380, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{12, socketName(simInodeMDNS), "rw"})},
		{Unit: "bluetooth.service", PID: 444, PPID: 1, Comm: "bluetoothd", Cmdline: []string{"/usr/libexec/bluetooth/bluetoothd"}, Exe: "/usr/libexec/bluetooth/bluetoothd", Cwd: "/",
			State: "S", Start: 3.8, Rate: 0.00005, RSS: 5_760, VMS: 9_400, Threads: 1, Daemon: true},
		{PID: 431, PPID: 1, Comm: "cron", Cmdline: []string{"/usr/sbin/cron", "-f"}, Exe: "/usr/sbin/cron", Cwd: "/var/spool/cron",
			State: "S", Start: 3.1, Rate: 0.00005, RSS: 2_650, VMS: 6_720, Threads: 1, Daemon: true},
		{Unit: "ssh.service", PID: 496, PPID: 1, Comm: "sshd", Cmdline: []string{"sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"}, Exe: "/usr/sbin/sshd", Cwd: "/",
			State: "S", Start: 5.4, Rate: 0.00005, RSS: 7_700, VMS: 15_300, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{3, socketName(simInodeSSHListen4), "rw"}, simFD{4, socketName(simInodeSSHListen6), "rw"})},
		{Unit: "nginx.service", PID: 453, PPID: 1, Comm: "nginx", Cmdline: []string{"nginx: master process /usr/sbin/nginx -g daemon on; master_process on;"}, Exe: "/usr/sbin/nginx", Cwd: "/",
			State: "S", Start: 4.2, Rate: 0.00002, RSS: 1_620, VMS: 55_040, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{6, socketName(simInodeHTTPListen), "rw"})},
		{Unit: "nginx.service", PID: 454, PPID: 453, UID: 33, Comm: "nginx", Cmdline: []string{"nginx: worker process"}, Exe: "/usr/sbin/nginx", Cwd: "/",
			State: "S", Start: 4.2, Rate: 0.0001, RSS: 5_300, VMS: 55_800, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{6, socketName(simInodeHTTPListen), "rw"})},
		{Unit: "raspi-mcp-helper.service", PID: 469, PPID: 1, Comm: "raspi-mcp-helpe", Cmdline: []string{"/usr/local/bin/raspi-mcp-helper"}, Exe: "/usr/local/bin/raspi-mcp-helper", Cwd: "/",
			State: "S", Start: 4.6, Rate: 0.0003, RSS: 14_200, VMS: 1_245_000, Threads: 7, Self: true,
			FDs: append(std(simInodeJournalOut), simFD{3, socketName(simInodeHelperListen), "rw"})},
		{Unit: "raspi-mcp.service", PID: 486, PPID: 1, UID: SimAgentUID, Comm: "raspi-mcp", Cmdline: []string{"/usr/local/bin/raspi-mcp", "serve"}, Exe: "/usr/local/bin/raspi-mcp", Cwd: "/var/lib/raspi-mcp",
			Env: []string{"LANG=C.UTF-8", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "HOME=/var/lib/raspi-mcp", "LOGNAME=raspi-mcp", "USER=raspi-mcp",
				"INVOCATION_ID=5b0e8f2f1c7a4d0c9f1e2a3b4c5d6e7f", "JOURNAL_STREAM=8:19001", "NOTIFY_SOCKET=/run/systemd/notify", "WATCHDOG_USEC=30000000"},
			State: "S", Start: 5.0, Rate: 0.004, RSS: 31_400, VMS: 1_262_000, Threads: 9, Self: true,
			FDs: append(std(simInodeJournalOut), simFD{3, "/var/lib/raspi-mcp/state.db", "rw"}, simFD{4, "anon_inode:[eventpoll]", "rw"},
				simFD{5, "anon_inode:[eventfd]", "rw"}, simFD{6, socketName(simInodeAgentListen), "rw"})},
		{PID: 602, PPID: 1, UID: 1000, Comm: "python3", Cmdline: []string{"/usr/bin/python3", "/home/pi/sensor-logger/logger.py", "--interval", "10", "--out", "/home/pi/sensor-logger/data"},
			Exe: "/usr/bin/python3.11", Cwd: "/home/pi/sensor-logger", Env: []string{"HOME=/home/pi", "USER=pi", "MQTT_HOST=192.168.1.10", "MQTT_PASSWORD=greenhouse-2024"},
			State: "S", Start: 21.7, Rate: 0.03, RSS: 24_300, VMS: 38_900, Threads: 2,
			FDs: append(std(simInodeJournalOut), simFD{3, "/dev/i2c-1", "rw"}, simFD{4, "/home/pi/sensor-logger/data/greenhouse.csv", "w"}, simFD{5, socketName(simInodeMQTT), "rw"})},
		{PID: 536, PPID: 496, Comm: "sshd", Cmdline: []string{"sshd: pi [priv]"}, Exe: "/usr/sbin/sshd", Cwd: "/",
			State: "S", Start: up - 600, Rate: 0.0001, RSS: 10_200, VMS: 16_900, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{4, socketName(simInodeSSHSession), "rw"})},
		{PID: 543, PPID: 536, UID: 1000, Comm: "sshd", Cmdline: []string{"sshd: pi@pts/0"}, Exe: "/usr/sbin/sshd", Cwd: "/",
			State: "S", Start: up - 599, Rate: 0.0004, RSS: 6_900, VMS: 17_100, Threads: 1, Daemon: true,
			FDs: append(std(simInodeJournalOut), simFD{4, socketName(simInodeSSHSession), "rw"})},
		{PID: 544, PPID: 543, UID: 1000, Comm: "bash", Cmdline: []string{"-bash"}, Exe: "/usr/bin/bash", Cwd: "/home/pi",
			State: "S", Start: up - 599, Rate: 0.0001, RSS: 5_100, VMS: 8_800, Threads: 1, Daemon: true,
			FDs: []simFD{{0, "/dev/pts/0", "rw"}, {1, "/dev/pts/0", "rw"}, {2, "/dev/pts/0", "rw"}, {255, "/dev/pts/0", "rw"}}},
		{PID: 1342, PPID: 544, UID: 1000, Comm: "ffmpeg", Cmdline: []string{"ffmpeg", "-framerate", "24", "-pattern_type", "glob", "-i", "/home/pi/timelapse/frames/*.jpg",
			"-c:v", "libx264", "-preset", "veryfast", "/home/pi/timelapse/out/greenhouse.mp4"},
			Exe: "/usr/bin/ffmpeg", Cwd: "/home/pi/timelapse", State: "R", Start: up - 240, Rate: 0.87, RSS: 182_600, VMS: 512_300, Threads: 5, Nice: 10,
			FDs: []simFD{{0, "/dev/pts/0", "rw"}, {1, "/dev/pts/0", "rw"}, {2, "/dev/pts/0", "rw"}, {3, "/home/pi/timelapse/out/greenhouse.mp4", "w"}}},
	}
	for _, p := range ps {
		p.Since = p.Start
	}
	slices.SortFunc(ps, func(a, b *simProc) int { return a.PID - b.PID })
	return &simState{Version: 1, Boot: boot, CPUs: o.CPUs, MemTotal: o.MemTotal, Procs: ps}
}

func socketName(inode int) string { return "socket:[" + strconv.Itoa(inode) + "]" }

package agent

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// marker starts a process on this machine whose command line carries a
// unique word, and returns its pid and the word.
func marker(t *testing.T) (int, string) {
	t.Helper()
	word := fmt.Sprintf("raspi-mcp-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	// sh stays the parent of sleep (no exec), so its own argv keeps word.
	cmd := child(t, nil, "sh", "-c", "sleep 300; : "+word)
	return cmd.Process.Pid, word
}

// hostMentioned reports whether a tool's output shows the marker process
// by its word. The output is searched as JSON, so whatever a typed result's
// pointer fields hold is searched too.
func hostMentioned(t testing.TB, out any, word string) bool {
	return strings.Contains(asJSON(t, out), word)
}

// In laptop mode no tool sees or signals this machine's processes: a
// marker process is absent from every listing and filter, its pid is not
// found (or, if the board happens to use the same number, is the board's
// process), and a signal to it never arrives.
func TestSimBoardHidesHostProcesses(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) {
		c.Process.ProtectedUsers = []string{} // whoever runs the test, nothing of the host is protected by name
		c.Process.AllowedSignals = []string{"TERM", "KILL", "HUP", "STOP", "CONT"}
	})
	pid, word := marker(t)
	inTable := func(pid int) bool { _, err := procs.ReadIdentity(r.simProcs.FS(), pid); return err == nil }

	for _, f := range []map[string]any{
		{}, {"name_pattern": "sh"}, {"name_pattern": "sleep"}, {"name_pattern": "*marker*"},
		{"username": currentUser(t)}, {"include_kernel_threads": true},
	} {
		sc, e := callAs[processListOut](t, r, admin, "process_list_processes", map[string]any{"filter": f, "limit": 1000})
		if e != nil {
			t.Fatalf("list %v: %v", f, e)
		}
		if hostMentioned(t, sc, word) {
			t.Errorf("filter %v shows the host's marker process: %+v", f, sc)
		}
		for _, p := range sc.Processes {
			if !inTable(p.PID) {
				t.Errorf("filter %v lists pid %d, which the simulated board does not have", f, p.PID)
			}
		}
		if f["name_pattern"] == "sh" || f["name_pattern"] == "sleep" || f["name_pattern"] == "*marker*" {
			if sc.TotalCount != 0 {
				t.Errorf("filter %v matches %+v on a board that runs no such program", f, sc.Processes)
			}
		}
	}
	for _, p := range []int{pid, os.Getpid()} {
		d, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": p})
		switch {
		case inTable(p):
			if e != nil || hostMentioned(t, d, word) {
				t.Errorf("details of pid %d (also a board pid): %+v %v", p, d, e)
			}
		case !isCode(e, CodeNotFound):
			t.Errorf("details of the host's pid %d: %+v %v; want not_found", p, d, e)
		}
		_, e = callAs[processSignalOut](t, r, admin, "process_send_signal", map[string]any{"pid": p, "signal": "KILL", "confirm": true, "reason": "test"})
		if !inTable(p) && !isCode(e, CodeNotFound) {
			t.Errorf("KILL to the host's pid %d: %v; want not_found", p, e)
		}
	}
	// Bypassing the agent, the helper does not know the host's processes
	// either, whatever start time is claimed.
	if !inTable(pid) {
		real, err := procs.ReadIdentity(os.DirFS("/"), pid)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Call(context.Background(), r.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: pid, StartTicks: real.StartTicks, Signal: "KILL"})
		if proto.CodeOf(err) != proto.CodeNotFound {
			t.Errorf("helper KILL of the host's marker: %v; want not_found", err)
		}
	}
	if !alive(pid) {
		t.Fatal("the host's marker process was killed")
	}
	if id, err := procs.ReadIdentity(os.DirFS("/"), pid); err != nil || id.State == "stopped" {
		t.Fatalf("the marker is %+v, %v; want still running", id, err)
	}
}

// Every tool counts the same board: cores, memory and uptime agree between
// the system tools and the process list, and the busy program is on top.
func TestSimBoardCountsAgree(t *testing.T) {
	r := newSimRig(t, nil)
	basic, e := callAs[basicInfo](t, r, admin, "system_get_basic_info", nil)
	if e != nil {
		t.Fatal(e)
	}
	list := listProcs(t, r, map[string]any{"limit": 1000})
	if basic.CPUCores != list.CPUCount || basic.CPUCores != 4 {
		t.Fatalf("cores: basic info %v, process list %v", basic.CPUCores, list.CPUCount)
	}
	memTotal := float64(basic.MemoryTotalBytes)
	for _, p := range list.Processes {
		if rss := float64(p.MemoryRSS); rss > 0 {
			if got := math.Round(rss/memTotal*10000) / 100; math.Abs(got-p.MemoryPercent) > 0.011 {
				t.Errorf("%v: memory_percent %v, want %.2f of the board's %v bytes", p.Name, p.MemoryPercent, got, memTotal)
			}
		}
	}
	// memory_total_bytes is required in the snapshot, so it is compared
	// always (the map version skipped it when absent).
	health, e := callAs[HealthSnapshot](t, r, admin, "system_get_health_snapshot", nil)
	if e != nil || health.MemoryTotalBytes != basic.MemoryTotalBytes {
		t.Errorf("memory: health %v (%v), basic info %v", health.MemoryTotalBytes, e, basic.MemoryTotalBytes)
	}
	// Uptime counts from the boot the process table started at.
	init, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": 1})
	if e != nil {
		t.Fatal(e)
	}
	boot := float64(time.Now().Unix()) - float64(basic.UptimeSeconds)
	if d := init.CreateTime - boot; d < -2 || d > 60 { // whole seconds on both sides
		t.Errorf("pid 1 started %.0f s after the boot that uptime implies", d)
	}

	// top-like: the time-lapse render keeps most of a core busy.
	top := listProcs(t, r, map[string]any{"limit": 1})
	if len(top.Processes) == 0 {
		t.Fatal("no processes")
	}
	p := top.Processes[0]
	if p.Name != "ffmpeg" || p.CPUPercent < 80 || p.CPUPercent > 95 {
		t.Errorf("top process %v at %v%%; want ffmpeg near 87", p.Name, p.CPUPercent)
	}
}

// Signals go to the simulated table: the protected root process and
// raspi-mcp itself are refused (by the agent, and by the helper when the
// agent is bypassed) and change nothing; STOP stops, TERM ends.
func TestSimBoardSignals(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Process.AllowedSignals = []string{"TERM", "STOP", "CONT"} })
	snap, err := procs.Read(r.simProcs.FS(), procs.LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	by := func(name string) procs.Proc {
		i := slices.IndexFunc(snap.Procs, func(p procs.Proc) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("no %s on the board", name)
		}
		return snap.Procs[i]
	}
	sshd, self, ffmpeg := by("sshd"), by("raspi-mcp"), by("ffmpeg")
	send := func(pid int, sig string) (processSignalOut, *tool.Error) {
		return callAs[processSignalOut](t, r, admin, "process_send_signal", map[string]any{"pid": pid, "signal": sig, "confirm": true, "reason": "test"})
	}
	if _, e := send(sshd.PID, "TERM"); !isCode(e, CodePermissionDenied) || !strings.Contains(fmt.Sprint(*e), "protected") {
		t.Errorf("TERM to root's sshd: %+v", e)
	}
	if _, e := send(self.PID, "TERM"); !isCode(e, CodePermissionDenied) {
		t.Errorf("TERM to the board's raspi-mcp: %+v", e)
	}
	_, err = client.Call(context.Background(), r.helper, proto.ProcessSignal, proto.ProcessSignalReq{PID: sshd.PID, StartTicks: sshd.StartTicks, Signal: "TERM"})
	if proto.CodeOf(err) != proto.CodePermissionDenied || !strings.Contains(err.Error(), "protected user") {
		t.Errorf("helper TERM to root's sshd: %v", err)
	}
	after, err := procs.Read(r.simProcs.FS(), procs.LiveOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Procs) != len(snap.Procs) {
		t.Fatalf("refused signals changed the table: %d processes, was %d", len(after.Procs), len(snap.Procs))
	}

	if out, e := send(ffmpeg.PID, "STOP"); e != nil || !out.Sent || !out.StillRunning {
		t.Fatalf("STOP ffmpeg: %+v %v", out, e)
	}
	if d, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PID}); e != nil || d.Status != "stopped" {
		t.Fatalf("ffmpeg after STOP: %v %v", d.Status, e)
	}
	if out, e := send(ffmpeg.PID, "TERM"); e != nil || !out.Sent || out.StillRunning {
		t.Fatalf("TERM ffmpeg: %+v %v", out, e)
	}
	_, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PID})
	wantErr(t, e, CodeNotFound, nil) // ffmpeg after TERM
	// Its shell lives on, as a login shell does when its job ends.
	if d, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PPID}); e != nil || d.Name != "bash" {
		t.Fatalf("ffmpeg's parent: %+v %v", d, e)
	}
}

// The network tools show the board's LAN, never this machine's: none of
// the host's addresses appears, and the counters are the system metrics'.
func TestSimBoardNetwork(t *testing.T) {
	r := newSimRig(t, nil)
	netInfo := func() networkInfo {
		t.Helper()
		info, e := callAs[networkInfo](t, r, admin, "system_get_network_info", nil)
		if e != nil {
			t.Fatal(e)
		}
		return info
	}
	info := netInfo()
	if got := pluck(info.Interfaces, func(i netInterface) string { return i.Name }); !slices.Equal(got, []string{"lo", "eth0", "wlan0"}) {
		t.Fatalf("interfaces %v; want the board's lo, eth0, wlan0", got)
	}
	text := asJSON(t, info) // all of it, to search for the host's addresses
	if !strings.Contains(text, "192.168.1.42") || !strings.Contains(text, "dc:a6:32:5e:81:0c") {
		t.Errorf("eth0 is not the board's: %s", text)
	}
	hostIfs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, hi := range hostIfs {
		addrs, _ := hi.Addrs()
		for _, a := range addrs {
			ip, _, _ := net.ParseCIDR(a.String())
			if ip == nil || ip.IsLoopback() {
				continue
			}
			if strings.Contains(text, ip.String()) {
				t.Errorf("the host's address %s (%s) appears in the network info", ip, hi.Name)
			}
		}
		if mac := hi.HardwareAddr.String(); mac != "" && strings.Contains(text, mac) {
			t.Errorf("the host's MAC %s (%s) appears", mac, hi.Name)
		}
	}
	if status, e := callAs[netStatus](t, r, admin, "network_get_status", nil); e != nil || !status.Online {
		t.Errorf("the board is offline: %+v %v", status, e)
	}
	det, e := callAs[detailedNetworkInfo](t, r, admin, "system_get_detailed_network_info", map[string]any{"include_connections": true, "include_routing_table": true})
	if e != nil || det.ConnectionsTotal != 7 || !strings.Contains(asJSON(t, det.Connections), "51514") {
		t.Errorf("connections are not the board's: %+v %v", det.Connections, e)
	}
	// eth0's byte counters are the simulated system's: the tool's reading
	// lies between two readings of the system counters taken around it.
	ctr := r.a.sys.(sysinfo.CounterSource)
	rx := func() float64 {
		c, err := ctr.Counters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Net {
			if n.Name == "eth0" {
				return float64(n.RxBytes)
			}
		}
		t.Fatal("no eth0 in the system counters")
		return 0
	}
	before := rx()
	again := netInfo()
	after := rx()
	if got := eth0Recv(t, again); got < before || got > after || got == 0 {
		t.Errorf("eth0 received %v bytes; the system counted %v before and %v after", got, before, after)
	}
}

func eth0Recv(t *testing.T, info networkInfo) float64 {
	t.Helper()
	for _, i := range info.Interfaces {
		if i.Name == "eth0" {
			return float64(i.Statistics.BytesRecv)
		}
	}
	t.Fatal("no eth0")
	return 0
}

// listProcs is process_list_processes with args, which must succeed.
func listProcs(t *testing.T, r *rig, args map[string]any) processListOut {
	t.Helper()
	out, e := callAs[processListOut](t, r, admin, "process_list_processes", args)
	if e != nil {
		t.Fatal(e)
	}
	return out
}

func pids(l processListOut) []int {
	return pluck(l.Processes, func(p processSummary) int { return p.PID })
}

// On a fresh board every running service's main pid is a process of the
// table with the unit's program, started when the unit says it was.
func TestSimBoardServicesAreItsProcesses(t *testing.T) {
	r := newSimRig(t, nil)
	list, e := callAs[serviceListOut](t, r, admin, "service_list_services", map[string]any{"state": "active"})
	if e != nil {
		t.Fatal(e)
	}
	listed := float64(time.Now().Unix())
	services := list.Services
	if len(services) < 5 {
		t.Fatalf("active services: %+v", list)
	}
	for _, s := range services {
		pid := s.PID
		if pid == 0 {
			continue // a oneshot or socket-activated unit has no main process
		}
		d, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": pid})
		if e != nil {
			t.Errorf("%v's main pid %v is not a process: %v", s.Name, pid, e)
			continue
		}
		unit := strings.TrimSuffix(s.Name, ".service")
		name, cmd := d.Name, fmt.Sprint(d.Cmdline)
		if !strings.Contains(cmd, strings.TrimSuffix(unit, "-daemon")) && !strings.HasPrefix(unit, name) && !strings.Contains(cmd, name) {
			t.Errorf("%v's main pid %v is %s %s", s.Name, pid, name, cmd)
		}
		if s.UptimeSeconds != 0 { // omitempty: present exactly when not zero
			started := listed - float64(s.UptimeSeconds)
			if off := math.Abs(d.CreateTime - started); off > 3 {
				t.Errorf("%v: unit up since %.0f, process created %.0f", s.Name, started, d.CreateTime)
			}
		}
	}
}

// The board's systemd owns its services' processes: a stopped unit's
// processes are gone, a started one's appear at its main pid, and TERM to
// a unit's main process stops the unit.
func TestSimBoardServicesAndProcessesMove(t *testing.T) {
	r := newSimRig(t, nil)
	procsNamed := func(name string) []int {
		t.Helper()
		return pids(listProcs(t, r, map[string]any{"filter": map[string]any{"name_pattern": name}, "sort_by": "pid", "sort_order": "asc"}))
	}
	if got := procsNamed("nginx"); len(got) != 2 {
		t.Fatalf("nginx processes on a fresh board: %v", got)
	}
	guard := map[string]any{"confirm": true, "reason": "test"}
	with := func(m map[string]any) map[string]any {
		for k, v := range guard {
			m[k] = v
		}
		return m
	}
	if _, e := callAs[serviceControlOut](t, r, admin, "service_control_service", with(map[string]any{"service_name": "nginx", "action": "stop"})); e != nil {
		t.Fatal(e)
	}
	if got := procsNamed("nginx"); len(got) != 0 {
		t.Errorf("nginx processes after the unit stopped: %v", got)
	}
	sc, e := callAs[serviceControlOut](t, r, admin, "service_control_service", with(map[string]any{"service_name": "motion", "action": "start"}))
	if e != nil {
		t.Fatal(e)
	}
	pid := sc.MainPID
	if d, e := callAs[processDetail](t, r, admin, "process_get_process_details", map[string]any{"pid": pid}); e != nil || d.Name != "motion" || d.Username != "motion" {
		t.Fatalf("motion's main pid %v: %+v %v", pid, d, e)
	}
	dbus := procsNamed("dbus-daemon")
	if len(dbus) != 1 {
		t.Fatalf("dbus-daemon: %v", dbus)
	}
	if out, e := callAs[processSignalOut](t, r, admin, "process_send_signal", with(map[string]any{"pid": dbus[0], "signal": "TERM"})); e != nil || out.StillRunning {
		t.Fatalf("TERM dbus-daemon: %+v %v", out, e)
	}
	if st, e := callAs[serviceDetail](t, r, admin, "service_get_status", map[string]any{"service_name": "dbus"}); e != nil || st.Status != "inactive" {
		t.Errorf("dbus.service after its process got TERM: %v %v", st.Status, e)
	}
}

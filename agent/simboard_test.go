package agent

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// hostMentioned reports whether a tool's output shows the marker process:
// by its word, or as a process at its pid that is not the board's.
func hostMentioned(sc map[string]any, word string) bool {
	return strings.Contains(fmt.Sprint(sc), word)
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
		res, sc := r.as(admin, "process_list_processes", map[string]any{"filter": f, "limit": 1000})
		if res.IsError {
			t.Fatalf("list %v: %v", f, sc)
		}
		if hostMentioned(sc, word) {
			t.Errorf("filter %v shows the host's marker process: %v", f, sc)
		}
		for _, p := range names(sc, "processes", "pid") {
			if n, _ := strconv.Atoi(p); !inTable(n) {
				t.Errorf("filter %v lists pid %d, which the simulated board does not have", f, n)
			}
		}
		if f["name_pattern"] == "sh" || f["name_pattern"] == "sleep" || f["name_pattern"] == "*marker*" {
			if sc["total_count"].(float64) != 0 {
				t.Errorf("filter %v matches %v on a board that runs no such program", f, sc["processes"])
			}
		}
	}
	for _, p := range []int{pid, os.Getpid()} {
		res, sc := r.as(admin, "process_get_process_details", map[string]any{"pid": p})
		switch {
		case inTable(p):
			if hostMentioned(sc, word) || res.IsError {
				t.Errorf("details of pid %d (also a board pid): %v", p, sc)
			}
		case errCode(res, sc) != CodeNotFound:
			t.Errorf("details of the host's pid %d: %v; want not_found", p, sc)
		}
		res, sc = r.as(admin, "process_send_signal", map[string]any{"pid": p, "signal": "KILL", "confirm": true, "reason": "test"})
		if !inTable(p) && errCode(res, sc) != CodeNotFound {
			t.Errorf("KILL to the host's pid %d: %v; want not_found", p, sc)
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
	_, basic := r.as(admin, "system_get_basic_info", nil)
	_, list := r.as(admin, "process_list_processes", map[string]any{"limit": 1000})
	if basic["cpu_cores"] != list["cpu_count"] || basic["cpu_cores"].(float64) != 4 {
		t.Fatalf("cores: basic info %v, process list %v", basic["cpu_cores"], list["cpu_count"])
	}
	memTotal := basic["memory_total_bytes"].(float64)
	for _, it := range list["processes"].([]any) {
		p := it.(map[string]any)
		if rss := p["memory_rss"].(float64); rss > 0 {
			if got := math.Round(rss/memTotal*10000) / 100; math.Abs(got-p["memory_percent"].(float64)) > 0.011 {
				t.Errorf("%v: memory_percent %v, want %.2f of the board's %v bytes", p["name"], p["memory_percent"], got, memTotal)
			}
		}
	}
	_, health := r.as(admin, "system_get_health_snapshot", nil)
	if h, ok := health["memory_total_bytes"]; ok && h != basic["memory_total_bytes"] {
		t.Errorf("memory: health %v, basic info %v", h, basic["memory_total_bytes"])
	}
	// Uptime counts from the boot the process table started at.
	_, init := r.as(admin, "process_get_process_details", map[string]any{"pid": 1})
	boot := float64(time.Now().Unix()) - basic["uptime_seconds"].(float64)
	if d := init["create_time"].(float64) - boot; d < -2 || d > 60 { // whole seconds on both sides
		t.Errorf("pid 1 started %.0f s after the boot that uptime implies", d)
	}

	// top-like: the time-lapse render keeps most of a core busy.
	_, top := r.as(admin, "process_list_processes", map[string]any{"limit": 1})
	p := top["processes"].([]any)[0].(map[string]any)
	if p["name"] != "ffmpeg" || p["cpu_percent"].(float64) < 80 || p["cpu_percent"].(float64) > 95 {
		t.Errorf("top process %v at %v%%; want ffmpeg near 87", p["name"], p["cpu_percent"])
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
	send := func(pid int, sig string) (string, map[string]any) {
		res, sc := r.as(admin, "process_send_signal", map[string]any{"pid": pid, "signal": sig, "confirm": true, "reason": "test"})
		return errCode(res, sc), sc
	}
	if code, sc := send(sshd.PID, "TERM"); code != CodePermissionDenied || !strings.Contains(fmt.Sprint(sc), "protected") {
		t.Errorf("TERM to root's sshd: %v", sc)
	}
	if code, sc := send(self.PID, "TERM"); code != CodePermissionDenied {
		t.Errorf("TERM to the board's raspi-mcp: %v", sc)
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

	if code, sc := send(ffmpeg.PID, "STOP"); code != "" || sc["sent"] != true || sc["still_running"] != true {
		t.Fatalf("STOP ffmpeg: %v", sc)
	}
	if _, d := r.as(admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PID}); d["status"] != "stopped" {
		t.Fatalf("ffmpeg after STOP: %v", d["status"])
	}
	if code, sc := send(ffmpeg.PID, "TERM"); code != "" || sc["sent"] != true || sc["still_running"] != false {
		t.Fatalf("TERM ffmpeg: %v", sc)
	}
	if res, sc := r.as(admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PID}); errCode(res, sc) != CodeNotFound {
		t.Fatalf("ffmpeg after TERM: %v", sc)
	}
	// Its shell lives on, as a login shell does when its job ends.
	if res, sc := r.as(admin, "process_get_process_details", map[string]any{"pid": ffmpeg.PPID}); res.IsError || sc["name"] != "bash" {
		t.Fatalf("ffmpeg's parent: %v", sc)
	}
}

// The network tools show the board's LAN, never this machine's: none of
// the host's addresses appears, and the counters are the system metrics'.
func TestSimBoardNetwork(t *testing.T) {
	r := newSimRig(t, nil)
	_, info := r.as(admin, "system_get_network_info", nil)
	if got := names(info, "interfaces", "name"); !slices.Equal(got, []string{"lo", "eth0", "wlan0"}) {
		t.Fatalf("interfaces %v; want the board's lo, eth0, wlan0", got)
	}
	text := fmt.Sprint(info)
	if !strings.Contains(text, "192.168.1.42") || !strings.Contains(text, "dc:a6:32:5e:81:0c") {
		t.Errorf("eth0 is not the board's: %v", info)
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
	_, status := r.as(admin, "network_get_status", nil)
	if status["online"] != true {
		t.Errorf("the board is offline: %v", status)
	}
	_, det := r.as(admin, "system_get_detailed_network_info", map[string]any{"include_connections": true, "include_routing_table": true})
	if det["connections_total"].(float64) != 7 || !strings.Contains(fmt.Sprint(det["connections"]), "51514") {
		t.Errorf("connections are not the board's: %v", det["connections"])
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
	_, again := r.as(admin, "system_get_network_info", nil)
	after := rx()
	if got := eth0Recv(t, again); got < before || got > after || got == 0 {
		t.Errorf("eth0 received %v bytes; the system counted %v before and %v after", got, before, after)
	}
}

func eth0Recv(t *testing.T, info map[string]any) float64 {
	t.Helper()
	for _, it := range info["interfaces"].([]any) {
		i := it.(map[string]any)
		if i["name"] == "eth0" {
			return i["statistics"].(map[string]any)["bytes_recv"].(float64)
		}
	}
	t.Fatal("no eth0")
	return 0
}

// On a fresh board every running service's main pid is a process of the
// table with the unit's program, started when the unit says it was.
func TestSimBoardServicesAreItsProcesses(t *testing.T) {
	r := newSimRig(t, nil)
	_, list := r.as(admin, "service_list_services", map[string]any{"state": "active"})
	listed := float64(time.Now().Unix())
	services := list["services"].([]any)
	if len(services) < 5 {
		t.Fatalf("active services: %v", list)
	}
	for _, it := range services {
		s := it.(map[string]any)
		pid, _ := s["pid"].(float64)
		if pid == 0 {
			continue // a oneshot or socket-activated unit has no main process
		}
		res, d := r.as(admin, "process_get_process_details", map[string]any{"pid": pid})
		if res.IsError {
			t.Errorf("%v's main pid %v is not a process: %v", s["name"], pid, d)
			continue
		}
		unit := strings.TrimSuffix(s["name"].(string), ".service")
		name, cmd := d["name"].(string), fmt.Sprint(d["cmdline"])
		if !strings.Contains(cmd, strings.TrimSuffix(unit, "-daemon")) && !strings.HasPrefix(unit, name) && !strings.Contains(cmd, name) {
			t.Errorf("%v's main pid %v is %s %s", s["name"], pid, name, cmd)
		}
		if up, ok := s["uptime_seconds"].(float64); ok {
			started := listed - up
			if diff := math.Abs(d["create_time"].(float64) - started); diff > 3 {
				t.Errorf("%v: unit up since %.0f, process created %.0f", s["name"], started, d["create_time"])
			}
		}
	}
}

// The board's systemd owns its services' processes: a stopped unit's
// processes are gone, a started one's appear at its main pid, and TERM to
// a unit's main process stops the unit.
func TestSimBoardServicesAndProcessesMove(t *testing.T) {
	r := newSimRig(t, nil)
	procsNamed := func(name string) []string {
		t.Helper()
		_, m := r.as(admin, "process_list_processes", map[string]any{"filter": map[string]any{"name_pattern": name}, "sort_by": "pid", "sort_order": "asc"})
		return names(m, "processes", "pid")
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
	if res, sc := r.as(admin, "service_control_service", with(map[string]any{"service_name": "nginx", "action": "stop"})); res.IsError {
		t.Fatal(sc)
	}
	if got := procsNamed("nginx"); len(got) != 0 {
		t.Errorf("nginx processes after the unit stopped: %v", got)
	}
	res, sc := r.as(admin, "service_control_service", with(map[string]any{"service_name": "motion", "action": "start"}))
	if res.IsError {
		t.Fatal(sc)
	}
	pid := sc["main_pid"].(float64)
	if res, d := r.as(admin, "process_get_process_details", map[string]any{"pid": pid}); res.IsError || d["name"] != "motion" || d["username"] != "motion" {
		t.Fatalf("motion's main pid %v: %v", pid, d)
	}
	dbus := procsNamed("dbus-daemon")
	if len(dbus) != 1 {
		t.Fatalf("dbus-daemon: %v", dbus)
	}
	n, _ := strconv.Atoi(dbus[0])
	if res, sc := r.as(admin, "process_send_signal", with(map[string]any{"pid": n, "signal": "TERM"})); res.IsError || sc["still_running"] != false {
		t.Fatalf("TERM dbus-daemon: %v", sc)
	}
	if _, st := r.as(admin, "service_get_status", map[string]any{"service_name": "dbus"}); st["status"] != "inactive" {
		t.Errorf("dbus.service after its process got TERM: %v", st["status"])
	}
}

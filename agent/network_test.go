package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// The rig's network is the netinfo Pi 4 fixture: eth0 192.168.1.20/24 and
// wlan0, default routes via 192.168.1.1 (eth0 metric 100, wlan0 600), the
// gateway in the ARP table, DNS 192.168.1.1.
func TestNetworkStatusOnAPi4(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "network_get_status", map[string]any{})
	if res.IsError {
		t.Fatal(sc)
	}
	gw := sc["default_gateway"].(map[string]any)
	if gw["ipv4"] != "192.168.1.1" || gw["interface"] != "eth0" || sc["gateway_reachable"] != true || sc["online"] != true {
		t.Fatalf("status: %v", sc)
	}
	var eth0 map[string]any
	for _, i := range sc["interfaces"].([]any) {
		if m := i.(map[string]any); m["name"] == "eth0" {
			eth0 = m
		}
	}
	if eth0 == nil || !slices.Contains(strs(eth0["addresses"]), "192.168.1.20/24") || eth0["kind"] != "ethernet" {
		t.Fatalf("eth0: %v", eth0)
	}
	if !slices.Contains(strs(sc["dns_servers"]), "192.168.1.1") {
		t.Fatalf("dns: %v", sc["dns_servers"])
	}
}

func TestNetworkInfoAndDetails(t *testing.T) {
	r := newRig(t, nil)
	res, sc := r.as(admin, "system_get_network_info", map[string]any{})
	if res.IsError {
		t.Fatal(sc)
	}
	ifs := names(sc, "interfaces", "name")
	if !slices.Contains(ifs, "lo") || !slices.Contains(ifs, "eth0") || !slices.Contains(ifs, "wlan0") {
		t.Fatalf("interfaces: %v", ifs)
	}
	for _, i := range sc["interfaces"].([]any) {
		m := i.(map[string]any)
		if m["name"] == "wlan0" && m["wireless"] == nil {
			t.Fatalf("wlan0 without wireless details: %v", m)
		}
		if m["name"] == "eth0" && m["statistics"].(map[string]any)["bytes_recv"].(float64) == 0 {
			t.Fatalf("eth0 without counters: %v", m)
		}
	}
	_, plain := r.as(admin, "system_get_detailed_network_info", map[string]any{})
	if plain["routing_table"] != nil || plain["connections"] != nil {
		t.Fatalf("routes or connections without asking: %v", plain)
	}
	_, sc = r.as(admin, "system_get_detailed_network_info", map[string]any{"include_routing_table": true, "include_connections": true,
		"connection_state_filter": []any{"LISTEN"}})
	if len(sc["routing_table"].([]any)) < 2 {
		t.Fatalf("routes: %v", sc["routing_table"])
	}
	conns := sc["connections"].([]any)
	if len(conns) == 0 {
		t.Fatalf("no listening sockets in the fixture: %v", sc)
	}
	for _, c := range conns {
		if c.(map[string]any)["state"] != "LISTEN" {
			t.Fatalf("filter LISTEN let through %v", c)
		}
	}
	if !strings.Contains(fmt.Sprint(conns), "local_port:22") {
		t.Fatalf("sshd's port 22 not listed: %v", conns)
	}
	_, sc = r.as(admin, "system_get_detailed_network_info", map[string]any{"include_connections": true, "max_connections": 1})
	if len(sc["connections"].([]any)) != 1 || sc["truncated"] != true || sc["connections_total"].(float64) < 2 {
		t.Fatalf("max_connections 1: %v", sc)
	}
	if res, sc := r.as(admin, "system_get_detailed_network_info", map[string]any{"connection_state_filter": []any{"SLEEPING"}}); errCode(res, sc) != CodeInvalidArgument {
		t.Fatalf("bad state filter: %v", sc)
	}
}

func TestNetworkNamespaceOff(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Network.Enabled = false })
	for _, tool := range []string{"network_get_status", "system_get_network_info", "system_get_detailed_network_info"} {
		if res, sc := r.as(admin, tool, map[string]any{}); errCode(res, sc) != CodePermissionDenied {
			t.Errorf("%s with [network] off: %v", tool, sc)
		}
	}
}

// Every process, logs, job and power-cancel tool, and service_set_enabled, is
// refused when its namespace is switched off, reads included.
func TestOpsToolsRefusedWithTheirNamespaceOff(t *testing.T) {
	calls := map[string]struct {
		off  func(*config.Config)
		args map[string]any
	}{
		"process_list_processes":               {func(c *config.Config) { c.Process.Enabled = false }, map[string]any{}},
		"process_get_process_details":          {func(c *config.Config) { c.Process.Enabled = false }, map[string]any{"pid": 1}},
		"logs_query_journal":                   {func(c *config.Config) { c.Logs.Enabled = false }, map[string]any{}},
		"logs_get_recent_app_logs":             {func(c *config.Config) { c.Logs.Enabled = false }, map[string]any{}},
		"manage_list_jobs":                     {func(c *config.Config) { c.Manage.Enabled = false }, map[string]any{}},
		"manage_cancel_job":                    {func(c *config.Config) { c.Manage.Enabled = false }, map[string]any{"job_id": "x"}},
		"system_cancel_scheduled_power_action": {func(c *config.Config) { c.System.Enabled = false }, map[string]any{}},
		"service_set_enabled":                  {func(c *config.Config) { c.Service.Enabled = false }, map[string]any{"service_name": "nginx", "enabled": true, "confirm": true, "reason": "x"}},
	}
	for tool, c := range calls {
		r := newRig(t, c.off)
		if res, sc := r.as(admin, tool, c.args); errCode(res, sc) != CodePermissionDenied {
			t.Errorf("%s with its namespace off: %v", tool, sc)
		}
	}
}

package agent

import (
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
	sc, e := callAs[netStatus](t, r, admin, "network_get_status", map[string]any{})
	if e != nil {
		t.Fatal(e)
	}
	gw := sc.DefaultGateway
	if gw.IPv4 != "192.168.1.1" || gw.Interface != "eth0" || !sc.GatewayReachable || !sc.Online {
		t.Fatalf("status: %+v", sc)
	}
	i := slices.IndexFunc(sc.Interfaces, func(i netStatusIface) bool { return i.Name == "eth0" })
	if i < 0 || !slices.Contains(sc.Interfaces[i].Addresses, "192.168.1.20/24") || sc.Interfaces[i].Kind != "ethernet" {
		t.Fatalf("eth0 (at %d): %+v", i, sc.Interfaces)
	}
	if !slices.Contains(sc.DNSServers, "192.168.1.1") {
		t.Fatalf("dns: %v", sc.DNSServers)
	}
}

func TestNetworkInfoAndDetails(t *testing.T) {
	r := newRig(t, nil)
	sc, e := callAs[networkInfo](t, r, admin, "system_get_network_info", map[string]any{})
	if e != nil {
		t.Fatal(e)
	}
	ifs := pluck(sc.Interfaces, func(i netInterface) string { return i.Name })
	if !slices.Contains(ifs, "lo") || !slices.Contains(ifs, "eth0") || !slices.Contains(ifs, "wlan0") {
		t.Fatalf("interfaces: %v", ifs)
	}
	for _, m := range sc.Interfaces {
		if m.Name == "wlan0" && m.Wireless == nil {
			t.Fatalf("wlan0 without wireless details: %+v", m)
		}
		if m.Name == "eth0" && m.Statistics.BytesRecv == 0 {
			t.Fatalf("eth0 without counters: %+v", m)
		}
	}
	// Left out unless asked for: absent on the wire, which a typed nil
	// slice cannot tell from null or [], so this one is read raw.
	res := r.call(t, admin, "system_get_detailed_network_info", map[string]any{})
	if _, e := decodeResult[detailedNetworkInfo](t, res); e != nil {
		t.Fatal(e)
	}
	if plain := asJSON(t, res.StructuredContent); strings.Contains(plain, `"routing_table"`) || strings.Contains(plain, `"connections"`) {
		t.Fatalf("routes or connections without asking: %s", plain)
	}
	det := func(args map[string]any) detailedNetworkInfo {
		t.Helper()
		out, e := callAs[detailedNetworkInfo](t, r, admin, "system_get_detailed_network_info", args)
		if e != nil {
			t.Fatal(e)
		}
		return out
	}
	d := det(map[string]any{"include_routing_table": true, "include_connections": true, "connection_state_filter": []any{"LISTEN"}})
	if len(d.RoutingTable) < 2 {
		t.Fatalf("routes: %+v", d.RoutingTable)
	}
	conns := d.Connections
	if len(conns) == 0 {
		t.Fatalf("no listening sockets in the fixture: %+v", d)
	}
	for _, c := range conns {
		if c.State != "LISTEN" {
			t.Fatalf("filter LISTEN let through %+v", c)
		}
	}
	if !slices.ContainsFunc(conns, func(c connection) bool { return c.LocalPort == 22 }) {
		t.Fatalf("sshd's port 22 not listed: %+v", conns)
	}
	d = det(map[string]any{"include_connections": true, "max_connections": 1})
	if len(d.Connections) != 1 || !d.Truncated || d.ConnectionsTotal < 2 {
		t.Fatalf("max_connections 1: %+v", d)
	}
	_, e = callAs[detailedNetworkInfo](t, r, admin, "system_get_detailed_network_info", map[string]any{"connection_state_filter": []any{"SLEEPING"}})
	wantErr(t, e, CodeInvalidArgument, nil) // bad state filter
}

func TestNetworkNamespaceOff(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Network.Enabled = false })
	for _, tool := range []string{"network_get_status", "system_get_network_info", "system_get_detailed_network_info"} {
		// An error result carries no output, so any Out will do.
		if _, e := callAs[any](t, r, admin, tool, map[string]any{}); !isCode(e, CodePermissionDenied) {
			t.Errorf("%s with [network] off: %+v", tool, e)
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
		if _, e := callAs[any](t, r, admin, tool, c.args); !isCode(e, CodePermissionDenied) {
			t.Errorf("%s with its namespace off: %+v", tool, e)
		}
	}
}

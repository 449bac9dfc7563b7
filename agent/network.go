package agent

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// network is what the agent reads of the network; netinfo.Linux is the real one.
type network interface {
	Interfaces(ctx context.Context) ([]netinfo.Interface, error)
	Routes(ctx context.Context) ([]netinfo.Route, error)
	DNSServers(ctx context.Context) ([]string, error)
	Connections(ctx context.Context, protos []string) ([]netinfo.Conn, error)
	Neighbors(ctx context.Context) ([]netinfo.Neighbor, error)
}

// ipv4Address is one IPv4 address of an interface (system.get_network_info,
// spec 002 addendum §1.1).
type ipv4Address struct {
	Address   string `json:"address"`
	Netmask   string `json:"netmask,omitempty"`
	Broadcast string `json:"broadcast,omitempty"`
	PrefixLen int    `json:"prefix_length"`
}

// ipv6Address is one IPv6 address of an interface with its prefix and scope
// (system.get_network_info, spec 002 addendum §1.1).
type ipv6Address struct {
	Address   string `json:"address"`
	PrefixLen int    `json:"prefix_length"`
	Scope     string `json:"scope,omitempty"`
}

// ifStats are an interface's byte, packet, error and drop counters since boot
// (system.get_network_info's statistics, spec 002 addendum §1.1).
type ifStats struct {
	BytesSent   uint64 `json:"bytes_sent"`
	BytesRecv   uint64 `json:"bytes_recv"`
	PacketsSent uint64 `json:"packets_sent"`
	PacketsRecv uint64 `json:"packets_recv"`
	ErrorsIn    uint64 `json:"errors_in"`
	ErrorsOut   uint64 `json:"errors_out"`
	DropsIn     uint64 `json:"drops_in"`
	DropsOut    uint64 `json:"drops_out"`
}

// wifi is the wireless link, where the kernel or iw says.
type wifi struct {
	SSID         string  `json:"ssid,omitempty"`
	SignalDBm    *int    `json:"signal_dbm,omitempty"`
	LinkQuality  *int    `json:"link_quality,omitempty" jsonschema:"0..70 as the driver reports it"`
	FrequencyMHz int     `json:"frequency_mhz,omitempty"`
	BitrateMbps  float64 `json:"bitrate_mbps,omitempty"`
}

// netInterface is one network interface: name, MAC, MTU, state, addresses and
// counters (system.get_network_info, spec 002 addendum §1.1).
type netInterface struct {
	Name          string        `json:"name"`
	MACAddress    string        `json:"mac_address"`
	MTU           int           `json:"mtu"`
	State         string        `json:"state"`
	Kind          string        `json:"kind" jsonschema:"loopback, ethernet, wireless, bridge, virtual or other"`
	SpeedMbps     int           `json:"speed_mbps,omitempty"`
	IPv4Addresses []ipv4Address `json:"ipv4_addresses"`
	IPv6Addresses []ipv6Address `json:"ipv6_addresses"`
	Statistics    ifStats       `json:"statistics"`
	Wireless      *wifi         `json:"wireless,omitempty"`
}

// gatewayInfo is the default gateway for IPv4 and IPv6 and its interface
// (system.get_network_info's default_gateway, spec 002 addendum §1.1).
type gatewayInfo struct {
	IPv4      string `json:"ipv4,omitempty"`
	IPv6      string `json:"ipv6,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// networkInfo is system.get_network_info: the interfaces, the default gateway
// and the DNS servers (spec 002 addendum §1.1).
type networkInfo struct {
	Interfaces     []netInterface `json:"interfaces"`
	DefaultGateway gatewayInfo    `json:"default_gateway"`
	DNSServers     []string       `json:"dns_servers"`
}

// networkDetailedIn is system.get_detailed_network_info: whether to add the
// routing table and the connections, filtered by state (spec 002 addendum §1.2).
type networkDetailedIn struct {
	IncludeRoutingTable   bool     `json:"include_routing_table,omitempty"`
	IncludeConnections    bool     `json:"include_connections,omitempty"`
	ConnectionStateFilter []string `json:"connection_state_filter,omitempty"`
	MaxConnections        int      `json:"max_connections,omitempty"`
}

// routeEntry is one route of the routing table (system.get_detailed_network_info,
// spec 002 addendum §1.2).
type routeEntry struct {
	Destination string `json:"destination"`
	PrefixLen   int    `json:"prefix_length"`
	Gateway     string `json:"gateway,omitempty"`
	Netmask     string `json:"netmask,omitempty"`
	Flags       string `json:"flags"`
	Metric      int    `json:"metric"`
	Interface   string `json:"interface"`
	Family      string `json:"family" jsonschema:"ipv4 or ipv6"`
}

// connection is one socket of the device with its owning process, where the
// agent may see it (system.get_detailed_network_info, spec 002 addendum §1.2).
type connection struct {
	Protocol      string `json:"protocol"`
	LocalAddress  string `json:"local_address"`
	LocalPort     int    `json:"local_port"`
	RemoteAddress string `json:"remote_address,omitempty"`
	RemotePort    int    `json:"remote_port,omitempty"`
	State         string `json:"state,omitempty"`
	PID           int    `json:"pid,omitempty" jsonschema:"owning process, where the agent may see it"`
	Process       string `json:"process,omitempty"`
	Username      string `json:"username,omitempty"`
}

// detailedNetworkInfo is system.get_detailed_network_info's result: the
// network info plus routes and connections (spec 002 addendum §1.2).
type detailedNetworkInfo struct {
	networkInfo
	RoutingTable     []routeEntry `json:"routing_table,omitempty"`
	Connections      []connection `json:"connections,omitempty"`
	ConnectionsTotal int          `json:"connections_total,omitempty"`
	Truncated        bool         `json:"truncated,omitempty"`
}

// netStatusIface is one interface in network.get_status.
type netStatusIface struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	Kind      string   `json:"kind"`
	Addresses []string `json:"addresses" jsonschema:"CIDR, IPv4 first; link-local IPv6 left out"`
	SSID      string   `json:"ssid,omitempty"`
	SignalDBm *int     `json:"signal_dbm,omitempty"`
}

// netStatus is network.get_status (tool catalog, spec 002 §2.2): interfaces, addresses and
// basic connectivity judged from the kernel's tables, without sending a packet.
type netStatus struct {
	Interfaces       []netStatusIface `json:"interfaces"`
	DefaultGateway   gatewayInfo      `json:"default_gateway"`
	GatewayReachable bool             `json:"gateway_reachable" jsonschema:"the gateway answered ARP recently"`
	DNSServers       []string         `json:"dns_servers"`
	Online           bool             `json:"online" jsonschema:"a default route, a reachable gateway and a DNS server"`
	Problems         []string         `json:"problems"`
}

// networkTools are the network namespace's tools (and
// system.get_network_info, system.get_detailed_network_info): what they read.
type networkTools struct {
	net  network // interfaces, routes, sockets
	root fs.FS   // /proc, for the owners of sockets
}

func (a *Agent) registerNetwork() {
	(&networkTools{net: a.net, root: a.root}).register(a.tools)
}

func (n *networkTools) register(r *tool.Registry) {
	tool.Add(r, tool.Spec[noArgs, netStatus]{
		ID: "network.get_status", Title: "Network status",
		Description: "Is the device online? Interfaces, Wi-Fi signal, gateway, DNS and the problems found.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run:         func(ctx context.Context, _ *tool.Call, _ noArgs) (netStatus, error) { return n.status(ctx) },
		Summary: func(_ noArgs, s netStatus) string {
			var parts []string
			for _, i := range s.Interfaces {
				if i.Kind != "loopback" && len(i.Addresses) > 0 {
					parts = append(parts, i.Name+" "+i.Addresses[0])
				}
			}
			state := "online"
			if !s.Online {
				state = "OFFLINE: " + strings.Join(s.Problems, "; ")
			}
			return fmt.Sprintf("%s; %s", state, strings.Join(parts, ", "))
		},
	})
	tool.Add(r, tool.Spec[noArgs, networkInfo]{
		ID: "system.get_network_info", Title: "Network interfaces",
		Description: "Interfaces (addresses, state, counters, Wi-Fi), gateways and DNS servers.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Domain: "network"},
		Run:         func(ctx context.Context, _ *tool.Call, _ noArgs) (networkInfo, error) { return n.info(ctx) },
		Summary: func(_ noArgs, info networkInfo) string {
			return fmt.Sprintf("%d interfaces, gateway %s, DNS %s", len(info.Interfaces), orNone(info.DefaultGateway.IPv4), orNone(strings.Join(info.DNSServers, " ")))
		},
	})
	tool.Add(r, tool.Spec[networkDetailedIn, detailedNetworkInfo]{
		ID: "system.get_detailed_network_info", Title: "Network in detail",
		Description: "system_get_network_info plus, on request, routes and TCP/UDP connections.",
		Rule:        tool.Rule{MinRole: identity.RoleRead, Domain: "network"},
		Props: []tool.Prop{tool.P("include_routing_table", tool.Default(false)), tool.P("include_connections", tool.Default(false)), tool.P("connection_state_filter", tool.MaxItems(4)),
			tool.P("connection_state_filter", func(s *jsonschema.Schema) { s.Items.Enum = []any{"ESTABLISHED", "LISTEN", "TIME_WAIT", "CLOSE_WAIT"} }),
			tool.P("max_connections", tool.Min(1), tool.Max(1000), tool.Default(200))},
		Run: n.detailed,
		Summary: func(in networkDetailedIn, d detailedNetworkInfo) string {
			s := fmt.Sprintf("%d interfaces", len(d.Interfaces))
			if in.IncludeRoutingTable {
				s += fmt.Sprintf(", %d routes", len(d.RoutingTable))
			}
			if in.IncludeConnections {
				s += fmt.Sprintf(", %d of %d connections", len(d.Connections), d.ConnectionsTotal)
			}
			return s
		},
	})
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func interfaceOf(i netinfo.Interface) netInterface {
	n := netInterface{Name: i.Name, MACAddress: i.MAC, MTU: i.MTU, State: i.State, Kind: i.Kind, SpeedMbps: i.SpeedMbps,
		IPv4Addresses: []ipv4Address{}, IPv6Addresses: []ipv6Address{},
		Statistics: ifStats{BytesSent: i.Stats.BytesSent, BytesRecv: i.Stats.BytesRecv, PacketsSent: i.Stats.PacketsSent, PacketsRecv: i.Stats.PacketsRecv,
			ErrorsIn: i.Stats.ErrorsIn, ErrorsOut: i.Stats.ErrorsOut, DropsIn: i.Stats.DropsIn, DropsOut: i.Stats.DropsOut}}
	if n.MACAddress == "" {
		n.MACAddress = "00:00:00:00:00:00"
	}
	for _, v := range i.IPv4 {
		n.IPv4Addresses = append(n.IPv4Addresses, ipv4Address{Address: v.Address, Netmask: v.Netmask, Broadcast: v.Broadcast, PrefixLen: v.PrefixLen})
	}
	for _, v := range i.IPv6 {
		n.IPv6Addresses = append(n.IPv6Addresses, ipv6Address{Address: v.Address, PrefixLen: v.PrefixLen, Scope: v.Scope})
	}
	if w := i.Wireless; w != nil {
		n.Wireless = &wifi{SSID: w.SSID, SignalDBm: w.SignalDBm, LinkQuality: w.LinkQuality, FrequencyMHz: w.FrequencyMHz, BitrateMbps: w.BitrateMbps}
	}
	return n
}

func (n *networkTools) info(ctx context.Context) (networkInfo, error) {
	ifs, err := n.net.Interfaces(ctx)
	if err != nil {
		return networkInfo{}, fmt.Errorf("agent: interfaces: %w", err)
	}
	routes, err := n.net.Routes(ctx)
	if err != nil {
		return networkInfo{}, fmt.Errorf("agent: routes: %w", err)
	}
	dns, err := n.net.DNSServers(ctx)
	if err != nil {
		dns = nil // a missing resolv.conf is "no DNS", not a failure
	}
	out := networkInfo{Interfaces: []netInterface{}, DNSServers: nonNil(dns)}
	for _, i := range ifs {
		out.Interfaces = append(out.Interfaces, interfaceOf(i))
	}
	g := netinfo.DefaultGateway(routes)
	out.DefaultGateway = gatewayInfo{IPv4: g.IPv4, IPv6: g.IPv6, Interface: g.Interface}
	return out, nil
}

func (n *networkTools) status(ctx context.Context) (netStatus, error) {
	info, err := n.info(ctx)
	if err != nil {
		return netStatus{}, err
	}
	out := netStatus{Interfaces: []netStatusIface{}, DefaultGateway: info.DefaultGateway, DNSServers: info.DNSServers, Problems: []string{}}
	for _, i := range info.Interfaces {
		s := netStatusIface{Name: i.Name, State: i.State, Kind: i.Kind, Addresses: []string{}}
		for _, v := range i.IPv4Addresses {
			s.Addresses = append(s.Addresses, fmt.Sprintf("%s/%d", v.Address, v.PrefixLen))
		}
		for _, v := range i.IPv6Addresses {
			if v.Scope != "link" {
				s.Addresses = append(s.Addresses, fmt.Sprintf("%s/%d", v.Address, v.PrefixLen))
			}
		}
		if i.Wireless != nil {
			s.SSID, s.SignalDBm = i.Wireless.SSID, i.Wireless.SignalDBm
		}
		out.Interfaces = append(out.Interfaces, s)
	}
	if g := info.DefaultGateway; g.IPv4 != "" {
		if neigh, err := n.net.Neighbors(ctx); err == nil {
			out.GatewayReachable = slices.ContainsFunc(neigh, func(nb netinfo.Neighbor) bool { return nb.IP == g.IPv4 && nb.Complete })
		}
	}
	if out.DefaultGateway.IPv6 != "" && out.DefaultGateway.IPv4 == "" {
		out.GatewayReachable = true // IPv6 neighbours are not in /proc; a router advertisement put the route there
	}
	switch {
	case out.DefaultGateway.IPv4 == "" && out.DefaultGateway.IPv6 == "":
		out.Problems = append(out.Problems, "no default route")
	case !out.GatewayReachable:
		out.Problems = append(out.Problems, "the default gateway "+out.DefaultGateway.IPv4+" is not in the ARP table")
	}
	if len(out.DNSServers) == 0 {
		out.Problems = append(out.Problems, "no DNS server configured")
	}
	for _, i := range out.Interfaces {
		if i.Kind == "wireless" && i.SignalDBm != nil && *i.SignalDBm < -75 {
			out.Problems = append(out.Problems, fmt.Sprintf("weak Wi-Fi signal on %s (%d dBm)", i.Name, *i.SignalDBm))
		}
	}
	out.Online = out.GatewayReachable && len(out.DNSServers) > 0 && (out.DefaultGateway.IPv4 != "" || out.DefaultGateway.IPv6 != "")
	return out, nil
}

func (n *networkTools) detailed(ctx context.Context, _ *tool.Call, in networkDetailedIn) (detailedNetworkInfo, error) {
	info, err := n.info(ctx)
	if err != nil {
		return detailedNetworkInfo{}, err
	}
	out := detailedNetworkInfo{networkInfo: info}
	if in.IncludeRoutingTable {
		routes, err := n.net.Routes(ctx)
		if err != nil {
			return out, fmt.Errorf("agent: routes: %w", err)
		}
		out.RoutingTable = []routeEntry{}
		for _, r := range routes {
			fam := "ipv4"
			if r.Family == 6 {
				fam = "ipv6"
			}
			out.RoutingTable = append(out.RoutingTable, routeEntry{Destination: r.Destination, PrefixLen: r.PrefixLen, Gateway: r.Gateway,
				Netmask: r.Netmask, Flags: r.Flags, Metric: r.Metric, Interface: r.Interface, Family: fam})
		}
	}
	if in.IncludeConnections {
		conns, err := n.net.Connections(ctx, nil)
		if err != nil {
			return out, fmt.Errorf("agent: connections: %w", err)
		}
		owners, _ := procs.InodeOwners(n.root) // only what the agent may see
		names := map[int]string{}
		users := map[int]string{}
		out.Connections = []connection{}
		var list []connection
		for _, c := range conns {
			if len(in.ConnectionStateFilter) > 0 && !slices.Contains(in.ConnectionStateFilter, c.State) {
				continue
			}
			cn := connection{Protocol: c.Proto, LocalAddress: c.LocalAddr, LocalPort: c.LocalPort, RemoteAddress: c.RemoteAddr,
				RemotePort: c.RemotePort, State: c.State}
			if _, ok := users[c.UID]; !ok {
				users[c.UID] = procs.Username(n.root, c.UID)
			}
			cn.Username = users[c.UID]
			if c.State == "LISTEN" || c.State == "" {
				cn.RemoteAddress, cn.RemotePort = "", 0
			}
			if pid, ok := owners[c.Inode]; ok && c.Inode != 0 {
				cn.PID = pid
				if _, ok := names[pid]; !ok {
					if id, err := procs.ReadIdentity(n.root, pid); err == nil {
						names[pid] = id.Name
					}
				}
				cn.Process = names[pid]
			}
			list = append(list, cn)
		}
		// Listening sockets first: "what is listening" is the usual question.
		cmpElem := func(x, y connection) int {
			return boolRank(y.State == "LISTEN") - boolRank(x.State == "LISTEN")
		}
		sort.SliceStable(list, func(i, j int) bool { return cmpElem(list[i], list[j]) < 0 })
		out.ConnectionsTotal = len(list)
		if len(list) > in.MaxConnections {
			list, out.Truncated = list[:in.MaxConnections], true
		}
		out.Connections = append(out.Connections, list...)
	}
	return out, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

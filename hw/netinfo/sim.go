package netinfo

import (
	"context"
	"fmt"
	"slices"
)

// Sim is the simulated board's network for laptop mode, demos and tests:
// a Pi on a home LAN (192.168.1.0/24) wired on eth0 and associated on
// wlan0, with sshd, nginx and avahi listening, an SSH session from the
// owner's laptop and the sensor logger's MQTT connection. It reads
// nothing of the machine it runs on. Its socket inodes are those of the
// simulated process table (procs.Sim), so a socket's owner resolves as on
// a Pi. The zero value has zero traffic counters.
type Sim struct {
	// Stats returns the counters of eth0 and wlan0 by name; laptop mode
	// passes the simulated system's counters so that the network tools
	// and the system metrics show the same traffic. Nil leaves them zero;
	// lo gets its own from them.
	Stats func(ctx context.Context) (map[string]Stats, error)
}

// Interfaces returns lo, eth0 and wlan0, up, with their addresses.
func (s Sim) Interfaces(ctx context.Context) ([]Interface, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stats := map[string]Stats{}
	if s.Stats != nil {
		var err error
		if stats, err = s.Stats(ctx); err != nil {
			return nil, fmt.Errorf("%ssim: %w", errPrefix, err)
		}
	}
	// Loopback carries the agent's and the helper's local traffic: a
	// steady fraction of the LAN's, equal both ways.
	lo := stats["eth0"].BytesSent / 3
	on := true
	return []Interface{
		{Name: "lo", MAC: "00:00:00:00:00:00", MTU: 65536, State: "up", Kind: "loopback", OperState: "unknown", AdminUp: true,
			IPv4:  []IPv4Addr{{Address: "127.0.0.1", Netmask: "255.0.0.0", PrefixLen: 8}},
			IPv6:  []IPv6Addr{{Address: "::1", PrefixLen: 128, Scope: "host"}},
			Stats: Stats{BytesSent: lo, BytesRecv: lo, PacketsSent: lo / 120, PacketsRecv: lo / 120}},
		{Name: "eth0", MAC: "dc:a6:32:5e:81:0c", MTU: 1500, State: "up", Kind: "ethernet", Carrier: &on, SpeedMbps: 1000, OperState: "up", AdminUp: true,
			IPv4: []IPv4Addr{{Address: "192.168.1.42", Netmask: "255.255.255.0", Broadcast: "192.168.1.255", PrefixLen: 24}},
			IPv6: []IPv6Addr{{Address: "2a02:8071:5e80:7c0::42", PrefixLen: 64, Scope: "global"},
				{Address: "fe80::dea6:32ff:fe5e:810c", PrefixLen: 64, Scope: "link"}},
			Stats: stats["eth0"]},
		{Name: "wlan0", MAC: "dc:a6:32:5e:81:0d", MTU: 1500, State: "up", Kind: "wireless", Carrier: &on, OperState: "up", AdminUp: true,
			IPv4:     []IPv4Addr{{Address: "192.168.1.43", Netmask: "255.255.255.0", Broadcast: "192.168.1.255", PrefixLen: 24}},
			IPv6:     []IPv6Addr{{Address: "fe80::dea6:32ff:fe5e:810d", PrefixLen: 64, Scope: "link"}},
			Stats:    stats["wlan0"],
			Wireless: &Wireless{SSID: "greenhouse-lan", SignalDBm: ptr(-58), LinkQuality: ptr(52), FrequencyMHz: 5180, BitrateMbps: 433.3}},
	}, nil
}

// Routes is what dhcpcd sets up for two interfaces on one LAN: wired
// preferred (metric 202) over wireless (303), and router advertisements'
// IPv6 default over eth0.
func (Sim) Routes(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []Route{
		{Family: 4, Destination: "0.0.0.0", Gateway: "192.168.1.1", Netmask: "0.0.0.0", Flags: "UG", Metric: 202, Interface: "eth0"},
		{Family: 4, Destination: "0.0.0.0", Gateway: "192.168.1.1", Netmask: "0.0.0.0", Flags: "UG", Metric: 303, Interface: "wlan0"},
		{Family: 4, Destination: "192.168.1.0", PrefixLen: 24, Netmask: "255.255.255.0", Flags: "U", Metric: 202, Interface: "eth0"},
		{Family: 4, Destination: "192.168.1.0", PrefixLen: 24, Netmask: "255.255.255.0", Flags: "U", Metric: 303, Interface: "wlan0"},
		{Family: 6, Destination: "::", Gateway: "fe80::1", Flags: "UGDAe", Metric: 1024, Interface: "eth0"},
		{Family: 6, Destination: "2a02:8071:5e80:7c0::", PrefixLen: 64, Flags: "U", Metric: 256, Interface: "eth0"},
		{Family: 6, Destination: "fe80::", PrefixLen: 64, Flags: "U", Metric: 256, Interface: "eth0"},
		{Family: 6, Destination: "fe80::", PrefixLen: 64, Flags: "U", Metric: 256, Interface: "wlan0"},
	}, nil
}

// DNSServers is the router, as DHCP hands it out.
func (Sim) DNSServers(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []string{"192.168.1.1"}, nil
}

// Socket inodes of the simulated process table (procs.Sim's seed): the
// same numbers appear in its processes' fd/.
const (
	simInodeSSH4    = 18201
	simInodeSSH6    = 18203
	simInodeSession = 24117
	simInodeHTTP    = 18411
	simInodeMDNS    = 17020
	simInodeMQTT    = 20544
)

// Connections lists the board's sockets, filtered by protocol as
// [Connections] does (an unknown name is an error).
func (Sim) Connections(ctx context.Context, protos []string) ([]Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, p := range protos {
		if !slices.Contains([]string{"tcp", "tcp6", "udp", "udp6"}, p) {
			return nil, fmt.Errorf("%sunknown protocol %q (want tcp, tcp6, udp or udp6)", errPrefix, p)
		}
	}
	all := []Conn{
		{Proto: "tcp", LocalAddr: "0.0.0.0", LocalPort: 22, RemoteAddr: "0.0.0.0", State: "LISTEN", UID: 0, Inode: simInodeSSH4},
		{Proto: "tcp", LocalAddr: "0.0.0.0", LocalPort: 80, RemoteAddr: "0.0.0.0", State: "LISTEN", UID: 0, Inode: simInodeHTTP},
		{Proto: "tcp", LocalAddr: "192.168.1.42", LocalPort: 22, RemoteAddr: "192.168.1.20", RemotePort: 51514, State: "ESTABLISHED", UID: 0, Inode: simInodeSession},
		{Proto: "tcp", LocalAddr: "192.168.1.42", LocalPort: 46210, RemoteAddr: "192.168.1.10", RemotePort: 1883, State: "ESTABLISHED", UID: 1000, Inode: simInodeMQTT},
		{Proto: "tcp", LocalAddr: "192.168.1.42", LocalPort: 80, RemoteAddr: "192.168.1.20", RemotePort: 51790, State: "TIME_WAIT"},
		{Proto: "tcp6", LocalAddr: "::", LocalPort: 22, RemoteAddr: "::", State: "LISTEN", UID: 0, Inode: simInodeSSH6},
		{Proto: "udp", LocalAddr: "0.0.0.0", LocalPort: 5353, RemoteAddr: "0.0.0.0", UID: 102, Inode: simInodeMDNS},
	}
	if len(protos) == 0 {
		return all, nil
	}
	return slices.DeleteFunc(all, func(c Conn) bool { return !slices.Contains(protos, c.Proto) }), nil
}

// Neighbors are the router, the owner's laptop and the MQTT broker.
func (Sim) Neighbors(ctx context.Context) ([]Neighbor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []Neighbor{
		{IP: "192.168.1.1", MAC: "3c:a6:2f:11:42:07", Interface: "eth0", Complete: true},
		{IP: "192.168.1.10", MAC: "b8:27:eb:3d:90:12", Interface: "eth0", Complete: true},
		{IP: "192.168.1.20", MAC: "f4:d4:88:6a:0b:31", Interface: "eth0", Complete: true},
	}, nil
}

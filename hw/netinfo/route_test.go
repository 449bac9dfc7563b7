package netinfo

import (
	"math"
	"testing"
	"testing/fstest"
)

func TestRoutesFixtures(t *testing.T) {
	needLittleEndian(t)
	for _, tc := range []struct {
		board string
		want  []Route
		gw    Gateway
	}{
		{
			board: "pi4",
			want: []Route{
				{Family: 4, Destination: "0.0.0.0", PrefixLen: 0, Gateway: "192.168.1.1", Netmask: "0.0.0.0", Flags: "UG", Metric: 100, Interface: "eth0"},
				{Family: 4, Destination: "0.0.0.0", PrefixLen: 0, Gateway: "192.168.1.1", Netmask: "0.0.0.0", Flags: "UG", Metric: 600, Interface: "wlan0"},
				{Family: 4, Destination: "10.8.0.5", PrefixLen: 32, Gateway: "192.168.1.254", Netmask: "255.255.255.255", Flags: "UGH", Metric: 100, Interface: "eth0"},
				{Family: 4, Destination: "10.99.0.0", PrefixLen: 16, Netmask: "255.255.0.0", Flags: "!"},
				{Family: 4, Destination: "172.17.0.0", PrefixLen: 16, Netmask: "255.255.0.0", Flags: "U", Interface: "docker0"},
				{Family: 4, Destination: "192.168.1.0", PrefixLen: 24, Netmask: "255.255.255.0", Flags: "U", Metric: 100, Interface: "eth0"},
				{Family: 4, Destination: "192.168.1.0", PrefixLen: 24, Netmask: "255.255.255.0", Flags: "U", Metric: 600, Interface: "wlan0"},
				{Family: 6, Destination: "2001:db8:1::", PrefixLen: 64, Flags: "U", Metric: 100, Interface: "eth0"},
				{Family: 6, Destination: "2001:db8:1::", PrefixLen: 64, Flags: "U", Metric: 600, Interface: "wlan0"},
				{Family: 6, Destination: "fe80::", PrefixLen: 64, Flags: "U", Metric: 256, Interface: "eth0"},
				{Family: 6, Destination: "fe80::", PrefixLen: 64, Flags: "U", Metric: 256, Interface: "wlan0"},
				{Family: 6, Destination: "::", PrefixLen: 0, Gateway: "fe80::1", Flags: "UGe", Metric: 100, Interface: "eth0"},
				{Family: 6, Destination: "::", PrefixLen: 0, Gateway: "fe80::1", Flags: "UGe", Metric: 600, Interface: "wlan0"},
			},
			gw: Gateway{IPv4: "192.168.1.1", IPv6: "fe80::1", Interface: "eth0", IPv6Interface: "eth0"},
		},
		{
			board: "v6off", // no ipv6_route
			want: []Route{
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.0.1", Netmask: "0.0.0.0", Flags: "UG", Metric: 202, Interface: "eth0"},
				{Family: 4, Destination: "10.0.0.0", PrefixLen: 24, Netmask: "255.255.255.0", Flags: "U", Metric: 202, Interface: "eth0"},
			},
			gw: Gateway{IPv4: "10.0.0.1", Interface: "eth0"},
		},
	} {
		t.Run(tc.board, func(t *testing.T) {
			got, err := Routes(fixture(tc.board))
			if err != nil {
				t.Fatal(err)
			}
			same(t, "routes", got, tc.want)
			same(t, "default gateway", DefaultGateway(got), tc.gw)
		})
	}
}

func TestRoutes6Filter(t *testing.T) {
	needLittleEndian(t)
	const z = "00000000000000000000000000000000"
	m := fstest.MapFS{
		"proc/net/route": &fstest.MapFile{Data: []byte("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
			"ppp0\t00000000\t00000000\t0001\t0\t0\t-1\t00000000\t0\t0\t0\n")},
		"proc/net/ipv6_route": &fstest.MapFile{Data: []byte(
			// Kernel-processed RA: default router with lifetime.
			z + " 00 " + z + " 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0\n" +
				// Subnet-router anycast (forwarding on): local table.
				"20010db8000100000000000000000000 80 " + z + " 00 " + z + " 00000000 00000001 00000000 00300001     eth0\n" +
				// Link-scope multicast route.
				"ff020000000000000000000000000000 10 " + z + " 00 " + z + " 00000100 00000001 00000000 00000001     eth0\n" +
				// Cloned cache entry (kernels before 4.2 listed them).
				"20010db8000200000000000000000001 80 " + z + " 00 fe800000000000000000000000000001 00000000 00000001 00000000 01000003     eth0\n" +
				// A user's "ip -6 route add unreachable 2001:db8:dead::/48".
				"20010db8dead00000000000000000000 30 " + z + " 00 " + z + " 00000400 00000001 00000000 00200200       lo\n" +
				// The main table's null entry.
				z + " 00 " + z + " 00 " + z + " ffffffff 00000001 00000000 00200200       lo\n" +
				"\n")},
	}
	got, err := Routes(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{
		// Metric printed as -1 (a u32 through %d).
		{Family: 4, Destination: "0.0.0.0", Netmask: "0.0.0.0", Flags: "U", Metric: clampInt(math.MaxUint32), Interface: "ppp0"},
		{Family: 6, Destination: "::", Gateway: "fe80::1", Flags: "UGDAe", Metric: 1024, Interface: "eth0"},
		{Family: 6, Destination: "2001:db8:dead::", PrefixLen: 48, Flags: "!n", Metric: 1024, Interface: "lo"},
	}
	same(t, "routes", got, want)
	// A default route without a next hop still names its device.
	same(t, "gateway", DefaultGateway(got), Gateway{IPv6: "fe80::1", Interface: "ppp0", IPv6Interface: "eth0"})
}

func TestRouteFlags(t *testing.T) {
	for _, tc := range []struct {
		fl     uint64
		v4, v6 string
	}{
		{0x0001, "U", "U"},
		{0x0003, "UG", "UG"},
		{0x0005, "UH", "UH"},
		{0x0007, "UGH", "UGH"},
		{0x0201, "!", "U!"},
		{0x0205, "!H", "U!H"},
		{0x0019, "URD", "U"},
		{0x0023, "UGM", "UGm"},
		{0x00450003, "UG", "UGDAe"},
		{0x01000001, "U", "UC"},
		{0x00220001, "U", "Uan"},
		{0x02000000, "", "f"},
		{0, "", ""},
	} {
		if got := flags4(tc.fl); got != tc.v4 {
			t.Errorf("flags4(%#x) = %q, want %q", tc.fl, got, tc.v4)
		}
		if got := flags6(tc.fl); got != tc.v6 {
			t.Errorf("flags6(%#x) = %q, want %q", tc.fl, got, tc.v6)
		}
	}
}

func TestDefaultGateway(t *testing.T) {
	for _, tc := range []struct {
		name   string
		routes []Route
		want   Gateway
	}{
		{"none", nil, Gateway{}},
		{"no default", []Route{{Family: 4, Destination: "192.168.1.0", PrefixLen: 24, Flags: "U", Interface: "eth0"}}, Gateway{}},
		{
			"lower metric later",
			[]Route{
				{Family: 4, Destination: "0.0.0.0", Gateway: "192.168.1.1", Flags: "UG", Metric: 600, Interface: "wlan0"},
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.0.1", Flags: "UG", Metric: 100, Interface: "eth0"},
			},
			Gateway{IPv4: "10.0.0.1", Interface: "eth0"},
		},
		{
			"tie keeps first",
			[]Route{
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.0.1", Flags: "UG", Interface: "eth0"},
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.1.1", Flags: "UG", Interface: "eth1"},
			},
			Gateway{IPv4: "10.0.0.1", Interface: "eth0"},
		},
		{
			"reject is not a gateway",
			[]Route{
				{Family: 4, Destination: "0.0.0.0", Flags: "!", Metric: 0},
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.0.1", Flags: "UG", Metric: 5, Interface: "eth0"},
			},
			Gateway{IPv4: "10.0.0.1", Interface: "eth0"},
		},
		{
			"IPv6 only",
			[]Route{{Family: 6, Destination: "::", Gateway: "fe80::1", Flags: "UGDAe", Metric: 1024, Interface: "wlan0"}},
			Gateway{IPv6: "fe80::1", Interface: "wlan0", IPv6Interface: "wlan0"},
		},
		{
			"families on different links",
			[]Route{
				{Family: 6, Destination: "::", Gateway: "fe80::1", Flags: "UG", Metric: 100, Interface: "wlan0"},
				{Family: 4, Destination: "0.0.0.0", Gateway: "10.0.0.1", Flags: "UG", Metric: 100, Interface: "eth0"},
			},
			Gateway{IPv4: "10.0.0.1", IPv6: "fe80::1", Interface: "eth0", IPv6Interface: "wlan0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same(t, "gateway", DefaultGateway(tc.routes), tc.want)
		})
	}
}

func TestRoutesErrors(t *testing.T) {
	const hdr = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		frags []string
	}{
		{"missing route", map[string]string{}, []string{"proc/net/route"}},
		{"short line", map[string]string{"proc/net/route": hdr + "eth0\t00000000\n"}, []string{"proc/net/route line 2", "eth0"}},
		{"bad gateway", map[string]string{"proc/net/route": hdr + "eth0\t00000000\t0101A8CZ\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"}, []string{"proc/net/route line 2", "0101A8CZ"}},
		{"holey mask", map[string]string{"proc/net/route": hdr + "eth0\t0000000A\t00000000\t0001\t0\t0\t0\t00FF00FF\t0\t0\t0\n"}, []string{"proc/net/route line 2", "non-contiguous", "00FF00FF"}},
		{"bad ipv6 line", map[string]string{"proc/net/route": hdr, "proc/net/ipv6_route": "fe80 40 eth0\n"}, []string{"proc/net/ipv6_route line 1", "fe80 40 eth0"}},
		{"bad ipv6 plen", map[string]string{"proc/net/route": hdr, "proc/net/ipv6_route": "fe800000000000000000000000000000 81 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"}, []string{"proc/net/ipv6_route line 1", " 81 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fstest.MapFS{}
			for k, v := range tc.files {
				m[k] = &fstest.MapFile{Data: []byte(v)}
			}
			_, err := Routes(m)
			wantErr(t, err, tc.frags...)
		})
	}
}

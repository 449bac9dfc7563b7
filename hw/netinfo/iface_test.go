package netinfo

import (
	"errors"
	"io/fs"
	"net/netip"
	"testing"
	"testing/fstest"
)

func TestInterfacesPi4(t *testing.T) {
	got, err := Interfaces(fixture("pi4"), fixtureAddrs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Interface{
		{
			Name: "docker0", MAC: "02:42:8f:11:22:33", MTU: 1500, State: "down", Kind: "bridge",
			Carrier:   ptr(false),
			IPv4:      []IPv4Addr{{Address: "172.17.0.1", Netmask: "255.255.0.0", Broadcast: "172.17.255.255", PrefixLen: 16}},
			OperState: "down", AdminUp: true,
		},
		{
			Name: "eth0", MAC: "dc:a6:32:01:02:03", MTU: 1500, State: "up", Kind: "ethernet",
			Carrier: ptr(true), SpeedMbps: 1000,
			IPv4: []IPv4Addr{
				{Address: "192.168.1.23", Netmask: "255.255.255.0", Broadcast: "192.168.1.255", PrefixLen: 24},
				{Address: "10.8.0.6", Netmask: "255.255.255.254", PrefixLen: 31},
			},
			IPv6: []IPv6Addr{
				{Address: "2001:db8:1:0:dea6:32ff:fe01:203", PrefixLen: 64, Scope: "global"},
				{Address: "fe80::dea6:32ff:fe01:203", PrefixLen: 64, Scope: "link"},
			},
			Stats: Stats{
				BytesSent: 123456789, BytesRecv: 987654321,
				PacketsSent: 412345, PacketsRecv: 812345,
				DropsIn: 17,
			},
			OperState: "up", AdminUp: true,
		},
		{
			Name: "lo", MAC: "00:00:00:00:00:00", MTU: 65536, State: "up", Kind: "loopback",
			Carrier: ptr(true),
			IPv4:    []IPv4Addr{{Address: "127.0.0.1", Netmask: "255.0.0.0", PrefixLen: 8}},
			IPv6:    []IPv6Addr{{Address: "::1", PrefixLen: 128, Scope: "host"}},
			Stats: Stats{
				BytesSent: 2345678, BytesRecv: 2345678,
				PacketsSent: 23456, PacketsRecv: 23456,
			},
			OperState: "unknown", AdminUp: true,
		},
		{
			Name: "wlan0", MAC: "dc:a6:32:01:02:04", MTU: 1500, State: "up", Kind: "wireless",
			Carrier: ptr(true),
			IPv4:    []IPv4Addr{{Address: "192.168.1.24", Netmask: "255.255.255.0", Broadcast: "192.168.1.255", PrefixLen: 24}},
			IPv6: []IPv6Addr{
				{Address: "2001:db8:1:0:1234:5678:9abc:def0", PrefixLen: 64, Scope: "global"},
				{Address: "2001:db8:1:0:a1b2:c3d4:e5f6:718", PrefixLen: 64, Scope: "global", Temporary: true},
				{Address: "fe80::dea6:32ff:fe01:204", PrefixLen: 64, Scope: "link"},
			},
			Stats: Stats{
				BytesSent: 4444444, BytesRecv: 5555555,
				PacketsSent: 22222, PacketsRecv: 33333,
				ErrorsOut: 3, DropsIn: 2,
			},
			Wireless:  &Wireless{SignalDBm: ptr(-54), LinkQuality: ptr(56)},
			OperState: "up", AdminUp: true,
		},
	}
	same(t, "pi4 interfaces", got, want)
}

func TestInterfacesV6Off(t *testing.T) {
	got, err := Interfaces(fixture("v6off"), v6offAddrs)
	if err != nil {
		t.Fatal(err)
	}
	want := []Interface{
		{
			Name: "eth0", MAC: "b8:27:eb:aa:bb:cc", MTU: 1500, State: "up", Kind: "ethernet",
			Carrier: ptr(true), SpeedMbps: 100,
			IPv4:      []IPv4Addr{{Address: "10.0.0.23", Netmask: "255.255.255.0", Broadcast: "10.0.0.255", PrefixLen: 24}},
			Stats:     Stats{BytesSent: 34567, BytesRecv: 45678, PacketsSent: 345, PacketsRecv: 456, ErrorsIn: 1},
			OperState: "up", AdminUp: true,
		},
		{
			Name: "lo", MAC: "00:00:00:00:00:00", MTU: 65536, State: "up", Kind: "loopback",
			Carrier:   ptr(true),
			IPv4:      []IPv4Addr{{Address: "127.0.0.1", Netmask: "255.0.0.0", PrefixLen: 8}},
			Stats:     Stats{BytesSent: 1024, BytesRecv: 1024, PacketsSent: 16, PacketsRecv: 16},
			OperState: "unknown", AdminUp: true,
		},
		{
			// Administratively down: no carrier reading, not associated.
			Name: "wlan0", MAC: "b8:27:eb:dd:ee:ff", MTU: 1500, State: "down", Kind: "wireless",
			Wireless:  &Wireless{},
			OperState: "down",
		},
	}
	same(t, "v6off interfaces", got, want)
}

func TestInterfacesNilAddrFunc(t *testing.T) {
	got, err := Interfaces(fixture("pi4"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range got {
		if ifc.IPv4 != nil {
			t.Errorf("%s: IPv4 %v without an AddrFunc", ifc.Name, ifc.IPv4)
		}
	}
	if len(got) != 4 || len(got[1].IPv6) != 2 {
		t.Errorf("got %s", dump(got))
	}
}

// iface adds a minimal sysfs interface to m.
func iface(m fstest.MapFS, name string, attrs map[string]string) {
	for k, v := range attrs {
		m["sys/class/net/"+name+"/"+k] = &fstest.MapFile{Data: []byte(v + "\n")}
	}
}

func dir() *fstest.MapFile { return &fstest.MapFile{Mode: fs.ModeDir | 0o755} }

func TestInterfacesKindsAndStates(t *testing.T) {
	m := fstest.MapFS{
		// Not an interface: the bonding driver's control file.
		"sys/class/net/bonding_masters": &fstest.MapFile{Data: []byte("\n")},
		"sys/class/net/wlan1/wireless":  dir(),
		"sys/class/net/wlan1/device":    dir(),
		"sys/class/net/usb0/device":     dir(),
		"sys/class/net/can0/device":     dir(),
		// Listed but gone by the time it is read.
		"sys/class/net/gone0": dir(),
	}
	iface(m, "wlan1", map[string]string{"flags": "0x1003", "type": "1", "operstate": "dormant", "address": "AA:BB:CC:DD:EE:01", "mtu": "1500", "carrier": "1"})
	iface(m, "usb0", map[string]string{"flags": "0x1003", "type": "1", "operstate": "lowerlayerdown", "address": "02:00:00:00:00:01", "carrier": "0", "speed": "65535"})
	iface(m, "can0", map[string]string{"flags": "0x81", "type": "280", "operstate": "notpresent", "mtu": "16"})
	iface(m, "veth1a2b", map[string]string{"flags": "0x1003", "type": "1", "operstate": "testing", "address": "9e:3f:00:11:22:33", "speed": "10000"})
	iface(m, "tun0", map[string]string{"flags": "0x1091", "type": "65534", "operstate": "unknown", "address": "", "mtu": "1420"})
	iface(m, "sit0", map[string]string{"flags": "0x80", "type": "776", "operstate": "down", "address": "00:00:00:00", "mtu": "1480"})

	got, err := Interfaces(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Interface{
		{Name: "can0", MTU: 16, State: "down", Kind: "other", OperState: "notpresent", AdminUp: true},
		{Name: "sit0", MTU: 1480, State: "down", Kind: "virtual", OperState: "down"},
		{Name: "tun0", MTU: 1420, State: "unknown", Kind: "virtual", OperState: "unknown", AdminUp: true},
		{Name: "usb0", MAC: "02:00:00:00:00:01", State: "down", Kind: "ethernet", Carrier: ptr(false), OperState: "lowerlayerdown", AdminUp: true},
		{Name: "veth1a2b", MAC: "9e:3f:00:11:22:33", State: "unknown", Kind: "virtual", SpeedMbps: 10000, OperState: "testing", AdminUp: true},
		{Name: "wlan1", MAC: "aa:bb:cc:dd:ee:01", MTU: 1500, State: "down", Kind: "wireless", Carrier: ptr(true), Wireless: &Wireless{}, OperState: "dormant", AdminUp: true},
	}
	same(t, "interfaces", got, want)
}

func TestInterfacesLoopbackDown(t *testing.T) {
	// "ip link set lo down": operstate stays unknown, IFF_UP clears.
	m := fstest.MapFS{}
	iface(m, "lo", map[string]string{"flags": "0x8", "type": "772", "operstate": "unknown", "address": "00:00:00:00:00:00"})
	got, err := Interfaces(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].State != "unknown" || got[0].Kind != "loopback" || got[0].MAC != "00:00:00:00:00:00" {
		t.Errorf("got %s", dump(got))
	}
}

func TestInterfacesIPv6Details(t *testing.T) {
	m := fstest.MapFS{
		"proc/net/if_inet6": &fstest.MapFile{Data: []byte(
			"fe800000000000000000000000000001 02 40 20 c0     eth0\n" + // tentative (DAD running)
				"fec00000000000000000000000000001 02 40 40 80     eth0\n" + // site-local
				"20010db8000000000000000000000001 02 40 00 20     eth0\n" + // deprecated
				"20010db8000000000000000000000002 03 40 00 00     eth1\n"),
		},
	}
	iface(m, "eth0", map[string]string{"flags": "0x1003", "type": "1"})
	got, err := Interfaces(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []IPv6Addr{
		{Address: "2001:db8::1", PrefixLen: 64, Scope: "global", Deprecated: true},
		{Address: "fec0::1", PrefixLen: 64, Scope: "global"},
		{Address: "fe80::1", PrefixLen: 64, Scope: "link", Tentative: true},
	}
	same(t, "eth0 IPv6", got[0].IPv6, want)
}

func TestInterfacesWirelessNoSignal(t *testing.T) {
	// A driver without a signal reading prints level 0.
	m := fstest.MapFS{
		"proc/net/wireless": &fstest.MapFile{Data: []byte(
			"Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE\n" +
				" face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22\n" +
				" wlan0: 0000    0     0  -256        0      0      0      0      0        0\n")},
		"sys/class/net/wlan0/phy80211": dir(),
	}
	iface(m, "wlan0", map[string]string{"flags": "0x1003", "type": "1", "operstate": "up"})
	got, err := Interfaces(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "wireless", got[0].Wireless, &Wireless{LinkQuality: ptr(0)})
}

func TestInterfacesBroadcastNeedsFlag(t *testing.T) {
	// A point-to-point link (no IFF_BROADCAST) has no broadcast address;
	// a v4-mapped prefix from an AddrFunc is understood as IPv4.
	m := fstest.MapFS{"sys/class/net/ppp0/device": dir()}
	iface(m, "ppp0", map[string]string{"flags": "0x10d1", "type": "512"})
	iface(m, "eth0", map[string]string{"flags": "0x1003", "type": "1"})
	addrs := func(name string) ([]netip.Prefix, error) {
		if name == "ppp0" {
			return []netip.Prefix{netip.MustParsePrefix("10.64.0.5/24")}, nil
		}
		return []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("::ffff:192.168.7.2"), 96+22), netip.MustParsePrefix("192.168.9.9/32")}, nil
	}
	got, err := Interfaces(m, addrs)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "eth0", got[0].IPv4, []IPv4Addr{
		{Address: "192.168.7.2", Netmask: "255.255.252.0", Broadcast: "192.168.7.255", PrefixLen: 22},
		{Address: "192.168.9.9", Netmask: "255.255.255.255", PrefixLen: 32},
	})
	same(t, "ppp0", got[1].IPv4, []IPv4Addr{{Address: "10.64.0.5", Netmask: "255.255.255.0", PrefixLen: 24}})
}

func TestInterfacesErrors(t *testing.T) {
	t.Run("no sysfs", func(t *testing.T) {
		_, err := Interfaces(fstest.MapFS{}, nil)
		wantErr(t, err, "sys/class/net")
	})
	for _, tc := range []struct {
		name, file, value string
		frags             []string
	}{
		{"bad mtu", "mtu", "15OO", []string{"sys/class/net/eth0/mtu", `"15OO"`}},
		{"bad flags", "flags", "1003", []string{"sys/class/net/eth0/flags", `"1003"`}},
		{"bad type", "type", "ether", []string{"sys/class/net/eth0/type", `"ether"`}},
		{"bad counter", "statistics/rx_bytes", "-5", []string{"sys/class/net/eth0/statistics/rx_bytes", `"-5"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mapFixture(t, "pi4")
			m["sys/class/net/eth0/"+tc.file] = &fstest.MapFile{Data: []byte(tc.value + "\n")}
			_, err := Interfaces(m, nil)
			wantErr(t, err, tc.frags...)
		})
	}
	t.Run("bad if_inet6", func(t *testing.T) {
		m := mapFixture(t, "pi4")
		m["proc/net/if_inet6"] = &fstest.MapFile{Data: []byte("00000000000000000000000000000001 01 80 10 80       lo\nfe80::1 02 40 20 80 eth0\n")}
		_, err := Interfaces(m, nil)
		wantErr(t, err, "proc/net/if_inet6 line 2", "fe80::1")
	})
	t.Run("bad wireless", func(t *testing.T) {
		m := mapFixture(t, "pi4")
		m["proc/net/wireless"] = &fstest.MapFile{Data: []byte("h1\nh2\n wlan0: 0000 good. -54. -256\n")}
		_, err := Interfaces(m, nil)
		wantErr(t, err, "proc/net/wireless line 3", "good.")
	})
	t.Run("addr func", func(t *testing.T) {
		boom := errors.New("netlink: permission denied")
		_, err := Interfaces(fixture("pi4"), func(name string) ([]netip.Prefix, error) {
			if name == "eth0" {
				return nil, boom
			}
			return nil, nil
		})
		wantErr(t, err, "eth0", "permission denied")
		if !errors.Is(err, boom) {
			t.Errorf("%v does not wrap the AddrFunc's error", err)
		}
	})
}

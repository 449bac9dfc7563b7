package netinfo

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const iwPi4 = `Connected to 9c:53:22:aa:bb:cc (on wlan0)
	SSID: HomeNet 5G
	freq: 5180
	signal: -53 dBm
	tx bitrate: 433.3 MBit/s

	bss flags:	short-slot-time
	dtim period:	1
	beacon int:	100
`

func TestParseIWLink(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      *Wireless
	}{
		{"brcmfmac", iwPi4, &Wireless{SSID: "HomeNet 5G", SignalDBm: ptr(-53), FrequencyMHz: 5180, BitrateMbps: 433.3}},
		{
			"iw 6 with escapes",
			"Connected to 9c:53:22:aa:bb:cc (on wlan0)\n" +
				"\tSSID: Caf\\xc3\\xa9 \\x5c\\x20\n" +
				"\tfreq: 2437.0\n" +
				"\tRX: 123456 bytes (789 packets)\n" +
				"\tTX: 23456 bytes (123 packets)\n" +
				"\tsignal: -61 [-63, -64] dBm\n" +
				"\trx bitrate: 65.0 MBit/s MCS 7 short GI\n" +
				"\ttx bitrate: 72.2 MBit/s MCS 7 short GI\n" +
				"\tbss flags: short-preamble short-slot-time\n",
			&Wireless{SSID: "Café \\ ", SignalDBm: ptr(-61), FrequencyMHz: 2437, BitrateMbps: 72.2},
		},
		{"CRLF and fractional channel", "Connected to 9c:53:22:aa:bb:cc (on wlan0)\r\n\tSSID: x\r\n\tfreq: 5955.5\r\n", &Wireless{SSID: "x", FrequencyMHz: 5956}},
		{"bad escape kept", "Connected to 00:11:22:33:44:55 (on wlan0)\n\tSSID: a\\xZZb\\x4\n", &Wireless{SSID: `a\xZZb\x4`}},
		{"bad numbers ignored", "Connected to 00:11:22:33:44:55 (on wlan0)\n\tfreq: fast\n\tsignal: strong dBm\n\ttx bitrate: ? MBit/s\n", &Wireless{}},
		{"not connected", "Not connected.\n", nil},
		{"no device", "command failed: No such device (-19)\n", nil},
		{"empty", "", nil},
		{"fields before connected", "\tSSID: stray\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			same(t, "iw link", ParseIWLink(tc.out), tc.want)
		})
	}
}

// fakeIW writes a shell script that answers "iw dev wlan0 link" with out,
// says "Not connected." for other interfaces, and logs its arguments.
func fakeIW(t *testing.T, out string) (path, log string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs /bin/sh")
	}
	d := t.TempDir()
	path, log = filepath.Join(d, "iw"), filepath.Join(d, "log")
	script := "#!/bin/sh\necho \"$@\" >> '" + log + "'\n" +
		"if [ \"$1 $2 $3\" = \"dev wlan0 link\" ]; then\ncat <<'EOF'\n" + out + "EOF\nelse\necho 'Not connected.'\nfi\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, log
}

func TestLinuxFixtureWithIW(t *testing.T) {
	iw, log := fakeIW(t, iwPi4)
	got, err := Linux{Root: "testdata/pi4", IW: iw, Addrs: fixtureAddrs}.Interfaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].Name != "wlan0" {
		t.Fatalf("got %s", dump(got))
	}
	// Signal and quality from /proc/net/wireless, the rest from iw.
	same(t, "wlan0", got[3].Wireless, &Wireless{SSID: "HomeNet 5G", SignalDBm: ptr(-54), LinkQuality: ptr(56), FrequencyMHz: 5180, BitrateMbps: 433.3})
	same(t, "eth0 addresses", got[1].IPv4[0].Address, "192.168.1.23")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "iw calls", string(b), "dev wlan0 link\n")
}

func TestLinuxIWFillsSignal(t *testing.T) {
	// No /proc/net/wireless line: iw's signal is used.
	iw, _ := fakeIW(t, iwPi4)
	m := mapFixture(t, "pi4")
	delete(m, "proc/net/wireless")
	root := t.TempDir()
	for name, f := range m {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Linux{Root: root, IW: iw, Addrs: fixtureAddrs}.Interfaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	same(t, "wlan0", got[3].Wireless, &Wireless{SSID: "HomeNet 5G", SignalDBm: ptr(-53), FrequencyMHz: 5180, BitrateMbps: 433.3})
}

func TestLinuxIWAbsentOrDown(t *testing.T) {
	for _, tc := range []struct{ name, root, iw string }{
		{"missing binary", "testdata/pi4", "/nonexistent/iw"},
		{"disabled", "testdata/pi4", "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Linux{Root: tc.root, IW: tc.iw, Addrs: fixtureAddrs}.Interfaces(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			same(t, "wlan0", got[3].Wireless, &Wireless{SignalDBm: ptr(-54), LinkQuality: ptr(56)})
		})
	}
	t.Run("interface down", func(t *testing.T) {
		iw, log := fakeIW(t, iwPi4)
		got, err := Linux{Root: "testdata/v6off", IW: iw, Addrs: v6offAddrs}.Interfaces(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		same(t, "wlan0", got[2].Wireless, &Wireless{})
		if _, err := os.Stat(log); !os.IsNotExist(err) {
			t.Errorf("iw ran for an interface that is down (%v)", err)
		}
	})
}

func TestLinuxFixtureMethods(t *testing.T) {
	needLittleEndian(t)
	ctx := context.Background()
	l := Linux{Root: "testdata/pi4"}
	rs, err := l.Routes(ctx)
	if err != nil || len(rs) != 13 {
		t.Errorf("Routes: %d, %v", len(rs), err)
	}
	dns, err := l.DNSServers(ctx)
	same(t, "DNSServers", dns, []string{"192.168.1.1", "fe80::1%eth0"})
	if err != nil {
		t.Error(err)
	}
	cs, err := l.Connections(ctx, []string{"udp"})
	same(t, "Connections", cs, pi4Conns()[9:12])
	if err != nil {
		t.Error(err)
	}
	ns, err := l.Neighbors(ctx)
	if err != nil || len(ns) != 5 {
		t.Errorf("Neighbors: %d, %v", len(ns), err)
	}
}

func TestLinuxCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := Linux{Root: "testdata/pi4", IW: "-", Addrs: fixtureAddrs}
	for name, call := range map[string]func() error{
		"Interfaces":  func() error { _, err := l.Interfaces(ctx); return err },
		"Routes":      func() error { _, err := l.Routes(ctx); return err },
		"DNSServers":  func() error { _, err := l.DNSServers(ctx); return err },
		"Connections": func() error { _, err := l.Connections(ctx, nil); return err },
		"Neighbors":   func() error { _, err := l.Neighbors(ctx); return err },
	} {
		if err := call(); err != context.Canceled {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}
}

// needLive skips tests of the running kernel off Linux.
func needLive(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("live test needs Linux")
	}
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net:", err)
	}
}

func TestLiveInterfaces(t *testing.T) {
	needLive(t)
	ifs, err := Linux{Root: "/"}.Interfaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ifs, func(ifc Interface) bool { return ifc.Name == "lo" })
	if i < 0 {
		t.Fatalf("no lo in %s", dump(ifs))
	}
	lo := ifs[i]
	if lo.State != "up" || lo.Kind != "loopback" || lo.MAC != "00:00:00:00:00:00" || lo.MTU <= 0 {
		t.Errorf("lo: %s", dump(lo))
	}
	if !slices.Contains(lo.IPv4, IPv4Addr{Address: "127.0.0.1", Netmask: "255.0.0.0", PrefixLen: 8}) {
		t.Errorf("lo has no 127.0.0.1/8: %s", dump(lo.IPv4))
	}
	if !slices.IsSortedFunc(ifs, func(a, b Interface) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("interfaces not sorted by name")
	}
}

func TestLiveConnections(t *testing.T) {
	needLive(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cs, err := Linux{}.Connections(context.Background(), []string{"tcp"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cs, func(c Conn) bool { return c.LocalPort == port && c.LocalAddr == "127.0.0.1" })
	if i < 0 {
		t.Fatalf("listener on 127.0.0.1:%d not found among %d sockets", port, len(cs))
	}
	c := cs[i]
	if c.Proto != "tcp" || c.State != "LISTEN" || c.UID != os.Getuid() || c.Inode == 0 || c.RemoteAddr != "0.0.0.0" || c.RemotePort != 0 {
		t.Errorf("listener: %+v (uid %d)", c, os.Getuid())
	}
}

func TestLiveOthers(t *testing.T) {
	needLive(t)
	ctx := context.Background()
	rs, err := Linux{}.Routes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("routes: %d, default %+v", len(rs), DefaultGateway(rs))
	if _, err := (Linux{}).DNSServers(ctx); err != nil {
		t.Error(err)
	}
	if _, err := (Linux{}).Neighbors(ctx); err != nil {
		t.Error(err)
	}
}

func TestNetAddrs(t *testing.T) {
	needLive(t)
	ps, err := NetAddrs("lo")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ps, netip.MustParsePrefix("127.0.0.1/8")) {
		t.Errorf("lo: %v", ps)
	}
	ps, err = NetAddrs("nosuch0")
	if err != nil || ps != nil {
		t.Errorf("nosuch0: %v, %v", ps, err)
	}
}

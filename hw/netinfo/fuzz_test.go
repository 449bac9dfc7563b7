package netinfo

import (
	"io/fs"
	"net/netip"
	"testing"
	"testing/fstest"
)

// FuzzNetinfo swaps fuzzed contents into the Pi 4 fixture's /proc/net
// tables, resolv.conf and eth0's sysfs attributes and reads them as the
// network tools do. None may panic; accepted routes have a family of 4 or
// 6 and a prefix length that fits it, and accepted connections name an
// address that parses and a port in 0..65535.
func FuzzNetinfo(f *testing.F) {
	base := fstest.MapFS{}
	err := fs.WalkDir(fixture("pi4"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fixture("pi4"), p)
		base[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, route, route6, tcp, tcp6, udp, arp, inet6, wireless, resolv, flags, speed, iw []byte) {
		root := fstest.MapFS{}
		for k, v := range base {
			root[k] = v
		}
		for name, data := range map[string][]byte{
			"proc/net/route": route, "proc/net/ipv6_route": route6, "proc/net/tcp": tcp, "proc/net/tcp6": tcp6,
			"proc/net/udp": udp, "proc/net/arp": arp, "proc/net/if_inet6": inet6, "proc/net/wireless": wireless,
			"etc/resolv.conf": resolv, "sys/class/net/eth0/flags": flags, "sys/class/net/eth0/speed": speed,
		} {
			if len(data) > 0 { // empty keeps the fixture's file
				root[name] = &fstest.MapFile{Data: data}
			}
		}
		if rs, err := Routes(root); err == nil {
			for _, r := range rs {
				if (r.Family != 4 || r.PrefixLen > 32) && (r.Family != 6 || r.PrefixLen > 128) || r.PrefixLen < 0 {
					t.Fatalf("route %+v", r)
				}
			}
			_ = DefaultGateway(rs)
		}
		if cs, err := Connections(root, nil); err == nil {
			for _, c := range cs {
				if _, err := netip.ParseAddr(c.LocalAddr); err != nil || c.LocalPort < 0 || c.LocalPort > 65535 {
					t.Fatalf("connection %+v", c)
				}
			}
		}
		_, _ = Neighbors(root)
		_, _ = DNSServers(root)
		_, _ = Interfaces(root, fixtureAddrs)
		_ = ParseIWLink(string(iw))
	})
}

package netinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"strings"
)

// Route flags (include/uapi/linux/route.h, ipv6_route.h).
const (
	rtfUp        = 0x0001
	rtfGateway   = 0x0002
	rtfHost      = 0x0004
	rtfReinstate = 0x0008
	rtfDynamic   = 0x0010
	rtfModified  = 0x0020
	rtfReject    = 0x0200
	rtfDefault   = 0x00010000 // IPv6: default router learned from an RA
	rtfAllOnLink = 0x00020000
	rtfAddrconf  = 0x00040000
	rtfAnycast   = 0x00100000
	rtfNoNextHop = 0x00200000
	rtfExpires   = 0x00400000
	rtfCache     = 0x01000000
	rtfFlow      = 0x02000000
	rtfLocal     = 0x80000000
)

// Routes returns the IPv4 routes of proc/net/route followed by the IPv6
// routes of proc/net/ipv6_route, each in kernel order.
//
// proc/net/route holds only the main table, like "ip route". ipv6_route
// dumps every table and has no table column, so to match "ip -6 route"
// Routes drops what the kernel keeps in the local table or adds
// internally: routes to the host's own addresses (RTF_LOCAL) and anycast
// addresses (RTF_ANYCAST), the ff00::/8 multicast routes of every
// interface, cloned cache entries (RTF_CACHE, old kernels), and each
// table's "::/0 dev lo metric 4294967295" reject sentinel. A user's
// "unreachable" routes (reject, dev lo, ordinary metric) are kept.
// A missing ipv6_route (IPv6 disabled) is not an error.
func Routes(fsys fs.FS) ([]Route, error) {
	r := &fileReader{fsys: fsys}
	const file4 = "proc/net/route"
	s, err := r.readString(file4)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	out := make([]Route, 0, strings.Count(s, "\n"))
	if out, err = parseRoute4(s, out); err != nil {
		return nil, err
	}
	s, err = r.readString("proc/net/ipv6_route")
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	return parseRoute6(s, out)
}

// parseRoute4 parses proc/net/route:
//
//	Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
//	eth0	00000000	0101A8C0	0003	0	0	100	00000000	0	0	0
//
// Addresses are __be32 printed with %08X, i.e. byte-swapped on the
// little-endian Pi; the metric is a u32 printed with %d.
func parseRoute4(s string, out []Route) ([]Route, error) {
	const file = "proc/net/route"
	n := 0
	for line := range strings.Lines(s) {
		n++
		var f [11]string
		nf := fields(line, f[:])
		if nf == 0 || f[0] == "Iface" {
			continue
		}
		if nf < 8 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		dst, ok1 := addr4Host(f[1])
		gw, ok2 := addr4Host(f[2])
		flags, ok3 := parseHex(f[3])
		metric, ok4 := parseInt(f[6])
		mask, ok5 := addr4Host(f[7])
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		m := be32(mask)
		plen := bits.LeadingZeros32(^m)
		if plen < 32 && m<<plen != 0 {
			return nil, lineErr(file, n, "non-contiguous netmask", f[7])
		}
		if metric < 0 { // fib_priority is a u32 printed with %d
			metric += 1 << 32
		}
		rt := Route{
			Family:      4,
			Destination: dst.String(),
			PrefixLen:   plen,
			Netmask:     mask.String(),
			Flags:       flags4(flags),
			Metric:      clampInt(uint64(metric)),
		}
		if !gw.IsUnspecified() {
			rt.Gateway = gw.String()
		}
		if f[0] != "*" { // unreachable/prohibit routes have no device
			rt.Interface = f[0]
		}
		out = append(out, rt)
	}
	return out, nil
}

// parseRoute6 parses proc/net/ipv6_route:
//
//	00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000064 00000001 00000000 00450003     eth0
//
// destination, its prefix length, source, its prefix length, next hop,
// metric, refcount, use count and flags (all hex, addresses in network
// order), then the device.
func parseRoute6(s string, out []Route) ([]Route, error) {
	const file = "proc/net/ipv6_route"
	n := 0
	for line := range strings.Lines(s) {
		n++
		var f [10]string
		switch fields(line, f[:]) {
		case 0:
			continue
		case 10:
		default:
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		dst, ok1 := addr6Net(f[0])
		plen, ok2 := parseHex(f[1])
		gw, ok3 := addr6Net(f[4])
		metric, ok4 := parseHex(f[5])
		flags, ok5 := parseHex(f[8])
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || plen > 128 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		switch {
		case flags&(rtfLocal|rtfAnycast|rtfCache) != 0:
			continue
		case plen >= 8 && dst.As16()[0] == 0xff:
			continue // multicast: addrconf adds ff00::/8 on every link
		case flags&rtfReject != 0 && plen == 0 && metric == math.MaxUint32 && f[9] == "lo":
			continue // the table's null entry
		}
		rt := Route{
			Family:      6,
			Destination: dst.String(),
			PrefixLen:   int(plen),
			Flags:       flags6(flags),
			Metric:      clampInt(metric),
			Interface:   f[9],
		}
		if !gw.IsUnspecified() {
			rt.Gateway = gw.String()
		}
		out = append(out, rt)
	}
	return out, nil
}

// flags4 spells IPv4 route flags as net-tools' route -n does (lib/inet_gr.c):
// a reject route shows "!" instead of "U"/"G".
func flags4(fl uint64) string {
	switch fl {
	case rtfUp: // the common cases cost no allocation
		return "U"
	case rtfUp | rtfGateway:
		return "UG"
	case rtfUp | rtfHost:
		return "UH"
	case rtfUp | rtfGateway | rtfHost:
		return "UGH"
	case rtfUp | rtfReject:
		return "!"
	}
	var b []byte
	if fl&rtfUp != 0 {
		b = append(b, 'U')
	}
	if fl&rtfGateway != 0 {
		b = append(b, 'G')
	}
	if fl&rtfReject != 0 {
		b = append(b[:0], '!')
	}
	for _, c := range [...]struct {
		bit uint64
		ch  byte
	}{{rtfHost, 'H'}, {rtfReinstate, 'R'}, {rtfDynamic, 'D'}, {rtfModified, 'M'}} {
		if fl&c.bit != 0 {
			b = append(b, c.ch)
		}
	}
	return string(b)
}

// flags6 spells IPv6 route flags as net-tools' route -6 -n does
// (lib/inet6_gr.c), e.g. "UGDAe" for a default router learned from an RA.
func flags6(fl uint64) string {
	switch fl {
	case rtfUp:
		return "U"
	case rtfUp | rtfGateway:
		return "UG"
	case rtfUp | rtfGateway | rtfDefault | rtfAddrconf | rtfExpires:
		return "UGDAe"
	}
	var b []byte
	for _, c := range [...]struct {
		bit uint64
		ch  byte
	}{
		{rtfUp, 'U'}, {rtfReject, '!'}, {rtfGateway, 'G'}, {rtfHost, 'H'},
		{rtfDefault, 'D'}, {rtfAddrconf, 'A'}, {rtfCache, 'C'}, {rtfAllOnLink, 'a'},
		{rtfExpires, 'e'}, {rtfModified, 'm'}, {rtfNoNextHop, 'n'}, {rtfFlow, 'f'},
	} {
		if fl&c.bit != 0 {
			b = append(b, c.ch)
		}
	}
	return string(b)
}

// DefaultGateway picks, per family, the default route (prefix length 0)
// with the lowest metric, as the kernel does; the first one wins a tie.
// Reject routes ("unreachable default") are not gateways. A default route
// without a next hop (a PPP or cellular link) still names its interface.
func DefaultGateway(routes []Route) Gateway {
	best4, best6 := -1, -1
	for i := range routes {
		rt := &routes[i]
		if rt.PrefixLen != 0 || strings.Contains(rt.Flags, "!") {
			continue
		}
		switch rt.Family {
		case 4:
			if best4 < 0 || rt.Metric < routes[best4].Metric {
				best4 = i
			}
		case 6:
			if best6 < 0 || rt.Metric < routes[best6].Metric {
				best6 = i
			}
		}
	}
	var g Gateway
	if best6 >= 0 {
		g.IPv6 = routes[best6].Gateway
		g.IPv6Interface = routes[best6].Interface
		g.Interface = g.IPv6Interface
	}
	if best4 >= 0 {
		g.IPv4 = routes[best4].Gateway
		g.Interface = routes[best4].Interface
	}
	return g
}

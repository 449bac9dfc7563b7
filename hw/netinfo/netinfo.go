// Package netinfo reports a Raspberry Pi's network state: interfaces and
// their addresses, routes, DNS servers, sockets and ARP neighbours.
//
// Everything is parsed from files an unprivileged user may read
// (/proc/net, /sys/class/net, /etc/resolv.conf), so the agent needs no
// root, no cgo and no ip/ss/netstat binaries, which minimal images lack.
// The parsers are pure functions over an [fs.FS] rooted at "/" (paths
// inside are "proc/net/route", "sys/class/net/eth0/mtu", ...), which keeps
// them testable on fixture trees copied from real boards. [Linux] binds
// them to the live machine and adds the two things no file holds: IPv4
// addresses (asked of the kernel over netlink by the standard library) and
// the Wi-Fi SSID (from iw, when installed).
//
// Allocation is kept low because the agent runs on a Pi Zero: small kernel
// files are read into one reused buffer, the socket tables are streamed,
// and fields are split without copying.
package netinfo

import (
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/netip"
)

// Interface is one network interface as sysfs, /proc/net and the kernel's
// address list describe it.
type Interface struct {
	Name string
	// MAC is the sysfs address in lower case ("aa:bb:cc:dd:ee:ff"); ""
	// when the interface has none (tun, wireguard, an all-zero address).
	// Loopback keeps "00:00:00:00:00:00", which is what tools print.
	MAC string
	MTU int
	// State is "up", "down" or "unknown", folded from [Interface.OperState]
	// so a caller need not know RFC 2863: up -> up; down, lowerlayerdown,
	// notpresent, dormant -> down; unknown, testing -> unknown, except that
	// loopback (which never reports a carrier) is "up" when IFF_UP is set.
	State string
	// Kind is "loopback", "ethernet", "wireless" (has wireless/ or
	// phy80211/), "bridge" (has bridge/), "virtual" (no device link: veth,
	// tun, dummy, wireguard...) or "other" (a device that is not Ethernet).
	Kind string
	// Carrier is the sysfs carrier; nil when the kernel refuses to say,
	// which it does while the interface is administratively down.
	Carrier *bool
	// SpeedMbps is the negotiated link speed; 0 when unknown (Wi-Fi, down
	// links and virtual devices report -1 or nothing).
	SpeedMbps int
	IPv4      []IPv4Addr
	// IPv6 is sorted global, link, host, then by address, because the
	// kernel lists addresses in hash order.
	IPv6  []IPv6Addr
	Stats Stats
	// Wireless is set for every wireless interface (Kind "wireless"),
	// possibly empty when it is not associated, and nil otherwise.
	Wireless *Wireless

	// OperState is the raw sysfs operstate ("up", "dormant", ...).
	OperState string
	// AdminUp is IFF_UP: the interface was brought up ("ip link set up").
	// With State "down" it tells a missing cable from a disabled port.
	AdminUp bool
}

// IPv4Addr is an IPv4 address with its netmask in both notations.
type IPv4Addr struct {
	Address   string
	Netmask   string // dotted quad, "255.255.255.0"
	Broadcast string // "" on /31, /32 and interfaces without IFF_BROADCAST (loopback, point-to-point)
	PrefixLen int
}

// IPv6Addr is an IPv6 address from /proc/net/if_inet6.
type IPv6Addr struct {
	Address   string
	PrefixLen int
	// Scope is "global", "link" or "host"; the deprecated site-local
	// scope is reported as "global" because it routes beyond the link.
	Scope string
	// Temporary marks RFC 4941 privacy addresses, Deprecated addresses
	// past their preferred lifetime (not used for new connections), and
	// Tentative ones still in duplicate address detection.
	Temporary, Deprecated, Tentative bool
}

// Stats are the interface counters since the interface was created, from
// sysfs statistics/{tx,rx}_{bytes,packets,errors,dropped}.
type Stats struct {
	BytesSent, BytesRecv     uint64
	PacketsSent, PacketsRecv uint64
	ErrorsIn, ErrorsOut      uint64
	DropsIn, DropsOut        uint64
}

// Wireless is the association state of a Wi-Fi interface.
type Wireless struct {
	SSID string // "" when not associated or iw is unavailable
	// SignalDBm is the received signal strength; nil when unknown.
	SignalDBm *int
	// LinkQuality is /proc/net/wireless's link column, 0..70 for cfg80211
	// drivers (signal+110 clamped); nil when unknown.
	LinkQuality  *int
	FrequencyMHz int     // 0 when unknown (needs iw)
	BitrateMbps  float64 // transmit bitrate, 0 when unknown (needs iw)
}

// AddrFunc returns an interface's addresses with prefix lengths. IPv4
// addresses are not in any /proc file in usable form (only
// /proc/net/fib_trie, which needs a tree walk and lacks interface names),
// so [Linux] asks the kernel over netlink through the standard library
// ([NetAddrs]) and tests pass fixtures. Only IPv4 prefixes are used; an
// unknown interface should yield no addresses and no error.
type AddrFunc func(ifname string) ([]netip.Prefix, error)

// Route is one entry of the kernel's main routing table.
type Route struct {
	Family      int    // 4 or 6
	Destination string // "0.0.0.0" / "::" for default
	PrefixLen   int
	Gateway     string // "" when directly connected
	Netmask     string // dotted for IPv4, "" for IPv6
	// Flags are spelled as route -n (IPv4) and route -6 -n (IPv6) spell
	// them: "U", "UG", "UH", "UGH", "!" (reject), "UGDAe"...
	Flags     string
	Metric    int
	Interface string // "" for routes without a device (unreachable, prohibit)
}

// Gateway is the default route the kernel prefers: for each family the
// default route with the lowest metric.
type Gateway struct {
	IPv4, IPv6 string
	// Interface carries the preferred IPv4 default route, or the IPv6 one
	// when there is no IPv4 default.
	Interface string
	// IPv6Interface carries the preferred IPv6 default route; IPv6
	// gateways are usually link-local and mean nothing without it.
	IPv6Interface string
}

// Conn is one socket from /proc/net/{tcp,tcp6,udp,udp6}.
type Conn struct {
	Proto      string // "tcp", "tcp6", "udp", "udp6"
	LocalAddr  string
	LocalPort  int
	RemoteAddr string
	RemotePort int
	// State is the TCP state (ESTABLISHED, SYN_SENT, SYN_RECV, FIN_WAIT1,
	// FIN_WAIT2, TIME_WAIT, CLOSE, CLOSE_WAIT, LAST_ACK, LISTEN, CLOSING).
	// For UDP it is "" when unconnected and ESTABLISHED when connected.
	State string
	UID   int
	Inode uint64 // 0 for TIME_WAIT and request sockets, which have no file
}

// Neighbor is one IPv4 ARP cache entry (IPv6 neighbours are only available
// over netlink).
type Neighbor struct {
	IP        string
	MAC       string // lower case; "" while resolution is incomplete
	Interface string
	Complete  bool // ATF_COM: the MAC address is known
}

// errPrefix starts every error so a tool's output names the subsystem.
const errPrefix = "netinfo: "

// fileReader reads small kernel files into one reused buffer. sysfs says
// every attribute is 4096 bytes long, so fs.ReadFile would allocate 4.5 KB
// per attribute, and listing a Pi's interfaces reads about eighty.
type fileReader struct {
	fsys fs.FS
	buf  []byte
}

// read returns the whole file. The slice aliases the reader's buffer and
// is valid until the next call.
func (r *fileReader) read(name string) ([]byte, error) {
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if len(r.buf) == 0 {
		r.buf = make([]byte, 512)
	}
	n, empty := 0, 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := f.Read(r.buf[n:])
		n += m
		if err == io.EOF {
			return r.buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			// Guard against readers that return (0, nil) forever.
			if empty++; empty > 100 {
				return nil, io.ErrNoProgress
			}
		}
	}
}

// readString returns the whole file as a new string, so substrings
// (interface names, fields) can be kept without further copies.
func (r *fileReader) readString(name string) (string, error) {
	b, err := r.read(name)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// text is what the field helpers accept: file contents as a string (small
// files, read once) or as bytes (socket tables, streamed).
type text interface{ ~string | ~[]byte }

// isSpace reports the separators of kernel tables.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// fields splits s at runs of blanks into dst without copying (dst is
// usually a stack array) and returns how many fields it found; fields
// beyond len(dst) are dropped.
func fields[T text](s T, dst []T) int {
	n := 0
	for i := 0; i < len(s) && n < len(dst); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		dst[n] = s[i:j]
		n++
		i = j
	}
	return n
}

// trim strips leading and trailing blanks.
func trim[T text](s T) T {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

// parseHex parses 1..16 hex digits (no prefix) without allocating.
func parseHex[T text](s T) (uint64, bool) {
	if len(s) == 0 || len(s) > 16 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// parseUint parses a decimal number without allocating.
func parseUint[T text](s T) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseInt parses an optionally negative decimal number.
func parseInt[T text](s T) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	u, ok := parseUint(s)
	if !ok || u > math.MaxInt64 {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// clampInt converts to int, saturating on 32-bit platforms (GOARCH=arm),
// where kernel values such as metric 0xffffffff do not fit.
func clampInt(v uint64) int {
	if v > math.MaxInt {
		return math.MaxInt
	}
	return int(v)
}

// addr4Host decodes an IPv4 address the kernel printed as one 32-bit word
// in host byte order (%08X of a __be32): on the little-endian Pi,
// 192.168.1.1 reads "0101A8C0".
func addr4Host[T text](h T) (netip.Addr, bool) {
	if len(h) != 8 {
		return netip.Addr{}, false
	}
	w, ok := parseHex(h)
	if !ok {
		return netip.Addr{}, false
	}
	var a [4]byte
	binary.NativeEndian.PutUint32(a[:], uint32(w))
	return netip.AddrFrom4(a), true
}

// addr6Host decodes an IPv6 address printed as four host-order 32-bit
// words (/proc/net/tcp6, udp6).
func addr6Host[T text](h T) (netip.Addr, bool) {
	if len(h) != 32 {
		return netip.Addr{}, false
	}
	var a [16]byte
	for i := 0; i < 4; i++ {
		w, ok := parseHex(h[8*i : 8*i+8])
		if !ok {
			return netip.Addr{}, false
		}
		binary.NativeEndian.PutUint32(a[4*i:], uint32(w))
	}
	return netip.AddrFrom16(a), true
}

// addr6Net decodes an IPv6 address printed as 32 hex digits in network
// byte order (%pi6: /proc/net/if_inet6, ipv6_route).
func addr6Net[T text](h T) (netip.Addr, bool) {
	if len(h) != 32 {
		return netip.Addr{}, false
	}
	var a [16]byte
	for i := range a {
		b, ok := parseHex(h[2*i : 2*i+2])
		if !ok {
			return netip.Addr{}, false
		}
		a[i] = byte(b)
	}
	return netip.AddrFrom16(a), true
}

// lineErr formats a parse error naming the file, the line and the value.
func lineErr(file string, line int, what string, value any) error {
	return fmt.Errorf("%s%s line %d: %s %q", errPrefix, file, line, what, value)
}

// ptr returns a pointer to a copy of v (go.mod predates new(expr)).
func ptr[T any](v T) *T { return &v }

package netinfo

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sort"
	"strings"
)

// Linux interface flags (include/uapi/linux/if.h) and link types
// (include/uapi/linux/if_arp.h) that Interfaces looks at.
const (
	iffUp        = 0x1
	iffBroadcast = 0x2
	iffLoopback  = 0x8

	arphrdEther = 1
)

// Interfaces lists the interfaces of sys/class/net, sorted by name. IPv6
// addresses come from proc/net/if_inet6 and Wi-Fi signal and link quality
// from proc/net/wireless (both optional: IPv6 may be disabled and kernels
// without wireless extensions lack the latter). IPv4 addresses come from
// addrs; nil means none are reported.
//
// Attributes the kernel refuses to read (carrier and speed of a down
// link) or that a device lacks are left at their zero value rather than
// failing the listing; malformed contents are errors. An interface that
// disappears while being read (its flags attribute is gone) is skipped.
func Interfaces(fsys fs.FS, addrs AddrFunc) ([]Interface, error) {
	ents, err := fs.ReadDir(fsys, "sys/class/net")
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	r := &fileReader{fsys: fsys}
	v6, err := readIfInet6(r)
	if err != nil {
		return nil, err
	}
	wl, err := readWireless(r)
	if err != nil {
		return nil, err
	}
	out := make([]Interface, 0, len(ents))
	for _, e := range ents {
		// Interfaces are symlinks (live) or directories (fixtures);
		// regular files such as bonding_masters are not interfaces.
		if e.Type().IsRegular() {
			continue
		}
		ifc, ok, err := readInterface(r, e.Name(), v6, wl, addrs)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ifc)
		}
	}
	return out, nil
}

// readInterface reads one sys/class/net entry; ok is false when it
// vanished.
func readInterface(r *fileReader, name string, v6 []inet6Entry, wl []wirelessEntry, addrs AddrFunc) (Interface, bool, error) {
	dir := "sys/class/net/" + name + "/"
	ifc := Interface{Name: name}

	b, err := r.read(dir + "flags")
	if errors.Is(err, fs.ErrNotExist) {
		return Interface{}, false, nil
	}
	var flags uint64
	if err == nil {
		v := trim(b)
		ok := len(v) > 2 && v[0] == '0' && v[1] == 'x'
		if ok {
			flags, ok = parseHex(v[2:])
		}
		if !ok {
			return Interface{}, false, fmt.Errorf("%s%sflags: bad value %q", errPrefix, dir, v)
		}
	}
	ifc.AdminUp = flags&iffUp != 0

	// IFF_LOOPBACK identifies loopback; the link type is read later and
	// only if it decides the kind, to spare a file open.
	loopback := flags&iffLoopback != 0

	if b, err := r.read(dir + "address"); err == nil {
		mac := string(trim(b))
		if !loopback && strings.Trim(mac, "0:") == "" {
			mac = "" // no address (tun, wireguard) or an unset one
		}
		ifc.MAC = strings.ToLower(mac)
	}
	mtu, err := r.intAttr(dir, "mtu")
	if err != nil {
		return Interface{}, false, err
	}
	ifc.MTU = int(mtu)

	if b, err := r.read(dir + "operstate"); err == nil {
		ifc.OperState = operState(trim(b))
	}
	ifc.State = foldState(ifc.OperState, loopback, ifc.AdminUp)

	// carrier and speed fail with EINVAL unless the interface is up
	// (netif_running, i.e. IFF_UP), so they are not even tried then; other
	// read failures also mean "unknown", not an error. Loopback has no
	// link settings, hence no speed.
	if ifc.AdminUp {
		if b, err := r.read(dir + "carrier"); err == nil {
			switch string(trim(b)) {
			case "0":
				ifc.Carrier = ptr(false)
			case "1":
				ifc.Carrier = ptr(true)
			}
		}
	}
	if ifc.AdminUp && !loopback {
		if b, err := r.read(dir + "speed"); err == nil {
			// 65535 was SPEED_UNKNOWN of old kernels, now -1.
			if v, ok := parseInt(trim(b)); ok && v > 0 && v != 65535 && v < 1<<31 {
				ifc.SpeedMbps = int(v)
			}
		}
	}

	for _, s := range [...]struct {
		file string
		dst  *uint64
	}{
		{"statistics/tx_bytes", &ifc.Stats.BytesSent},
		{"statistics/rx_bytes", &ifc.Stats.BytesRecv},
		{"statistics/tx_packets", &ifc.Stats.PacketsSent},
		{"statistics/rx_packets", &ifc.Stats.PacketsRecv},
		{"statistics/rx_errors", &ifc.Stats.ErrorsIn},
		{"statistics/tx_errors", &ifc.Stats.ErrorsOut},
		{"statistics/rx_dropped", &ifc.Stats.DropsIn},
		{"statistics/tx_dropped", &ifc.Stats.DropsOut},
	} {
		b, err := r.read(dir + s.file)
		if err != nil {
			continue
		}
		v, ok := parseUint(trim(b))
		if !ok {
			return Interface{}, false, fmt.Errorf("%s%s%s: bad value %q", errPrefix, dir, s.file, trim(b))
		}
		*s.dst = v
	}

	if ifc.Kind, err = r.kind(dir, loopback); err != nil {
		return Interface{}, false, err
	}
	if ifc.Kind == "wireless" {
		ifc.Wireless = &Wireless{}
		for _, w := range wl {
			if w.name == name {
				ifc.Wireless.SignalDBm = w.level
				ifc.Wireless.LinkQuality = w.link
			}
		}
	}

	if addrs != nil {
		ps, err := addrs(name)
		if err != nil {
			return Interface{}, false, fmt.Errorf("%saddresses of %s: %w", errPrefix, name, err)
		}
		ifc.IPv4 = ipv4Addrs(ps, flags&iffBroadcast != 0)
	}
	ifc.IPv6 = ipv6Addrs(v6, name)
	return ifc, true, nil
}

// intAttr reads a decimal attribute; missing or unreadable is 0.
func (r *fileReader) intAttr(dir, name string) (int64, error) {
	b, err := r.read(dir + name)
	if err != nil {
		return 0, nil
	}
	v, ok := parseInt(trim(b))
	if !ok || v > 1<<31-1 || v < -1<<31 {
		return 0, fmt.Errorf("%s%s%s: bad value %q", errPrefix, dir, name, trim(b))
	}
	return v, nil
}

// operState returns the operstate as one of the kernel's constant
// spellings, so the common values cost no allocation.
func operState(b []byte) string {
	for _, s := range [...]string{"up", "down", "unknown", "lowerlayerdown", "dormant", "notpresent", "testing"} {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

// foldState maps RFC 2863 operstates onto up/down/unknown. Loopback never
// reports a carrier so its operstate stays "unknown"; IFF_UP is the only
// meaningful signal there.
func foldState(op string, loopback, adminUp bool) string {
	switch op {
	case "up":
		return "up"
	case "down", "lowerlayerdown", "notpresent", "dormant":
		return "down"
	}
	if loopback && adminUp {
		return "up"
	}
	return "unknown"
}

// kind classifies an interface. Order matters: a Wi-Fi or bridge device is
// also type ARPHRD_ETHER, and bridges have no device link either.
func (r *fileReader) kind(dir string, loopback bool) (string, error) {
	exists := func(name string) bool {
		_, err := fs.Stat(r.fsys, dir+name)
		return err == nil
	}
	switch {
	case loopback:
		return "loopback", nil
	case exists("wireless") || exists("phy80211"):
		return "wireless", nil
	case exists("bridge"):
		return "bridge", nil
	case !exists("device"):
		return "virtual", nil
	}
	linkType, err := r.intAttr(dir, "type")
	if err != nil {
		return "", err
	}
	if linkType == arphrdEther {
		return "ethernet", nil
	}
	return "other", nil
}

// ipv4Addrs converts the AddrFunc's answer, dropping IPv6 prefixes (those
// come from if_inet6, with flags) and computing what ip(8) would show.
func ipv4Addrs(ps []netip.Prefix, broadcast bool) []IPv4Addr {
	var out []IPv4Addr
	for _, p := range ps {
		a := p.Addr().Unmap()
		if !a.Is4() || !p.IsValid() {
			continue
		}
		bits := p.Bits()
		if bits > 32 { // a v4-in-v6 prefix: its length counts 96 bits of ::ffff:
			bits -= 96
		}
		mask := uint32(0)
		if bits > 0 {
			mask = ^uint32(0) << (32 - bits)
		}
		v := IPv4Addr{Address: a.String(), Netmask: addr4(mask).String(), PrefixLen: bits}
		if broadcast && bits < 31 {
			v.Broadcast = addr4(be32(a) | ^mask).String()
		}
		if out == nil {
			out = make([]IPv4Addr, 0, len(ps))
		}
		out = append(out, v)
	}
	return out
}

func be32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// inet6Entry is one parsed proc/net/if_inet6 line.
type inet6Entry struct {
	name  string
	addr  netip.Addr
	plen  int
	scope int
	flags uint64
}

// IPv6 address scopes (ipv6_addr_scope) and flags (IFA_F_*) of if_inet6.
const (
	scopeHost = 0x10
	scopeLink = 0x20

	ifaTemporary  = 0x01
	ifaDeprecated = 0x20
	ifaTentative  = 0x40
)

// readIfInet6 parses proc/net/if_inet6:
//
//	fe80000000000000dea632fffe010203 02 40 20 80     eth0
//
// address, ifindex, prefix length, scope and flags in hex, then the name.
// A missing file means IPv6 is disabled.
func readIfInet6(r *fileReader) ([]inet6Entry, error) {
	const file = "proc/net/if_inet6"
	s, err := r.readString(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	out := make([]inet6Entry, 0, strings.Count(s, "\n"))
	n := 0
	for line := range strings.Lines(s) {
		n++
		var f [6]string
		switch fields(line, f[:]) {
		case 0:
			continue
		case 6:
		default:
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		a, ok := addr6Net(f[0])
		plen, ok2 := parseHex(f[2])
		scope, ok3 := parseHex(f[3])
		flags, ok4 := parseHex(f[4])
		if !ok || !ok2 || !ok3 || !ok4 || plen > 128 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		out = append(out, inet6Entry{name: f[5], addr: a, plen: int(plen), scope: int(scope), flags: flags})
	}
	return out, nil
}

// ipv6Addrs picks name's addresses and orders them global, link, host.
func ipv6Addrs(all []inet6Entry, name string) []IPv6Addr {
	count := 0
	for i := range all {
		if all[i].name == name {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	sel := make([]inet6Entry, 0, count)
	for i := range all {
		if all[i].name == name {
			sel = append(sel, all[i])
		}
	}
	cmpElem := func(a, b inet6Entry) int {
		return cmp.Or(cmp.Compare(scopeRank(a.scope), scopeRank(b.scope)), a.addr.Compare(b.addr))
	}
	sort.Slice(sel, func(i, j int) bool { return cmpElem(sel[i], sel[j]) < 0 })
	out := make([]IPv6Addr, len(sel))
	for i, e := range sel {
		out[i] = IPv6Addr{
			Address:    e.addr.String(),
			PrefixLen:  e.plen,
			Scope:      scopeName(e.scope),
			Temporary:  e.flags&ifaTemporary != 0,
			Deprecated: e.flags&ifaDeprecated != 0,
			Tentative:  e.flags&ifaTentative != 0,
		}
	}
	return out
}

func scopeName(s int) string {
	switch s {
	case scopeHost:
		return "host"
	case scopeLink:
		return "link"
	}
	return "global" // 0x00 global, 0x40 site-local, 0x80 v4-compatible
}

func scopeRank(s int) int {
	switch s {
	case scopeHost:
		return 2
	case scopeLink:
		return 1
	}
	return 0
}

// wirelessEntry is one parsed proc/net/wireless line.
type wirelessEntry struct {
	name        string
	link, level *int
}

// readWireless parses proc/net/wireless:
//
//	Inter-| sta-|   Quality        |   Discarded packets               | Missed | WE
//	 face | tus | link level noise |  nwid  crypt   frag  retry   misc | beacon | 22
//	 wlan0: 0000   56.  -54.  -256        0      0      0      0     15        0
//
// cfg80211 prints a line only while associated, with level in dBm; a "."
// after a number marks it as freshly updated. A level of 0 means the
// driver has no signal reading.
func readWireless(r *fileReader) ([]wirelessEntry, error) {
	const file = "proc/net/wireless"
	s, err := r.readString(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	var out []wirelessEntry
	n := 0
	for line := range strings.Lines(s) {
		n++
		if n <= 2 {
			continue // the two header lines
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			if trim(line) == "" {
				continue
			}
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		var f [4]string
		if fields(rest, f[:]) < 3 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		link, ok1 := parseInt(strings.TrimSuffix(f[1], "."))
		level, ok2 := parseInt(strings.TrimSuffix(f[2], "."))
		if !ok1 || !ok2 {
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		e := wirelessEntry{name: trim(name), link: ptr(int(link))}
		if level != 0 {
			e.level = ptr(int(level))
		}
		out = append(out, e)
	}
	return out, nil
}

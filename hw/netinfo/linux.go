package netinfo

import (
	"context"
	"io/fs"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// iwTimeout bounds one iw call; nl80211 answers in milliseconds, but a
// wedged Wi-Fi firmware (brcmfmac) can stall it.
const iwTimeout = 2 * time.Second

// Linux reads the live system: the parsers of this package over Root, IPv4
// addresses over netlink, and the SSID, frequency and bitrate from
// "iw dev IF link" when iw is installed (a missing iw is not an error;
// SSID stays ""). Its zero value reads "/".
type Linux struct {
	// Root is the file tree to parse, "/" when empty. Addresses and iw
	// still come from the running kernel unless Addrs and IW say
	// otherwise, so a fixture Root needs both set for a hermetic run.
	Root string
	// IW is the path of iw; "" looks it up in PATH and then /usr/sbin and
	// /sbin (a service's PATH often lacks them); "-" disables it.
	IW string
	// Addrs supplies IPv4 addresses; nil asks the kernel ([NetAddrs],
	// with one interface listing per call).
	Addrs AddrFunc
}

func (l Linux) fsys() fs.FS {
	root := l.Root
	if root == "" {
		root = "/"
	}
	return os.DirFS(root)
}

// Interfaces is [Interfaces] on the live system, with the SSID, frequency
// and bitrate of associated Wi-Fi interfaces added from iw (its signal
// fills in when /proc/net/wireless has none).
func (l Linux) Interfaces(ctx context.Context) ([]Interface, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	addrs := l.Addrs
	if addrs == nil {
		addrs = kernelAddrs()
	}
	ifs, err := Interfaces(l.fsys(), addrs)
	if err != nil {
		return nil, err
	}
	iw := ""
	for i := range ifs {
		if ifs[i].Wireless == nil || !ifs[i].AdminUp {
			continue
		}
		if iw == "" {
			if iw = l.iwPath(); iw == "-" {
				break
			}
		}
		w, err := runIW(ctx, iw, ifs[i].Name)
		if err != nil {
			return nil, err
		}
		mergeWireless(ifs[i].Wireless, w)
	}
	return ifs, nil
}

// iwPath resolves Linux.IW; "-" means no iw.
func (l Linux) iwPath() string {
	if l.IW != "" {
		return l.IW
	}
	if p, err := exec.LookPath("iw"); err == nil {
		return p
	}
	for _, p := range [...]string{"/usr/sbin/iw", "/sbin/iw"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return "-"
}

// runIW runs "iw dev NAME link". Only a cancelled ctx is an error: iw
// failing (missing, no nl80211, interface gone) just leaves the SSID out.
func runIW(ctx context.Context, iw, name string) (*Wireless, error) {
	cctx, cancel := context.WithTimeout(ctx, iwTimeout)
	defer cancel()
	out, err := exec.CommandContext(cctx, iw, "dev", name, "link").Output()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, ctxErr
	}
	if err != nil {
		return nil, nil
	}
	return ParseIWLink(string(out)), nil
}

// mergeWireless adds iw's view to /proc/net/wireless's, which reports
// signal with the same dBm value but not the SSID, frequency or bitrate.
func mergeWireless(dst, iw *Wireless) {
	if iw == nil {
		return
	}
	dst.SSID = iw.SSID
	dst.FrequencyMHz = iw.FrequencyMHz
	dst.BitrateMbps = iw.BitrateMbps
	if dst.SignalDBm == nil {
		dst.SignalDBm = iw.SignalDBm
	}
}

// Routes is [Routes] on the live system.
func (l Linux) Routes(ctx context.Context) ([]Route, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Routes(l.fsys())
}

// DNSServers is [DNSServers] on the live system.
func (l Linux) DNSServers(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return DNSServers(l.fsys())
}

// Connections is [Connections] on the live system.
func (l Linux) Connections(ctx context.Context, protos []string) ([]Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Connections(l.fsys(), protos)
}

// Neighbors is [Neighbors] on the live system.
func (l Linux) Neighbors(ctx context.Context) ([]Neighbor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Neighbors(l.fsys())
}

// NetAddrs is the [AddrFunc] of the running kernel: the addresses of
// ifname (both families) from net.InterfaceByName(ifname).Addrs(), which
// the standard library answers over netlink without cgo. An interface
// that does not exist has no addresses.
func NetAddrs(ifname string) ([]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for i := range ifs {
		if ifs[i].Name == ifname {
			return ifaceAddrs(&ifs[i])
		}
	}
	return nil, nil
}

// kernelAddrs returns an AddrFunc that lists the kernel's interfaces once
// and then asks only for addresses: net.InterfaceByName would dump every
// link again for each interface, which adds up on a Pi Zero.
func kernelAddrs() AddrFunc {
	var (
		ifs    []net.Interface
		err    error
		listed bool
	)
	return func(ifname string) ([]netip.Prefix, error) {
		if !listed {
			ifs, err = net.Interfaces()
			listed = true
		}
		if err != nil {
			return nil, err
		}
		for i := range ifs {
			if ifs[i].Name == ifname {
				return ifaceAddrs(&ifs[i])
			}
		}
		return nil, nil // appeared after the listing; reported without addresses
	}
}

// ifaceAddrs converts net's *net.IPNet answers to prefixes.
func ifaceAddrs(ifi *net.Interface) ([]netip.Prefix, error) {
	as, err := ifi.Addrs()
	if err != nil {
		// net does not export errNoSuchInterface.
		if strings.Contains(err.Error(), "no such network interface") {
			return nil, nil // vanished meanwhile
		}
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(as))
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ones, _ := ipn.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}

// ParseIWLink parses the output of "iw dev IF link":
//
//	Connected to aa:bb:cc:dd:ee:ff (on wlan0)
//		SSID: HomeNet
//		freq: 5180.0
//		signal: -52 dBm
//		tx bitrate: 433.3 MBit/s VHT-MCS 9 80MHz short GI VHT-NSS 1
//
// "Not connected." and anything without "Connected to" yield nil. iw
// escapes SSID bytes that are not printable ASCII (UTF-8 included), a
// backslash, and leading or trailing spaces as \xNN; they are unescaped.
func ParseIWLink(out string) *Wireless {
	var w *Wireless
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		body := strings.TrimLeft(line, " \t")
		if strings.HasPrefix(body, "Connected to ") {
			w = &Wireless{}
			continue
		}
		if w == nil {
			continue
		}
		key, val, ok := strings.Cut(body, ": ")
		if !ok {
			continue
		}
		switch key {
		case "SSID":
			w.SSID = unescapeSSID(val)
		case "freq":
			if f, err := strconv.ParseFloat(firstField(val), 64); err == nil && f > 0 && f < math.MaxInt32 {
				w.FrequencyMHz = int(math.Round(f))
			}
		case "signal": // "-52 dBm" or, per chain, "-52 [-54, -55] dBm"
			if v, err := strconv.Atoi(firstField(val)); err == nil {
				w.SignalDBm = &v
			}
		case "tx bitrate":
			if f, err := strconv.ParseFloat(firstField(val), 64); err == nil && f >= 0 {
				w.BitrateMbps = f
			}
		}
	}
	return w
}

func firstField(s string) string {
	var f [1]string
	fields(s, f[:])
	return f[0]
}

// unescapeSSID undoes iw's print_ssid_escaped.
func unescapeSSID(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			if v, ok := parseHex(s[i+2 : i+4]); ok {
				b = append(b, byte(v))
				i += 3
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

package netinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"strings"
)

// connSource is the file of protocol i, in the order Connections reports
// them. A switch rather than a table keeps package state immutable.
func connSource(i int) (proto, file string) {
	switch i {
	case 0:
		return "tcp", "proc/net/tcp"
	case 1:
		return "tcp6", "proc/net/tcp6"
	case 2:
		return "udp", "proc/net/udp"
	case 3:
		return "udp6", "proc/net/udp6"
	}
	return "", ""
}

const numProtos = 4

// Connections lists the sockets of proc/net/{tcp,tcp6,udp,udp6}, in that
// order and in kernel order within each file. protos selects protocols by
// name ("tcp", "tcp6", "udp", "udp6"); nil or empty means all four. A
// missing file (IPv6 disabled, no UDP module) is skipped.
//
// Addresses are printed by the kernel as 32-bit words in host byte order,
// so they are decoded with the machine's byte order; IPv4-mapped sockets
// of tcp6/udp6 read "::ffff:192.168.1.23". The tables are streamed a line
// at a time because a busy host has thousands of sockets.
func Connections(fsys fs.FS, protos []string) ([]Conn, error) {
	want := 0
	if len(protos) == 0 {
		want = 1<<numProtos - 1
	}
	for _, p := range protos {
		i := 0
		for ; i < numProtos; i++ {
			if name, _ := connSource(i); name == p {
				break
			}
		}
		if i == numProtos {
			return nil, fmt.Errorf("%sunknown protocol %q (want tcp, tcp6, udp or udp6)", errPrefix, p)
		}
		want |= 1 << i
	}

	t := connTable{buf: make([]byte, 4096)}
	for i := 0; i < numProtos; i++ {
		if want&(1<<i) == 0 {
			continue
		}
		proto, file := connSource(i)
		f, err := fsys.Open(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s%w", errPrefix, err)
		}
		err = t.parse(f, proto, file)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return t.finish(), nil
}

// connTable accumulates sockets. Formatting an address allocates, and a
// busy host has thousands of distinct peers, so addresses are appended as
// text to an arena and recorded as spans; every chunkConns sockets the
// arena becomes one string that the chunk's Conns point into, and is
// reused. That is a few allocations per call instead of two per socket,
// and the fixed span table does not grow with the socket count.
type connTable struct {
	out     []Conn
	flushed int                    // out[:flushed] have their addresses
	spans   [4 * chunkConns]uint32 // per pending Conn: local start, end, remote start, end
	arena   []byte
	buf     []byte // scanner buffer shared by the files
	cache   spanCache
}

// chunkConns is how many sockets share one address string.
const chunkConns = 256

// parse appends the sockets of one table:
//
//	sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
//	 0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 16001 1 ...
func (t *connTable) parse(f fs.File, proto, file string) error {
	sc := bufio.NewScanner(f)
	sc.Buffer(t.buf, 1<<16)
	udp := proto[0] == 'u'
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		var fl [10][]byte
		nf := fields(line, fl[:])
		if nf == 0 || string(fl[0]) == "sl" {
			continue
		}
		if nf < 10 {
			return lineErr(file, n, "malformed", trim(line))
		}
		la, lp, ok1 := hostPort(fl[1])
		ra, rp, ok2 := hostPort(fl[2])
		st, ok3 := parseHex(fl[3])
		uid, ok4 := parseUint(fl[7])
		inode, ok5 := parseUint(fl[9])
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return lineErr(file, n, "malformed", trim(line))
		}
		if len(t.out)-t.flushed == chunkConns {
			t.flush()
		}
		sp := t.spans[4*(len(t.out)-t.flushed):]
		sp[0], sp[1] = t.span(la)
		sp[2], sp[3] = t.span(ra)
		t.out = append(t.out, Conn{
			Proto:      proto,
			LocalPort:  lp,
			RemotePort: rp,
			State:      sockState(st, udp),
			UID:        clampInt(uid),
			Inode:      inode,
		})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s%s line %d: %w", errPrefix, file, n+1, err)
	}
	return nil
}

// span returns where a's text lies in the arena, appending it on a miss.
func (t *connTable) span(a netip.Addr) (start, end uint32) {
	if s, e, ok := t.cache.get(a); ok {
		return s, e
	}
	start = uint32(len(t.arena))
	t.arena = a.AppendTo(t.arena)
	end = uint32(len(t.arena))
	t.cache.put(a, start, end)
	return start, end
}

// flush gives the pending Conns their addresses from one string holding
// them all and empties the arena (and the cache, whose spans point into
// it).
func (t *connTable) flush() {
	text := string(t.arena)
	for i := t.flushed; i < len(t.out); i++ {
		sp := t.spans[4*(i-t.flushed):]
		t.out[i].LocalAddr = text[sp[0]:sp[1]]
		t.out[i].RemoteAddr = text[sp[2]:sp[3]]
	}
	t.flushed = len(t.out)
	t.arena = t.arena[:0]
	t.cache = spanCache{}
}

// finish flushes the last chunk and returns the sockets.
func (t *connTable) finish() []Conn {
	t.flush()
	return t.out
}

// spanCache remembers recent addresses so a chunk's arena holds the
// common ones (0.0.0.0, ::, the host's own) once; a small round-robin
// table bounds the cost of a miss.
type spanCache struct {
	keys       [32]netip.Addr
	start, end [32]uint32
	n, next    int
}

func (c *spanCache) get(a netip.Addr) (uint32, uint32, bool) {
	for i := 0; i < c.n; i++ {
		if c.keys[i] == a {
			return c.start[i], c.end[i], true
		}
	}
	return 0, 0, false
}

func (c *spanCache) put(a netip.Addr, start, end uint32) {
	c.keys[c.next], c.start[c.next], c.end[c.next] = a, start, end
	c.next = (c.next + 1) % len(c.keys)
	c.n = min(c.n+1, len(c.keys))
}

// hostPort decodes "0100007F:0016" or a 32-digit IPv6 form.
func hostPort(b []byte) (netip.Addr, int, bool) {
	i := bytes.IndexByte(b, ':')
	if i < 0 || len(b)-i-1 != 4 {
		return netip.Addr{}, 0, false
	}
	port, ok := parseHex(b[i+1:])
	if !ok {
		return netip.Addr{}, 0, false
	}
	var a netip.Addr
	switch i {
	case 8:
		a, ok = addr4Host(b[:i])
	case 32:
		a, ok = addr6Host(b[:i])
	default:
		ok = false
	}
	return a, int(port), ok
}

// sockState names a socket state (include/net/tcp_states.h). UDP uses
// TCP_ESTABLISHED for connected sockets and TCP_CLOSE for the rest.
func sockState(st uint64, udp bool) string {
	switch st {
	case 0x01:
		return "ESTABLISHED"
	case 0x02:
		return "SYN_SENT"
	case 0x03, 0x0C: // 0x0C: TCP_NEW_SYN_RECV, a request socket
		return "SYN_RECV"
	case 0x04:
		return "FIN_WAIT1"
	case 0x05:
		return "FIN_WAIT2"
	case 0x06:
		return "TIME_WAIT"
	case 0x07:
		if udp {
			return ""
		}
		return "CLOSE"
	case 0x08:
		return "CLOSE_WAIT"
	case 0x09:
		return "LAST_ACK"
	case 0x0A:
		return "LISTEN"
	case 0x0B:
		return "CLOSING"
	}
	return fmt.Sprintf("UNKNOWN(0x%02X)", st)
}

// Neighbors parses the IPv4 ARP cache, proc/net/arp:
//
//	IP address       HW type     Flags       HW address            Mask     Device
//	192.168.1.1      0x1         0x2         a0:b1:c2:d3:e4:f5     *        eth0
//
// Flags 0x2 (ATF_COM) marks a resolved entry; unresolved ones (still
// probing or failed) show an all-zero address, reported as MAC "".
func Neighbors(fsys fs.FS) ([]Neighbor, error) {
	const file = "proc/net/arp"
	r := &fileReader{fsys: fsys}
	s, err := r.readString(file)
	if err != nil {
		return nil, fmt.Errorf("%s%w", errPrefix, err)
	}
	out := make([]Neighbor, 0, strings.Count(s, "\n"))
	n := 0
	for line := range strings.Lines(s) {
		n++
		if n == 1 {
			continue // header
		}
		var f [6]string
		switch fields(line, f[:]) {
		case 0:
			continue
		case 6:
		default:
			return nil, lineErr(file, n, "malformed", trim(line))
		}
		h, ok := strings.CutPrefix(f[2], "0x")
		flags, ok2 := parseHex(h)
		if !ok || !ok2 {
			return nil, lineErr(file, n, "bad flags", f[2])
		}
		nb := Neighbor{IP: f[0], Interface: f[5], Complete: flags&0x2 != 0}
		if strings.Trim(f[3], "0:") != "" {
			nb.MAC = strings.ToLower(f[3])
		}
		out = append(out, nb)
	}
	return out, nil
}

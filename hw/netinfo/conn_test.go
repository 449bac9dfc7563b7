package netinfo

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// pi4Conns is what the pi4 fixture's socket tables hold, in file order.
func pi4Conns() []Conn {
	return []Conn{
		{Proto: "tcp", LocalAddr: "0.0.0.0", LocalPort: 22, RemoteAddr: "0.0.0.0", State: "LISTEN", Inode: 15123},
		{Proto: "tcp", LocalAddr: "127.0.0.1", LocalPort: 631, RemoteAddr: "0.0.0.0", State: "LISTEN", Inode: 16001},
		{Proto: "tcp", LocalAddr: "192.168.1.23", LocalPort: 22, RemoteAddr: "192.168.1.100", RemotePort: 54321, State: "ESTABLISHED", Inode: 28342},
		{Proto: "tcp", LocalAddr: "192.168.1.23", LocalPort: 41652, RemoteAddr: "93.184.216.34", RemotePort: 443, State: "ESTABLISHED", UID: 1000, Inode: 30011},
		{Proto: "tcp", LocalAddr: "192.168.1.23", LocalPort: 41650, RemoteAddr: "93.184.216.34", RemotePort: 443, State: "TIME_WAIT"},
		{Proto: "tcp6", LocalAddr: "::", LocalPort: 22, RemoteAddr: "::", State: "LISTEN", Inode: 15125},
		{Proto: "tcp6", LocalAddr: "::1", LocalPort: 631, RemoteAddr: "::", State: "LISTEN", Inode: 16002},
		{Proto: "tcp6", LocalAddr: "::ffff:192.168.1.23", LocalPort: 8080, RemoteAddr: "::ffff:192.168.1.101", RemotePort: 50000, State: "ESTABLISHED", UID: 1000, Inode: 31337},
		{Proto: "tcp6", LocalAddr: "2001:db8:1:0:dea6:32ff:fe01:203", LocalPort: 22, RemoteAddr: "2001:db8:2::50", RemotePort: 60000, State: "ESTABLISHED", Inode: 31400},
		{Proto: "udp", LocalAddr: "0.0.0.0", LocalPort: 68, RemoteAddr: "0.0.0.0", Inode: 14210},
		{Proto: "udp", LocalAddr: "0.0.0.0", LocalPort: 5353, RemoteAddr: "0.0.0.0", UID: 108, Inode: 14388},
		{Proto: "udp", LocalAddr: "192.168.1.23", LocalPort: 36000, RemoteAddr: "192.168.1.1", RemotePort: 53, State: "ESTABLISHED", UID: 1000, Inode: 31502},
		{Proto: "udp6", LocalAddr: "::", LocalPort: 5353, RemoteAddr: "::", UID: 108, Inode: 14389},
		{Proto: "udp6", LocalAddr: "fe80::dea6:32ff:fe01:203", LocalPort: 546, RemoteAddr: "::", Inode: 14520},
	}
}

func TestConnections(t *testing.T) {
	needLittleEndian(t)
	all := pi4Conns()
	for _, tc := range []struct {
		name   string
		board  string
		protos []string
		want   []Conn
	}{
		{"pi4 all", "pi4", nil, all},
		{"pi4 empty list means all", "pi4", []string{}, all},
		{"pi4 udp", "pi4", []string{"udp"}, all[9:12]},
		{"pi4 canonical order", "pi4", []string{"udp6", "tcp6", "tcp6"}, append(all[5:9:9], all[12:]...)},
		{"v6off all", "v6off", nil, []Conn{
			{Proto: "tcp", LocalAddr: "0.0.0.0", LocalPort: 22, RemoteAddr: "0.0.0.0", State: "LISTEN", Inode: 11001},
			{Proto: "tcp", LocalAddr: "10.0.0.23", LocalPort: 22, RemoteAddr: "10.0.0.5", RemotePort: 51000, State: "ESTABLISHED", Inode: 11234},
			{Proto: "udp", LocalAddr: "0.0.0.0", LocalPort: 68, RemoteAddr: "0.0.0.0", Inode: 10990},
		}},
		{"v6off tcp6 missing", "v6off", []string{"tcp6"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Connections(fixture(tc.board), tc.protos)
			if err != nil {
				t.Fatal(err)
			}
			same(t, "connections", got, tc.want)
		})
	}
}

func TestConnectionStates(t *testing.T) {
	for _, tc := range []struct {
		st   uint64
		udp  bool
		want string
	}{
		{0x01, false, "ESTABLISHED"}, {0x02, false, "SYN_SENT"}, {0x03, false, "SYN_RECV"},
		{0x04, false, "FIN_WAIT1"}, {0x05, false, "FIN_WAIT2"}, {0x06, false, "TIME_WAIT"},
		{0x07, false, "CLOSE"}, {0x08, false, "CLOSE_WAIT"}, {0x09, false, "LAST_ACK"},
		{0x0A, false, "LISTEN"}, {0x0B, false, "CLOSING"}, {0x0C, false, "SYN_RECV"},
		{0x07, true, ""}, {0x01, true, "ESTABLISHED"}, {0x2A, false, "UNKNOWN(0x2A)"},
	} {
		if got := sockState(tc.st, tc.udp); got != tc.want {
			t.Errorf("sockState(%#x, udp=%v) = %q, want %q", tc.st, tc.udp, got, tc.want)
		}
	}
}

func TestConnectionsChunks(t *testing.T) {
	// More sockets than one arena chunk and more distinct addresses than
	// the cache holds must all come out right.
	needLittleEndian(t)
	const n = 2*chunkConns + 77
	data := []byte(tcpHeader)
	for i := range n {
		data = appendTCPLine(data, i, [4]byte{10, 0, byte(i % 3), 1}, [4]byte{10, 1, byte(i / 256), byte(i % 256)})
	}
	udp := []byte("   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n" +
		"   68: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 14210 2 0000000000000000 0\n")
	got, err := Connections(fstest.MapFS{
		"proc/net/tcp": &fstest.MapFile{Data: data},
		"proc/net/udp": &fstest.MapFile{Data: udp},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n+1 {
		t.Fatalf("got %d connections", len(got))
	}
	for i, c := range got[:n] {
		wantL := "10.0." + itoa(i%3) + ".1"
		wantR := "10.1." + itoa(i/256) + "." + itoa(i%256)
		if c.Proto != "tcp" || c.LocalAddr != wantL || c.RemoteAddr != wantR || c.LocalPort != 40000+i || c.RemotePort != 443 || c.State != "ESTABLISHED" || c.UID != 1000 || c.Inode != uint64(100000+i) {
			t.Errorf("line %d: %+v, want %s -> %s", i, c, wantL, wantR)
		}
	}
	same(t, "udp", got[n], Conn{Proto: "udp", LocalAddr: "0.0.0.0", LocalPort: 68, RemoteAddr: "0.0.0.0", Inode: 14210})
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestConnectionsErrors(t *testing.T) {
	const hdr = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	for _, tc := range []struct {
		name, line string
		frags      []string
	}{
		{"short", "   0: 00000000:0016 00000000:0000 0A\n", []string{"proc/net/tcp line 2", "0A"}},
		{"bad address", "   0: 0000000G:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 15123 1\n", []string{"proc/net/tcp line 2", "0000000G:0016"}},
		{"odd address length", "   0: 000000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 15123 1\n", []string{"proc/net/tcp line 2", "000000000:0016"}},
		{"bad port", "   0: 00000000:16 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 15123 1\n", []string{"proc/net/tcp line 2"}},
		{"bad uid", "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000    -1        0 15123 1\n", []string{"proc/net/tcp line 2", "-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Connections(fstest.MapFS{"proc/net/tcp": &fstest.MapFile{Data: []byte(hdr + tc.line)}}, nil)
			wantErr(t, err, tc.frags...)
		})
	}
	t.Run("unknown protocol", func(t *testing.T) {
		_, err := Connections(fixture("pi4"), []string{"tcp", "sctp"})
		wantErr(t, err, `"sctp"`)
	})
	t.Run("unreadable", func(t *testing.T) {
		_, err := Connections(fstest.MapFS{"proc/net/udp": &fstest.MapFile{Mode: fs.ModeDir}}, []string{"udp"})
		wantErr(t, err, "proc/net/udp")
	})
}

func TestNeighbors(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  []Neighbor
	}{
		{"pi4", []Neighbor{
			{IP: "192.168.1.1", MAC: "a0:b1:c2:d3:e4:f5", Interface: "eth0", Complete: true},
			{IP: "192.168.1.100", MAC: "3c:22:fb:01:02:03", Interface: "eth0", Complete: true},
			{IP: "192.168.1.77", Interface: "eth0"},
			{IP: "192.168.1.1", MAC: "a0:b1:c2:d3:e4:f5", Interface: "wlan0", Complete: true},
			{IP: "172.17.0.2", MAC: "02:42:ac:11:00:02", Interface: "docker0", Complete: true},
		}},
		{"v6off", []Neighbor{{IP: "10.0.0.1", MAC: "00:11:22:33:44:55", Interface: "eth0", Complete: true}}},
	} {
		t.Run(tc.board, func(t *testing.T) {
			got, err := Neighbors(fixture(tc.board))
			if err != nil {
				t.Fatal(err)
			}
			same(t, "neighbors", got, tc.want)
		})
	}
}

func TestNeighborsErrors(t *testing.T) {
	const hdr = "IP address       HW type     Flags       HW address            Mask     Device\n"
	t.Run("missing", func(t *testing.T) {
		_, err := Neighbors(fstest.MapFS{})
		wantErr(t, err, "proc/net/arp")
	})
	t.Run("bad flags", func(t *testing.T) {
		_, err := Neighbors(fstest.MapFS{"proc/net/arp": &fstest.MapFile{Data: []byte(hdr + "192.168.1.1      0x1         2           a0:b1:c2:d3:e4:f5     *        eth0\n")}})
		wantErr(t, err, "proc/net/arp line 2", `"2"`)
	})
	t.Run("short", func(t *testing.T) {
		_, err := Neighbors(fstest.MapFS{"proc/net/arp": &fstest.MapFile{Data: []byte(hdr + "192.168.1.1 0x1 0x2\n")}})
		wantErr(t, err, "proc/net/arp line 2", "192.168.1.1 0x1 0x2")
	})
	t.Run("empty table", func(t *testing.T) {
		got, err := Neighbors(fstest.MapFS{"proc/net/arp": &fstest.MapFile{Data: []byte(hdr)}})
		if err != nil || len(got) != 0 {
			t.Errorf("got %v, %v", got, err)
		}
	})
}

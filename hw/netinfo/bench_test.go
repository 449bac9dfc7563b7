package netinfo

import (
	"encoding/binary"
	"fmt"
	"testing"
	"testing/fstest"
)

const tcpHeader = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     \n"

// appendTCPLine appends an ESTABLISHED /proc/net/tcp line in the kernel's
// format (host-order words, padded to 149 columns) from port 40000+i to
// port 443, owned by uid 1000 with inode 100000+i.
func appendTCPLine(b []byte, i int, local, remote [4]byte) []byte {
	start := len(b)
	b = fmt.Appendf(b, "%4d: %08X:%04X %08X:%04X %02X %08X:%08X %02X:%08X %08X %5d %8d %d %d %016x %d %d %d %d %d",
		i, binary.NativeEndian.Uint32(local[:]), 40000+i, binary.NativeEndian.Uint32(remote[:]), 443,
		1, 0, 0, 0, 0, 0, 1000, 0, 100000+i, 2, 0, 20, 4, 1, 10, -1)
	for len(b)-start < 149 {
		b = append(b, ' ')
	}
	return append(b, '\n')
}

// BenchmarkConnections parses a 1000-socket /proc/net/tcp, a busy Pi:
// 50 local addresses, remote peers mostly distinct.
func BenchmarkConnections(b *testing.B) {
	data := []byte(tcpHeader)
	for i := range 1000 {
		data = appendTCPLine(data, i, [4]byte{192, 168, 1, byte(i % 50)}, [4]byte{10, byte(i >> 8), byte(i), 7})
	}
	m := fstest.MapFS{"proc/net/tcp": &fstest.MapFile{Data: data}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		cs, err := Connections(m, []string{"tcp"})
		if err != nil || len(cs) != 1000 {
			b.Fatal(len(cs), err)
		}
	}
}

// BenchmarkInterfacesPi4 lists the pi4 fixture's four interfaces from
// disk, as the live source does from sysfs.
func BenchmarkInterfacesPi4(b *testing.B) {
	fsys := fixture("pi4")
	b.ReportAllocs()
	for b.Loop() {
		ifs, err := Interfaces(fsys, fixtureAddrs)
		if err != nil || len(ifs) != 4 {
			b.Fatal(len(ifs), err)
		}
	}
}

// BenchmarkRoutesPi4 parses the pi4 fixture's IPv4 and IPv6 routes.
func BenchmarkRoutesPi4(b *testing.B) {
	fsys := fixture("pi4")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Routes(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

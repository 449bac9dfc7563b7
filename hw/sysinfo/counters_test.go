package sysinfo

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

const netDevHeader = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

func TestParseNetDev(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []NetCounters
	}{
		{
			// Every column different, so a swapped or shifted column shows.
			name: "column mapping",
			in:   netDevHeader + "  eth0:       1       2    3    4    5     6          7         8        9      10   11   12   13    14      15         16\n",
			want: []NetCounters{{Name: "eth0", RxBytes: 1, RxPackets: 2, RxErrors: 3, RxDrops: 4, TxBytes: 9, TxPackets: 10, TxErrors: 11, TxDrops: 12}},
		},
		{
			name: "file order, loopback kept, 64-bit values",
			in: netDevHeader +
				"    lo:  178296    1956    0    0    0     0          0         0   178296    1956    0    0    0     0       0          0\n" +
				"  eth0: 18446744073709551615 3316279    0   41    0     0          0     12034 189127382  1142003    0    0    0     0       0          0\n",
			want: []NetCounters{
				{Name: "lo", RxBytes: 178296, RxPackets: 1956, TxBytes: 178296, TxPackets: 1956},
				{Name: "eth0", RxBytes: math.MaxUint64, RxPackets: 3316279, RxDrops: 41, TxBytes: 189127382, TxPackets: 1142003},
			},
		},
		{
			// 2.4-era "%6s:%8lu" glued long names to the first number.
			name: "no space after the colon, long name",
			in:   "eno16777736:1150470   14704    0    0    0     0          0         0   720003    7105    0    0    0     0       0          0\n",
			want: []NetCounters{{Name: "eno16777736", RxBytes: 1150470, RxPackets: 14704, TxBytes: 720003, TxPackets: 7105}},
		},
		{
			name: "tabs, CRLF, blank lines, extra trailing columns",
			in:   "\n\tusb0:\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\r\n\n",
			want: []NetCounters{{Name: "usb0", RxBytes: 1, RxPackets: 2, RxErrors: 3, RxDrops: 4, TxBytes: 9, TxPackets: 10, TxErrors: 11, TxDrops: 12}},
		},
		{name: "header only", in: netDevHeader, want: []NetCounters{}},
		{name: "empty", in: "", want: []NetCounters{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNetDev([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseNetDevErrors(t *testing.T) {
	const ok = "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
	for _, tc := range []struct {
		name, bad string
		frags     []string
	}{
		{"too few counters", "wlan0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n", []string{"15 counters, want at least 16"}},
		{"not a number", "wlan0: 1 2 3 4 x 6 7 8 9 10 11 12 13 14 15 16\n", []string{`counter 5 "x"`}},
		{"negative", "wlan0: 1 2 -3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []string{`counter 3 "-3"`}},
		{"overflows 64 bits", "wlan0: 18446744073709551616 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []string{`counter 1 "18446744073709551616"`}},
		{"no name", ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []string{"bad interface name"}},
		{"space in name", "wl an0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []string{`bad interface name "wl an0"`}},
		{"no colon", "wlan0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []string{"no ':'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bad line is the fourth: header, header, good, bad.
			_, err := ParseNetDev([]byte(netDevHeader + ok + tc.bad))
			wantErr(t, err, append([]string{"/proc/net/dev", "line 4", strings.TrimSpace(tc.bad)}, tc.frags...)...)
		})
	}
}

func TestParseDiskstats(t *testing.T) {
	// The same device in the three formats: before 4.18 (14 fields),
	// 4.18+ with discards (18), 5.5+ with flushes (20). Columns 4..14
	// are 1..11 so a shifted column shows.
	const (
		w14 = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n"
		w18 = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"
		w20 = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"
	)
	sda := DiskCounters{Name: "sda", ReadsCompleted: 1, SectorsRead: 3, WritesCompleted: 5, SectorsWritten: 7, IOTicksMs: 10, InFlight: 9}
	for _, tc := range []struct {
		name string
		in   string
		want []DiskCounters
	}{
		{"14 fields (before 4.18)", w14, []DiskCounters{sda}},
		{"18 fields (4.18+ discards)", w18, []DiskCounters{sda}},
		{"20 fields (5.5+ flushes)", w20, []DiskCounters{sda}},
		{"future kernel appends columns", strings.TrimSuffix(w20, "\n") + " 18 19 20\n", []DiskCounters{sda}},
		{
			name: "file order, partitions and virtual devices kept, tabs and blank lines",
			in: "   7       0 loop0 59 0 2112 13 0 0 0 0 0 28 13 0 0 0 0 0 0\n\n" +
				" 179       0 mmcblk0 41802 15313 2868922 47235 256189 280511 7351200 1208730 0 614020 1283700 12 0 57806584 310 33810 27734\n" +
				" 179\t1\tmmcblk0p1\t352 1377 23718 512 2 0 2 3 0 624 515\n",
			want: []DiskCounters{
				{Name: "loop0", ReadsCompleted: 59, SectorsRead: 2112, IOTicksMs: 28},
				{Name: "mmcblk0", ReadsCompleted: 41802, SectorsRead: 2868922, WritesCompleted: 256189, SectorsWritten: 7351200, IOTicksMs: 614020},
				{Name: "mmcblk0p1", ReadsCompleted: 352, SectorsRead: 23718, WritesCompleted: 2, SectorsWritten: 2, IOTicksMs: 624},
			},
		},
		{
			name: "64-bit values",
			in:   " 259 0 nvme0n1 18446744073709551615 0 18446744073709551615 0 0 0 0 0 0 18446744073709551615 0\n",
			want: []DiskCounters{{Name: "nvme0n1", ReadsCompleted: math.MaxUint64, SectorsRead: math.MaxUint64, IOTicksMs: math.MaxUint64}},
		},
		{"empty", "", []DiskCounters{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDiskstats([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseDiskstatsErrors(t *testing.T) {
	const ok = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n   8       1 sda1 1 2 3 4 5 6 7 8 9 10 11\n"
	for _, tc := range []struct {
		name, bad string
		frags     []string
	}{
		{"13 fields", "   8      16 sdb 1 2 3 4 5 6 7 8 9 10\n", []string{"10 counters, want at least 11", "14, 18 or 20 fields"}},
		{"name only", "   8      16 sdb\n", []string{"0 counters"}},
		{"no name", "   8      16\n", []string{"<major> <minor> <name>"}},
		{"major not a number", "   x      16 sdb 1 2 3 4 5 6 7 8 9 10 11\n", []string{`major number "x"`}},
		{"minor not a number", "   8     -16 sdb 1 2 3 4 5 6 7 8 9 10 11\n", []string{`minor number "-16"`}},
		{"counter not a number", "   8      16 sdb 1 2 3 4 5 6 7 8 9 1O 11\n", []string{`counter 10 "1O"`}},
		{"counter overflows", "   8      16 sdb 1 2 18446744073709551616 4 5 6 7 8 9 10 11\n", []string{`counter 3`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDiskstats([]byte(ok + tc.bad))
			wantErr(t, err, append([]string{"/proc/diskstats", "line 3", strings.TrimSpace(tc.bad)}, tc.frags...)...)
		})
	}
}

func TestParseCountersFixtures(t *testing.T) {
	// Every real file parses, and has the devices the fixture describes.
	for _, tc := range []struct {
		board        string
		ifs, devices int
	}{
		{"pi4", 3, 16 + 8 + 3 + 2},
		{"pi5", 3, 16 + 8 + 3},
		{"zero2w", 2, 16 + 8 + 3},
		{"nosensors", 2, 8 + 5 + 1},
	} {
		ifs, err := ParseNetDev(readFixture(t, tc.board, "proc/net/dev"))
		if err != nil || len(ifs) != tc.ifs || ifs[0].Name != "lo" {
			t.Errorf("%s: ParseNetDev: %d interfaces, %v", tc.board, len(ifs), err)
		}
		ds, err := ParseDiskstats(readFixture(t, tc.board, "proc/diskstats"))
		if err != nil || len(ds) != tc.devices {
			t.Errorf("%s: ParseDiskstats: %d devices, %v", tc.board, len(ds), err)
		}
	}
}

func TestIsWholeDisk(t *testing.T) {
	listed := map[string]bool{}
	for _, n := range []string{"sda", "mmcblk0", "mmcblk0boot0", "mmcblk0boot1", "mmcblk0rpmb", "nvme0n1", "dm-0", "md127",
		"loop0", "ram0", "zram0", "sr0", "vda", "xvda", "nbd0", "ramdisk"} {
		listed[n] = true
	}
	for _, tc := range []struct {
		name             string
		withSys, without bool
	}{
		{"sda", true, true},
		{"sda1", false, false},
		{"sdaa12", false, false},
		{"mmcblk0", true, true},
		{"mmcblk0p2", false, false},
		{"mmcblk0boot0", false, false}, // eMMC boot areas are never used by the OS
		{"mmcblk0boot1", false, false},
		{"mmcblk0rpmb", false, false},
		{"nvme0n1", true, true},
		{"nvme0n1p1", false, false},
		{"dm-0", true, true}, // a LUKS or LVM volume is what users think of as the disk
		{"md127", true, true},
		{"md127p1", false, false},
		{"sr0", true, true},
		{"vda", true, true},
		{"vda16", false, false},
		{"xvda", true, true},
		{"xvda1", false, false},
		{"nbd0", true, true},
		{"nbd0p1", false, false},
		{"loop0", false, false},
		{"loop12", false, false},
		{"ram15", false, false},
		{"zram0", false, false},
		{"ramdisk", true, true}, // only ram<N> is brd
		{"sdb", false, true},    // not in sys/block: unplugged between the two reads
	} {
		if got := isWholeDisk(tc.name, listed); got != tc.withSys {
			t.Errorf("isWholeDisk(%q, sys/block) = %v, want %v", tc.name, got, tc.withSys)
		}
		if got := isWholeDisk(tc.name, nil); got != tc.without {
			t.Errorf("isWholeDisk(%q, no sys/block) = %v, want %v", tc.name, got, tc.without)
		}
	}
}

// countersCases are the fixture trees' expected Counters (at t0).
func countersCases() map[string]Counters {
	return map[string]Counters{
		"pi4": {
			Time: t0,
			Net: []NetCounters{
				{Name: "eth0", RxBytes: 1893402118, RxPackets: 2207331, RxErrors: 2, RxDrops: 31, TxBytes: 312887346, TxPackets: 968120, TxErrors: 1, TxDrops: 5},
				{Name: "wlan0", RxBytes: 4833071, RxPackets: 21877, RxDrops: 117, TxBytes: 1290452, TxPackets: 6114, TxErrors: 3},
			},
			Disk: []DiskCounters{
				{Name: "mmcblk0", ReadsCompleted: 41802, SectorsRead: 2868922, WritesCompleted: 256189, SectorsWritten: 7351200, IOTicksMs: 614020},
				{Name: "sda", ReadsCompleted: 10834, SectorsRead: 1285618, WritesCompleted: 5503, SectorsWritten: 1117248, IOTicksMs: 38552},
			},
		},
		"pi5": {
			Time: t0,
			Net: []NetCounters{
				{Name: "eth0", RxBytes: 48210331877, RxPackets: 35410227, RxDrops: 1204, TxBytes: 391220456712, TxPackets: 268311092},
				{Name: "wlan0"}, // down: listed with zeros
			},
			Disk: []DiskCounters{
				{Name: "nvme0n1", ReadsCompleted: 184321, SectorsRead: 21873642, WritesCompleted: 1093214, SectorsWritten: 98327712, IOTicksMs: 1263208},
			},
		},
		"zero2w": {
			Time: t0,
			Net: []NetCounters{
				{Name: "wlan0", RxBytes: 3998213372, RxPackets: 3110442, RxDrops: 288, TxBytes: 291044810, TxPackets: 1201933},
			},
			Disk: []DiskCounters{
				{Name: "mmcblk0", ReadsCompleted: 12093, SectorsRead: 901344, WritesCompleted: 40218, SectorsWritten: 1430992, IOTicksMs: 160340},
			},
		},
		"nosensors": {
			Time: t0,
			Net: []NetCounters{
				{Name: "ens3", RxBytes: 9021773410, RxPackets: 7102331, RxDrops: 5, TxBytes: 1203399812, TxPackets: 3301772},
			},
			Disk: []DiskCounters{
				// the cloud-init seed drive is a disk; the snap loops are not
				{Name: "sr0", ReadsCompleted: 201, SectorsRead: 3430, IOTicksMs: 150},
				{Name: "vda", ReadsCompleted: 98211, SectorsRead: 7391224, WritesCompleted: 1201877, SectorsWritten: 40211874, IOTicksMs: 1330921},
			},
		},
	}
}

// countersOf reads Counters from a fixture tree with a fake clock.
func countersOf(t testing.TB, root fs.FS, clk *fakeClock) (Counters, error) {
	t.Helper()
	return newFixture(root, "aarch64", 1, 0, clk, &fakeExec{}).Counters(t.Context())
}

func TestLinuxCountersFixtures(t *testing.T) {
	for board, want := range countersCases() {
		t.Run(board, func(t *testing.T) {
			got, err := countersOf(t, os.DirFS(path.Join("testdata", board)), &fakeClock{t: t0})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Counters:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestLinuxCountersWithoutSysBlock checks that the name rules used without
// sysfs agree with sys/block on every real layout.
func TestLinuxCountersWithoutSysBlock(t *testing.T) {
	for board, want := range countersCases() {
		for _, edit := range []struct {
			name string
			f    func(fstest.MapFS)
		}{
			{"missing", func(m fstest.MapFS) { removeTree(m, "sys/block") }},
			{"empty", func(m fstest.MapFS) {
				removeTree(m, "sys/block")
				m["sys/block"] = &fstest.MapFile{Mode: fs.ModeDir}
			}},
		} {
			t.Run(board+"/"+edit.name, func(t *testing.T) {
				m := mapFixture(t, board)
				edit.f(m)
				got, err := countersOf(t, m, &fakeClock{t: t0})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Disk, want.Disk) {
					t.Errorf("Disk:\n got %+v\nwant %+v", got.Disk, want.Disk)
				}
			})
		}
	}
}

func TestLinuxCountersSysBlockDecides(t *testing.T) {
	m := mapFixture(t, "pi4")
	// sda was unplugged between reading diskstats and sys/block.
	removeTree(m, "sys/block/sda")
	// A LUKS volume, zram swap and a CM4's eMMC boot area appear.
	m["proc/diskstats"] = &fstest.MapFile{Data: append(m["proc/diskstats"].Data, []byte(
		" 254       0 dm-0 100 0 800 10 200 0 1600 20 0 30 30 0 0 0 0 0 0\n"+
			" 253       0 zram0 5000 0 40000 10 9000 0 72000 20 0 30 30 0 0 0 0 0 0\n"+
			" 179       8 mmcblk0boot0 2 0 16 1 0 0 0 0 0 1 1 0 0 0 0 0 0\n")...)}
	for _, d := range []string{"dm-0", "zram0", "mmcblk0boot0"} {
		m["sys/block/"+d+"/dev"] = &fstest.MapFile{Data: []byte("0:0\n")}
	}
	got, err := countersOf(t, m, &fakeClock{t: t0})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range got.Disk {
		names = append(names, d.Name)
	}
	if want := []string{"dm-0", "mmcblk0"}; !slices.Equal(names, want) {
		t.Errorf("disks %q, want %q", names, want)
	}
}

func TestLinuxCountersSortsNaturally(t *testing.T) {
	m := mapFixture(t, "pi4")
	m["proc/net/dev"] = &fstest.MapFile{Data: []byte(netDevHeader +
		"eth10: 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n" +
		"   lo: 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n" +
		" eth2: 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n" +
		"br-lan: 4 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")}
	got, err := countersOf(t, m, &fakeClock{t: t0})
	if err != nil {
		t.Fatal(err)
	}
	want := []NetCounters{{Name: "br-lan", RxBytes: 4}, {Name: "eth2", RxBytes: 3}, {Name: "eth10", RxBytes: 1}}
	if !reflect.DeepEqual(got.Net, want) {
		t.Errorf("Net %+v, want %+v", got.Net, want)
	}
}

func TestLinuxCountersErrors(t *testing.T) {
	for _, file := range []string{"proc/net/dev", "proc/diskstats"} {
		m := mapFixture(t, "pi4")
		delete(m, file)
		_, err := countersOf(t, m, &fakeClock{t: t0})
		wantErr(t, err, file)

		m = mapFixture(t, "pi4")
		m[file] = &fstest.MapFile{Data: append(m[file].Data, "bogus: 1 2\n"...)}
		_, err = countersOf(t, m, &fakeClock{t: t0})
		wantErr(t, err, "/"+file, "line", "bogus")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l := newFixture(os.DirFS("testdata/pi4"), "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{})
	if _, err := l.Counters(ctx); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}

// TestLinuxCountersToRates runs the whole path on a Zero 2 W whose 32-bit
// wlan0 byte counter wraps between two readings two minutes apart.
func TestLinuxCountersToRates(t *testing.T) {
	m := mapFixture(t, "zero2w")
	clk := &fakeClock{t: t0}
	prev, err := countersOf(t, m, clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	// +300 MB received (wrapping past 2^32), +1.2 MB sent, 6000 more
	// writes of 8 sectors each, and 30 s of I/O time.
	m["proc/net/dev"] = &fstest.MapFile{Data: []byte(strings.NewReplacer(
		"3998213372", "3246076", " 291044810", " 292244810").Replace(string(m["proc/net/dev"].Data)))}
	m["proc/diskstats"] = &fstest.MapFile{Data: []byte(strings.NewReplacer(
		"mmcblk0 12093 4410 901344 30102 40218 51877 1430992 402113 0 160340",
		"mmcblk0 12093 4410 901344 30102 46218 51877 1478992 402113 0 190340").Replace(string(m["proc/diskstats"].Data)))}
	cur, err := countersOf(t, m, clk)
	if err != nil {
		t.Fatal(err)
	}
	net, disk := Rates(prev, cur)
	wantNet := []NetRates{{Name: "wlan0", RxBytesPerSec: 300e6 / 120, TxBytesPerSec: 1.2e6 / 120}}
	wantDisk := []DiskRates{{Name: "mmcblk0", WriteBytesPerSec: 48000 * 512 / 120.0, WriteIOPS: 50, BusyPercent: 25}}
	assertRates(t, net, disk, wantNet, wantDisk)
}

func TestLinuxCountersLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("not Linux")
	}
	if _, err := os.ReadFile("/proc/diskstats"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	l := NewLinux(LinuxOptions{})
	prev, err := l.Counters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cur, err := l.Counters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cur.Net {
		if c.Name == "lo" {
			t.Error("loopback listed")
		}
	}
	_, noSys := os.Stat("/sys/block")
	for _, d := range cur.Disk {
		if isVirtualDisk(d.Name) {
			t.Errorf("%s is not storage", d.Name)
		}
		if _, err := os.Stat("/sys/block/" + d.Name); noSys == nil && err != nil {
			t.Errorf("%s is not a whole disk: %v", d.Name, err)
		}
	}
	net, disk := Rates(prev, cur)
	if len(net) != len(cur.Net) || len(disk) != len(cur.Disk) {
		t.Errorf("devices changed within 50 ms? %d/%d net, %d/%d disk", len(net), len(cur.Net), len(disk), len(cur.Disk))
	}
	checkRates(t, cur)
	t.Logf("Net %+v\nDisk %+v\nrates %+v %+v", cur.Net, cur.Disk, net, disk)
}

// ctrs builds a Counters at t0+at.
func ctrs(at time.Duration, net []NetCounters, disk []DiskCounters) Counters {
	return Counters{Time: t0.Add(at), Net: net, Disk: disk}
}

func TestRatesNet(t *testing.T) {
	const s = time.Second
	eth := func(rxB, rxP, rxE, rxD, txB, txP, txE, txD uint64) NetCounters {
		return NetCounters{Name: "eth0", RxBytes: rxB, RxPackets: rxP, RxErrors: rxE, RxDrops: rxD, TxBytes: txB, TxPackets: txP, TxErrors: txE, TxDrops: txD}
	}
	for _, tc := range []struct {
		name      string
		prev, cur Counters
		want      []NetRates
	}{
		{
			name: "normal",
			prev: ctrs(0, []NetCounters{eth(1000, 10, 0, 1, 2000, 20, 3, 0)}, nil),
			cur:  ctrs(10*s, []NetCounters{eth(501000, 410, 5, 21, 62000, 120, 3, 10)}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 50000, TxBytesPerSec: 6000, RxPacketsPerSec: 40, TxPacketsPerSec: 10,
				RxErrorsPerSec: 0.5, TxErrorsPerSec: 0, RxDropsPerSec: 2, TxDropsPerSec: 1}},
		},
		{
			name: "32-bit wrap",
			// bytes: 2^32-1000 -> 4000 is 5000 on; packets: 2^32-1 -> 4 is 5 on
			prev: ctrs(0, []NetCounters{eth(1<<32-1000, 1<<32-1, 0, 0, 0, 0, 0, 0)}, nil),
			cur:  ctrs(5*s, []NetCounters{eth(4000, 4, 0, 0, 0, 0, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 1000, RxPacketsPerSec: 1}},
		},
		{
			name: "64-bit wrap",
			// prev is above 2^32, so the wrap is at 2^64: 1000 + 9000 on,
			// and 500 + 500 on
			prev: ctrs(0, []NetCounters{eth(math.MaxUint64-999, 0, 0, 0, math.MaxUint64-499, 0, 0, 0)}, nil),
			cur:  ctrs(5*s, []NetCounters{eth(9000, 0, 0, 0, 500, 0, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 2000, TxBytesPerSec: 200}},
		},
		{
			name: "64-bit reset: interface re-created",
			// 5e9 -> 1000 as a 64-bit wrap would be ~1.8e19 bytes
			prev: ctrs(0, []NetCounters{eth(5e9, 7e9, 0, 0, 5e9, 7e9, 0, 0)}, nil),
			cur:  ctrs(5*s, []NetCounters{eth(1000, 3, 0, 0, 2000, 8, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0"}},
		},
		{
			name: "32-bit reset over 1 s: absurd counts, plausible bytes",
			// packets 3e9 -> 10: 10+2^32-3e9 = 1294967306/s > 1e9/s: reset.
			// bytes 4e9 -> 1000: 1000+2^32-4e9 = 294968296 B/s: a wrap.
			prev: ctrs(0, []NetCounters{eth(4e9, 3e9, 0, 0, 0, 0, 0, 0)}, nil),
			cur:  ctrs(1*s, []NetCounters{eth(1000, 10, 0, 0, 0, 0, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 294968296}},
		},
		{
			name: "32-bit bytes reset over 10 ms",
			// the same 294968296 bytes in 10 ms is 29.5 GB/s > 12.5 GB/s
			prev: ctrs(0, []NetCounters{eth(4e9, 0, 0, 0, 0, 0, 0, 0)}, nil),
			cur:  ctrs(10*time.Millisecond, []NetCounters{eth(1000, 0, 0, 0, 0, 0, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0"}},
		},
		{
			name: "limits are inclusive and apply without a wrap",
			// 12.5e9 B/s = 100 Gbit/s exactly passes, one byte more does not;
			// likewise 1e9 packets/s
			prev: ctrs(0, []NetCounters{eth(1e12, 1e12, 0, 0, 1e12, 1e12, 0, 0)}, nil),
			cur:  ctrs(1*s, []NetCounters{eth(1e12+12.5e9, 1e12+1e9, 0, 0, 1e12+12.5e9+1, 1e12+1e9+1, 0, 0)}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 12.5e9, RxPacketsPerSec: 1e9}},
		},
		{
			name: "interface appears and another vanishes",
			prev: ctrs(0, []NetCounters{{Name: "eth0"}, {Name: "wlan0", RxBytes: 100}}, nil),
			cur:  ctrs(2*s, []NetCounters{{Name: "eth0", TxBytes: 40}, {Name: "usb0", RxBytes: 1 << 40}}, nil),
			want: []NetRates{{Name: "eth0", TxBytesPerSec: 20}},
		},
		{
			name: "insertion shifts positions; results in cur's order",
			prev: ctrs(0, []NetCounters{{Name: "wlan0"}, {Name: "eth0"}, {Name: "eth1"}}, nil),
			cur: ctrs(1*s, []NetCounters{{Name: "docker0", RxBytes: 9}, {Name: "eth0", RxBytes: 1}, {Name: "eth1", RxBytes: 2},
				{Name: "wlan0", RxBytes: 3}}, nil),
			want: []NetRates{{Name: "eth0", RxBytesPerSec: 1}, {Name: "eth1", RxBytesPerSec: 2}, {Name: "wlan0", RxBytesPerSec: 3}},
		},
		{
			name: "nothing in common",
			prev: ctrs(0, []NetCounters{{Name: "eth0"}}, nil),
			cur:  ctrs(1*s, []NetCounters{{Name: "eth1"}}, nil),
			want: []NetRates{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net, disk := Rates(tc.prev, tc.cur)
			assertRates(t, net, disk, tc.want, []DiskRates{})
		})
	}
}

func TestRatesDisk(t *testing.T) {
	const s = time.Second
	dev := func(name string, reads, sr, writes, sw, ticks uint64) DiskCounters {
		return DiskCounters{Name: name, ReadsCompleted: reads, SectorsRead: sr, WritesCompleted: writes, SectorsWritten: sw, IOTicksMs: ticks}
	}
	for _, tc := range []struct {
		name      string
		prev, cur Counters
		want      []DiskRates
	}{
		{
			name: "normal",
			// 2000 sectors read and 40000 written in 10 s, 2500 ms busy
			prev: ctrs(0, nil, []DiskCounters{dev("sda", 100, 1000, 50, 4000, 1000)}),
			cur:  ctrs(10*s, nil, []DiskCounters{dev("sda", 200, 3000, 250, 44000, 3500)}),
			want: []DiskRates{{Name: "sda", ReadBytesPerSec: 102400, WriteBytesPerSec: 2048000, ReadIOPS: 10, WriteIOPS: 20, BusyPercent: 25}},
		},
		{
			name: "busy above the wall clock clamps to 100",
			prev: ctrs(0, nil, []DiskCounters{dev("sda", 0, 0, 0, 0, 1000)}),
			cur:  ctrs(10*s, nil, []DiskCounters{dev("sda", 0, 0, 0, 0, 11200)}),
			want: []DiskRates{{Name: "sda", BusyPercent: 100}},
		},
		{
			name: "32-bit wrap on a 32-bit kernel",
			// sectors 2^32-296 -> 704 is 1000 on; ticks 2^32-1000 -> 1500 is 2500 on
			prev: ctrs(0, nil, []DiskCounters{dev("mmcblk0", 0, 0, 1<<32-1, 1<<32-296, 1<<32-1000)}),
			cur:  ctrs(10*s, nil, []DiskCounters{dev("mmcblk0", 0, 0, 9, 704, 1500)}),
			want: []DiskRates{{Name: "mmcblk0", WriteBytesPerSec: 51200, WriteIOPS: 1, BusyPercent: 25}},
		},
		{
			name: "64-bit reset: disk re-plugged",
			prev: ctrs(0, nil, []DiskCounters{dev("sda", 1<<40, 1<<40, 1<<40, 1<<40, 1<<40)}),
			cur:  ctrs(10*s, nil, []DiskCounters{dev("sda", 8, 64, 2, 16, 5)}),
			want: []DiskRates{{Name: "sda"}},
		},
		{
			name: "byte limit is on bytes, not sectors",
			// 24414062 sectors = 12499999744 B <= 12.5e9; one sector more is over
			prev: ctrs(0, nil, []DiskCounters{dev("nvme0n1", 0, 0, 0, 0, 0)}),
			cur:  ctrs(1*s, nil, []DiskCounters{dev("nvme0n1", 0, 24414062, 0, 24414063, 0)}),
			want: []DiskRates{{Name: "nvme0n1", ReadBytesPerSec: 12499999744}},
		},
		{
			name: "disk appears and another vanishes",
			prev: ctrs(0, nil, []DiskCounters{dev("mmcblk0", 0, 0, 0, 0, 0), dev("sda", 5, 5, 5, 5, 5)}),
			cur:  ctrs(4*s, nil, []DiskCounters{dev("mmcblk0", 4, 8, 0, 0, 400), dev("sdb", 1<<40, 0, 0, 0, 0)}),
			want: []DiskRates{{Name: "mmcblk0", ReadBytesPerSec: 1024, ReadIOPS: 1, BusyPercent: 10}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net, disk := Rates(tc.prev, tc.cur)
			assertRates(t, net, disk, []NetRates{}, tc.want)
		})
	}
}

func TestRatesNoInterval(t *testing.T) {
	prev := countersCases()["pi4"]
	for _, d := range []time.Duration{0, -time.Second} {
		cur := prev
		cur.Time = prev.Time.Add(d)
		if net, disk := Rates(prev, cur); net != nil || disk != nil {
			t.Errorf("elapsed %v: rates %+v %+v, want none", d, net, disk)
		}
	}
	// Unchanged counters over a real interval are zero rates, not none.
	cur := prev
	cur.Time = prev.Time.Add(time.Second)
	net, disk := Rates(prev, cur)
	if len(net) != 2 || len(disk) != 2 || net[0] != (NetRates{Name: "eth0"}) || disk[1] != (DiskRates{Name: "sda"}) {
		t.Errorf("unchanged: %+v %+v", net, disk)
	}
}

// assertRates compares with a relative tolerance, since rates are
// quotients, and reports which field differs.
func assertRates(t *testing.T, net []NetRates, disk []DiskRates, wantNet []NetRates, wantDisk []DiskRates) {
	t.Helper()
	if net == nil || disk == nil {
		t.Fatalf("nil rates over a positive interval: %v %v", net, disk)
	}
	near := func(a, b float64) bool { return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	if len(net) != len(wantNet) {
		t.Fatalf("net rates:\n got %+v\nwant %+v", net, wantNet)
	}
	for i := range net {
		g, w := reflect.ValueOf(net[i]), reflect.ValueOf(wantNet[i])
		for f := range g.NumField() {
			if f == 0 {
				if g.Field(0).String() != w.Field(0).String() {
					t.Errorf("net[%d].Name = %q, want %q", i, g.Field(0).String(), w.Field(0).String())
				}
				continue
			}
			if !near(g.Field(f).Float(), w.Field(f).Float()) {
				t.Errorf("net[%d] %s.%s = %v, want %v", i, net[i].Name, g.Type().Field(f).Name, g.Field(f).Float(), w.Field(f).Float())
			}
		}
	}
	if len(disk) != len(wantDisk) {
		t.Fatalf("disk rates:\n got %+v\nwant %+v", disk, wantDisk)
	}
	for i := range disk {
		g, w := reflect.ValueOf(disk[i]), reflect.ValueOf(wantDisk[i])
		for f := range g.NumField() {
			if f == 0 {
				if g.Field(0).String() != w.Field(0).String() {
					t.Errorf("disk[%d].Name = %q, want %q", i, g.Field(0).String(), w.Field(0).String())
				}
				continue
			}
			if !near(g.Field(f).Float(), w.Field(f).Float()) {
				t.Errorf("disk[%d] %s.%s = %v, want %v", i, disk[i].Name, g.Type().Field(f).Name, g.Field(f).Float(), w.Field(f).Float())
			}
		}
	}
}

func TestSimCounters(t *testing.T) {
	now := t0
	s := NewSim(SimOptions{Now: func() time.Time { return now }, Start: t0})
	ctx := t.Context()
	at := func(e time.Duration) Counters {
		t.Helper()
		now = t0.Add(e)
		c, err := s.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	boot := at(0)
	if want := (Counters{Time: t0, Net: []NetCounters{{Name: "eth0"}, {Name: "wlan0"}}, Disk: []DiskCounters{{Name: "mmcblk0"}}}); !reflect.DeepEqual(boot, want) {
		t.Errorf("at boot %+v, want all zero", boot)
	}

	// Never decreasing, in steps from 10 ms to minutes.
	prev := boot
	for e := time.Duration(0); e < 3*time.Hour; e += e/50 + 10*time.Millisecond {
		cur := at(e)
		if !cur.Time.Equal(now) {
			t.Fatalf("Time %v, want %v", cur.Time, now)
		}
		for i := range cur.Net {
			p, c := prev.Net[i], cur.Net[i]
			if c.RxBytes < p.RxBytes || c.TxBytes < p.TxBytes || c.RxPackets < p.RxPackets || c.TxPackets < p.TxPackets ||
				c.RxDrops < p.RxDrops || c.TxDrops < p.TxDrops || c.RxErrors < p.RxErrors || c.TxErrors < p.TxErrors {
				t.Fatalf("at %v %s went back: %+v -> %+v", e, c.Name, p, c)
			}
		}
		p, c := prev.Disk[0], cur.Disk[0]
		if c.ReadsCompleted < p.ReadsCompleted || c.SectorsRead < p.SectorsRead || c.WritesCompleted < p.WritesCompleted ||
			c.SectorsWritten < p.SectorsWritten || c.IOTicksMs < p.IOTicksMs {
			t.Fatalf("at %v %s went back: %+v -> %+v", e, c.Name, p, c)
		}
		prev = cur
	}

	// Plausible rates over the sampler's 5 s, all through two hours. The
	// bounds are the waves' extremes plus the rounding of one counter step
	// over 5 s (a 512-byte sector is 102 B/s, a millisecond 0.02 %).
	in := func(what string, v, lo, hi float64) {
		t.Helper()
		if v < lo || v > hi || math.IsNaN(v) {
			t.Fatalf("%s = %v, want %v..%v", what, v, lo, hi)
		}
	}
	for e := time.Duration(0); e < 2*time.Hour; e += 37 * time.Second {
		net, disk := Rates(at(e), at(e+5*time.Second))
		if len(net) != 2 || len(disk) != 1 {
			t.Fatalf("at %v: %d net and %d disk rates", e, len(net), len(disk))
		}
		eth, wlan, mmc := net[0], net[1], disk[0]
		in("eth0 rx B/s", eth.RxBytesPerSec, 35_000-1, 65_000+1)
		in("eth0 tx B/s", eth.TxBytesPerSec, 3_000-1, 9_000+1)
		in("eth0 rx pkt/s", eth.RxPacketsPerSec, 30, 60)
		in("eth0 tx pkt/s", eth.TxPacketsPerSec, 14, 46)
		in("wlan0 rx B/s", wlan.RxBytesPerSec, 600-1, 2_400+1)
		in("wlan0 tx B/s", wlan.TxBytesPerSec, 320-1, 1_280+1)
		in("eth0 rx drops/s", eth.RxDropsPerSec, 0, 0.2)
		in("wlan0 tx errors/s", wlan.TxErrorsPerSec, 0, 0.2)
		in("mmcblk0 write B/s", mmc.WriteBytesPerSec, 10_000-103, 30_000+103)
		in("mmcblk0 read B/s", mmc.ReadBytesPerSec, 0, 7_200+103)
		in("mmcblk0 write IOPS", mmc.WriteIOPS, 0.8, 4)
		in("mmcblk0 busy %", mmc.BusyPercent, 1-0.02, 3+0.02)
	}

	// Over an hour the means come through.
	net, disk := Rates(at(time.Hour), at(2*time.Hour))
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"eth0 rx", net[0].RxBytesPerSec, 50_000},
		{"eth0 tx", net[0].TxBytesPerSec, 6_000},
		{"mmcblk0 write", disk[0].WriteBytesPerSec, 20_000},
		{"mmcblk0 busy", disk[0].BusyPercent, 2},
	} {
		if math.Abs(c.got-c.want) > 0.02*c.want {
			t.Errorf("hourly mean %s = %v, want %v ± 2 %%", c.what, c.got, c.want)
		}
	}
}

func TestSimCountersDeterministic(t *testing.T) {
	at := t0.Add(1234567 * time.Millisecond)
	clock := func() time.Time { return at }
	a, _ := NewSim(SimOptions{Now: clock, Start: t0}).Counters(t.Context())
	b, _ := NewSim(SimOptions{Now: clock, Start: t0}).Counters(t.Context())
	if !reflect.DeepEqual(a, b) || a.Net[0].RxBytes == 0 {
		t.Errorf("same clock, different Counters:\n%+v\n%+v", a, b)
	}
	// A clock before Start reads as boot.
	early, err := NewSim(SimOptions{Now: func() time.Time { return t0.Add(-time.Hour) }, Start: t0}).Counters(t.Context())
	if err != nil || early.Net[0].RxBytes != 0 || early.Disk[0].IOTicksMs != 0 {
		t.Errorf("before Start: %+v, %v", early, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewSim(SimOptions{}).Counters(ctx); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
	// Sources are counter sources, as the agent's sampler checks.
	for _, src := range []Source{NewSim(SimOptions{}), NewLinux(LinuxOptions{Root: fstest.MapFS{}})} {
		if _, ok := src.(CounterSource); !ok {
			t.Errorf("%T is not a CounterSource", src)
		}
	}
	before := runtime.NumGoroutine()
	s := NewSim(SimOptions{})
	for range 100 {
		_, _ = s.Counters(t.Context())
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d -> %d", before, after)
	}
}

func FuzzParseNetDev(f *testing.F) {
	for _, b := range fixtureBoards {
		f.Add(readFixture(f, b, "proc/net/dev"))
	}
	f.Add([]byte(netDevHeader + "eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"))
	f.Add([]byte(": : : |\n"))
	f.Add([]byte("eth0: 18446744073709551615 1 1 1 1 1 1 1 18446744073709551615 1 1 1 1 1 1 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ifs, err := ParseNetDev(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sysinfo: parse /proc/net/dev: line ") {
				t.Fatalf("error does not name the file and line: %v", err)
			}
			return
		}
		for _, c := range ifs {
			if c.Name == "" || strings.ContainsAny(c.Name, ": \t\n") {
				t.Fatalf("bad name %q", c.Name)
			}
		}
		checkRates(t, Counters{Net: ifs})
	})
}

func FuzzParseDiskstats(f *testing.F) {
	for _, b := range fixtureBoards {
		f.Add(readFixture(f, b, "proc/diskstats"))
	}
	f.Add([]byte("8 0 sda 1 2 3 4 5 6 7 8 9 10 11\n8 1 sda1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"))
	f.Add([]byte("8 0 sda 18446744073709551615 2 18446744073709551615 4 5 6 7 8 9 18446744073709551615 11\n"))
	f.Add([]byte("8 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := ParseDiskstats(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sysinfo: parse /proc/diskstats: line ") {
				t.Fatalf("error does not name the file and line: %v", err)
			}
			return
		}
		for _, d := range ds {
			if d.Name == "" || strings.ContainsAny(d.Name, " \t\n") {
				t.Fatalf("bad name %q", d.Name)
			}
			_ = isWholeDisk(d.Name, nil)
		}
		checkRates(t, Counters{Disk: ds})
	})
}

// checkRates runs Rates from zero counters to c and back, one second
// apart: whatever the values, every rate must be finite and non-negative
// and busy within 0..100.
func checkRates(t *testing.T, c Counters) {
	zero := Counters{Net: make([]NetCounters, len(c.Net)), Disk: make([]DiskCounters, len(c.Disk))}
	for i := range c.Net {
		zero.Net[i].Name = c.Net[i].Name
	}
	for i := range c.Disk {
		zero.Disk[i].Name = c.Disk[i].Name
	}
	at := func(c Counters, sec int64) Counters { c.Time = time.Unix(sec, 0); return c }
	for _, pair := range [][2]Counters{{at(zero, 1), at(c, 2)}, {at(c, 1), at(zero, 2)}} {
		net, disk := Rates(pair[0], pair[1])
		for _, r := range net {
			for _, v := range []float64{r.RxBytesPerSec, r.TxBytesPerSec, r.RxPacketsPerSec, r.TxPacketsPerSec,
				r.RxErrorsPerSec, r.TxErrorsPerSec, r.RxDropsPerSec, r.TxDropsPerSec} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("bad net rate %+v", r)
				}
			}
		}
		for _, r := range disk {
			for _, v := range []float64{r.ReadBytesPerSec, r.WriteBytesPerSec, r.ReadIOPS, r.WriteIOPS, r.BusyPercent} {
				if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("bad disk rate %+v", r)
				}
			}
			if r.BusyPercent > 100 {
				t.Fatalf("busy %v", r.BusyPercent)
			}
		}
	}
}

func BenchmarkLinuxCounters(b *testing.B) {
	l := newFixture(os.DirFS("testdata/pi4"), "aarch64", 1, 0, &fakeClock{t: t0, step: time.Second}, &fakeExec{})
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Counters(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRates(b *testing.B) {
	prev := countersCases()["pi4"]
	cur := Counters{Time: prev.Time.Add(5 * time.Second)}
	for _, c := range prev.Net {
		c.RxBytes += 250_000
		c.TxBytes += 30_000
		c.RxPackets += 200
		c.TxPackets += 150
		cur.Net = append(cur.Net, c)
	}
	for _, d := range prev.Disk {
		d.SectorsWritten += 200
		d.WritesCompleted += 25
		d.IOTicksMs += 120
		cur.Disk = append(cur.Disk, d)
	}
	b.ReportAllocs()
	for b.Loop() {
		net, disk := Rates(prev, cur)
		if len(net) != 2 || len(disk) != 2 {
			b.Fatal(fmt.Sprint(net, disk))
		}
	}
}

// The queue depth is the later reading's in-flight count: a level, not a rate.
func TestRatesQueueDepth(t *testing.T) {
	prev := Counters{Time: t0, Disk: []DiskCounters{{Name: "sda", InFlight: 7}}}
	cur := Counters{Time: t0.Add(time.Second), Disk: []DiskCounters{{Name: "sda", InFlight: 2}}}
	if _, d := Rates(prev, cur); len(d) != 1 || d[0].QueueDepth != 2 {
		t.Fatalf("%+v", d)
	}
}

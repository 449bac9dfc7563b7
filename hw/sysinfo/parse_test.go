package sysinfo

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixtureBoards are the trees under testdata; every parser must accept
// every board's real file.
var fixtureBoards = [...]string{"pi4", "pi5", "zero2w", "nosensors"}

func readFixture(t testing.TB, board, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", board, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantErr checks that err is non-nil and names the package and every
// given fragment (the file, the field or the bad value).
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", fragments)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "sysinfo: ") {
		t.Errorf("error %q does not start with the package name", msg)
	}
	for _, f := range fragments {
		if !strings.Contains(msg, f) {
			t.Errorf("error %q does not mention %q", msg, f)
		}
	}
}

const kB = 1024

func TestParseMeminfoFixtures(t *testing.T) {
	for _, tc := range []struct {
		board                           string
		total, avail, used, swap, swapU uint64
	}{
		{"pi4", 3882772, 3172856, 709916, 102396, 0},
		{"pi5", 8245696, 7012288, 1233408, 204784, 24576},
		{"zero2w", 427172, 309876, 117296, 102396, 20480},
		{"nosensors", 4013504, 2760912, 1252592, 0, 0},
	} {
		t.Run(tc.board, func(t *testing.T) {
			m, err := ParseMeminfo(readFixture(t, tc.board, "proc/meminfo"))
			if err != nil {
				t.Fatal(err)
			}
			if !m.HasMemAvailable {
				t.Error("HasMemAvailable false for a modern kernel")
			}
			got := [...]uint64{m.MemTotal, m.Available(), m.Used(), m.SwapTotal, m.SwapUsed()}
			want := [...]uint64{tc.total * kB, tc.avail * kB, tc.used * kB, tc.swap * kB, tc.swapU * kB}
			if got != want {
				t.Errorf("total, avail, used, swap, swap used = %v, want %v", got, want)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	t.Run("no MemAvailable falls back to free+buffers+cached", func(t *testing.T) {
		m, err := ParseMeminfo([]byte("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n"))
		if err != nil {
			t.Fatal(err)
		}
		if m.HasMemAvailable || m.Available() != 400*kB || m.Used() != 600*kB {
			t.Errorf("got %+v avail %d used %d, want avail 400 kB used 600 kB", m, m.Available(), m.Used())
		}
	})
	t.Run("fallback is capped at MemTotal", func(t *testing.T) {
		m, err := ParseMeminfo([]byte("MemTotal: 1000 kB\nMemFree: 900 kB\nBuffers: 50 kB\nCached: 250 kB\n"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Available() != 1000*kB || m.Used() != 0 {
			t.Errorf("avail %d used %d, want 1000 kB and 0", m.Available(), m.Used())
		}
	})
	t.Run("unknown and unit-less fields are ignored", func(t *testing.T) {
		m, err := ParseMeminfo([]byte("HugePages_Total:       0\nMemTotal: 8 kB\nNewField: whatever\n\n"))
		if err != nil || m.MemTotal != 8*kB {
			t.Errorf("got %+v, %v", m, err)
		}
	})
	for _, tc := range []struct{ name, in, frag string }{
		{"empty", "", `"MemTotal" missing`},
		{"no MemTotal", "MemFree: 1 kB\n", `"MemTotal" missing`},
		{"no colon", "MemTotal 1 kB\n", `line 1 "MemTotal 1 kB"`},
		{"not a number", "MemTotal: abc kB\n", `"MemTotal"`},
		{"wrong unit", "MemTotal: 12 MB\n", `"12 MB"`},
		{"no unit", "MemFree: 12\nMemTotal: 1 kB\n", `"MemFree"`},
		{"negative", "MemTotal: -1 kB\n", `"MemTotal"`},
		{"overflows bytes", "MemTotal: 18446744073709551615 kB\n", "overflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseMeminfo([]byte(tc.in))
			wantErr(t, err, "/proc/meminfo", tc.frag)
		})
	}
}

func TestParseStatFixtures(t *testing.T) {
	want := map[string]CPUTimes{
		"pi4":       {User: 606190, Nice: 3098, System: 236577, Idle: 36378890, IOWait: 11572, SoftIRQ: 13572},
		"pi5":       {User: 1617557, Nice: 5553, System: 476616, Idle: 11808687, IOWait: 46697, SoftIRQ: 21889},
		"zero2w":    {User: 236968, System: 116350, Idle: 6503558, IOWait: 24508, SoftIRQ: 6649},
		"nosensors": {User: 1602531, Nice: 4189, System: 378535, Idle: 14065193, IOWait: 29993, SoftIRQ: 17142, Steal: 6187},
	}
	for _, board := range fixtureBoards {
		t.Run(board, func(t *testing.T) {
			got, err := ParseStat(readFixture(t, board, "proc/stat"))
			if err != nil {
				t.Fatal(err)
			}
			if got != want[board] {
				t.Errorf("got %+v, want %+v", got, want[board])
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	t.Run("old four-column kernel", func(t *testing.T) {
		got, err := ParseStat([]byte("cpu 1 2 3 4\ncpu0 1 2 3 4\n"))
		if err != nil || got != (CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}) {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	t.Run("extra future columns are ignored", func(t *testing.T) {
		got, err := ParseStat([]byte("cpu 1 2 3 4 5 6 7 8 9 10 11 12\n"))
		want := CPUTimes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		if err != nil || got != want {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	t.Run("aggregate line need not be first", func(t *testing.T) {
		got, err := ParseStat([]byte("intr 5 6\ncpu0 9 9 9 9\ncpu 1 2 3 4\n"))
		if err != nil || got.User != 1 {
			t.Errorf("got %+v, %v", got, err)
		}
	})
	for _, tc := range []struct{ name, in, frag string }{
		{"empty", "", `no "cpu" line`},
		{"only per-cpu lines", "cpu0 1 2 3 4\n", `no "cpu" line`},
		{"too few fields", "cpu 1 2 3\n", "3 fields"},
		{"not a number", "cpu 1 x 3 4\n", `"nice"`},
		{"negative", "cpu 1 2 3 -4\n", `"idle"`},
		{"bad late column", "cpu 1 2 3 4 5 6 7 8 9 z\n", `"guest_nice"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStat([]byte(tc.in))
			wantErr(t, err, "/proc/stat", tc.frag)
		})
	}
}

func TestCPUUsagePercent(t *testing.T) {
	base := CPUTimes{User: 1000, Nice: 10, System: 500, Idle: 8000, IOWait: 100, IRQ: 5, SoftIRQ: 20, Steal: 3, Guest: 7, GuestNice: 1}
	// busy excludes idle and iowait, and guest time is already in user/nice
	if base.Busy() != 1538 || base.Total() != 9638 {
		t.Errorf("Busy %d Total %d, want 1538 and 9638", base.Busy(), base.Total())
	}
	add := func(c CPUTimes, f func(*CPUTimes)) CPUTimes { f(&c); return c }
	for _, tc := range []struct {
		name   string
		cur    CPUTimes
		want   float64
		wantOK bool
	}{
		{"no time passed", base, 0, true},
		{"quarter busy", add(base, func(c *CPUTimes) { c.User += 20; c.System += 5; c.Idle += 75 }), 25, true},
		{"iowait counts as idle", add(base, func(c *CPUTimes) { c.User += 50; c.IOWait += 50 }), 50, true},
		{"irq, softirq and steal are busy", add(base, func(c *CPUTimes) { c.IRQ += 10; c.SoftIRQ += 10; c.Steal += 20; c.Idle += 60 }), 40, true},
		{"guest is inside user, not added again", add(base, func(c *CPUTimes) { c.User += 10; c.Guest += 10; c.Idle += 90 }), 10, true},
		{"all busy", add(base, func(c *CPUTimes) { c.Nice += 100 }), 100, true},
		{"iowait stepping back counts as zero", add(base, func(c *CPUTimes) { c.IOWait -= 10; c.User += 30; c.Idle += 70 }), 30, true},
		{"whole counter backwards (new boot)", CPUTimes{User: 10, Idle: 90}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CPUUsagePercent(base, tc.cur)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("CPUUsagePercent = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
	t.Run("saturating sums", func(t *testing.T) {
		huge := CPUTimes{User: math.MaxUint64, Idle: math.MaxUint64}
		if huge.Total() != math.MaxUint64 || huge.Busy() != math.MaxUint64 {
			t.Errorf("Total %d Busy %d, want saturation", huge.Total(), huge.Busy())
		}
		if pct, ok := CPUUsagePercent(CPUTimes{}, huge); !ok || pct < 0 || pct > 100 {
			t.Errorf("got %v, %v", pct, ok)
		}
	})
}

func TestParseLoadavg(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  Loadavg
	}{
		{"pi4", Loadavg{0.42, 0.35, 0.30}},
		{"pi5", Loadavg{1.87, 1.42, 1.10}},
		{"zero2w", Loadavg{0.08, 0.11, 0.09}},
		{"nosensors", Loadavg{0.91, 0.77, 0.64}},
	} {
		got, err := ParseLoadavg(readFixture(t, tc.board, "proc/loadavg"))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.board, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ name, in, frag string }{
		{"empty", "", "0 fields"},
		{"two fields", "0.1 0.2\n", "2 fields"},
		{"word", "0.1 abc 0.3 1/2 3\n", `"load5"`},
		{"NaN", "NaN 0 0 1/2 3\n", `"load1"`},
		{"Inf", "0 0 +Inf 1/2 3\n", `"load15"`},
		{"negative", "-1 0 0 1/2 3\n", `"load1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLoadavg([]byte(tc.in))
			wantErr(t, err, "/proc/loadavg", tc.frag)
		})
	}
}

func TestParseUptime(t *testing.T) {
	got, err := ParseUptime(readFixture(t, "pi4", "proc/uptime"))
	if err != nil || got != 93102.48 {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := ParseUptime([]byte("5")); err != nil || got != 5 {
		t.Errorf("one field: got %v, %v", got, err)
	}
	for _, in := range []string{"", " \n", "abc 1", "-3.0 1", "NaN 1"} {
		_, err := ParseUptime([]byte(in))
		wantErr(t, err, "/proc/uptime")
	}
}

func TestParseCPUInfo(t *testing.T) {
	for _, tc := range []struct {
		board string
		want  CPUInfo
	}{
		{"pi4", CPUInfo{Cores: 4, Hardware: "BCM2835", Revision: "c03114", Serial: "10000000a3b4c5d6", Model: "Raspberry Pi 4 Model B Rev 1.4"}},
		{"pi5", CPUInfo{Cores: 4, Revision: "d04170", Serial: "4f3a9c21b7e8d605", Model: "Raspberry Pi 5 Model B Rev 1.0"}},
		{"zero2w", CPUInfo{Cores: 4, ModelName: "ARMv7 Processor rev 4 (v7l)", Hardware: "BCM2835", Revision: "902120", Serial: "00000000e1f2a3b4", Model: "Raspberry Pi Zero 2 W Rev 1.0"}},
		// x86's lower-case "model : 85" must not be taken for the board model.
		{"nosensors", CPUInfo{Cores: 2, ModelName: "Intel Xeon Processor (Cascadelake)"}},
	} {
		t.Run(tc.board, func(t *testing.T) {
			got, err := ParseCPUInfo(readFixture(t, tc.board, "proc/cpuinfo"))
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, in := range []string{"", "\n\n", "no colons here\nat all\n"} {
		_, err := ParseCPUInfo([]byte(in))
		wantErr(t, err, "/proc/cpuinfo")
	}
}

func TestParseOSRelease(t *testing.T) {
	got, err := ParseOSRelease(readFixture(t, "zero2w", "etc/os-release"))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"NAME": "Raspbian GNU/Linux", "VERSION": "12 (bookworm)", "VERSION_CODENAME": "bookworm", "ID_LIKE": "debian"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}

	got, err = ParseOSRelease([]byte("# comment\n\nA=plain\nB='single \"q\"'\nC=\"dbl \\\"x\\\" \\\\ \\$HOME \\`c\\` \\n\"\nD=\nE=a=b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "plain", "B": `single "q"`, "C": "dbl \"x\" \\ $HOME `c` \\n", "D": "", "E": "a=b"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d keys %v, want %d", len(got), got, len(want))
	}

	for _, tc := range []struct{ in, frag string }{
		{"NAME=x\njunk\nVERSION=1\n", "line 2: no '='"},
		{"NAME=x\n1KEY=v\n", `key "1KEY" invalid`},
		{"NAME=x\nK-Y=v\n", `key "K-Y" invalid`},
		{"NAME=\"open\n", `key "NAME": unterminated quote`},
		{"NAME=\"a\"b\n", `key "NAME": text after closing quote`},
	} {
		got, err := ParseOSRelease([]byte(tc.in))
		wantErr(t, err, "os-release", tc.frag)
		if strings.HasPrefix(tc.in, "NAME=x") && got["NAME"] != "x" {
			t.Errorf("%q: good line lost: %v", tc.in, got)
		}
	}
}

func TestParseThrottled(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Throttle
	}{
		{"0\n", Throttle{}},
		{"0", Throttle{}},
		{"throttled=0x0\n", Throttle{}},
		{"50005\n", Throttle{Raw: 0x50005, UnderVoltage: true, Throttled: true, UnderVoltageOccurred: true, ThrottledOccurred: true}},
		{"throttled=0x50005", Throttle{Raw: 0x50005, UnderVoltage: true, Throttled: true, UnderVoltageOccurred: true, ThrottledOccurred: true}},
		{"throttled=0X80008\n", Throttle{Raw: 0x80008, SoftTempLimit: true, SoftTempLimitOccurred: true}},
		{"e000a", Throttle{Raw: 0xe000a, FreqCapped: true, SoftTempLimit: true, FreqCappedOccurred: true, ThrottledOccurred: true, SoftTempLimitOccurred: true}},
		{"ffffffff", ThrottleFromRaw(0xffffffff)},
	} {
		got, err := ParseThrottled(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseThrottled(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "\n", "throttled=", "0x", "throttled=0x", "zz", "100000000", "-1", "throttled=0x-1", "1 2", "0x0x1", "1_0"} {
		_, err := ParseThrottled(in)
		wantErr(t, err, "get_throttled", strings.TrimSpace(in))
	}
}

func TestThrottleFromRawBits(t *testing.T) {
	// Bits 4..15 and 20..31 are undocumented and must not leak into a flag.
	if got := ThrottleFromRaw(0xfff0fff0); got != (Throttle{Raw: 0xfff0fff0}) {
		t.Errorf("undocumented bits set flags: %+v", got)
	}
	for bit, check := range map[uint]func(Throttle) bool{
		0: func(t Throttle) bool { return t.UnderVoltage }, 1: func(t Throttle) bool { return t.FreqCapped },
		2: func(t Throttle) bool { return t.Throttled }, 3: func(t Throttle) bool { return t.SoftTempLimit },
		16: func(t Throttle) bool { return t.UnderVoltageOccurred }, 17: func(t Throttle) bool { return t.FreqCappedOccurred },
		18: func(t Throttle) bool { return t.ThrottledOccurred }, 19: func(t Throttle) bool { return t.SoftTempLimitOccurred },
	} {
		if !check(ThrottleFromRaw(1 << bit)) {
			t.Errorf("bit %d not decoded", bit)
		}
	}
}

func TestParseVcgencmdTemp(t *testing.T) {
	for in, want := range map[string]float64{"temp=47.2'C\n": 47.2, "temp=60.0'C": 60, "temp=-3.5'C": -3.5} {
		if got, err := ParseVcgencmdTemp(in); err != nil || got != want {
			t.Errorf("ParseVcgencmdTemp(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "47.2", "temp=47.2", "temp=47.2C", "temp='C", "temp=abc'C", "temp=NaN'C", "temp=Inf'C", "VCHI initialization failed"} {
		_, err := ParseVcgencmdTemp(in)
		wantErr(t, err, "measure_temp")
	}
}

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-3\n": 4, "0-3,6": 5, "0,2-3": 3, "0-1,4-7": 6} {
		if got, err := parseCPUList(in); err != nil || got != want {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "-1", "0-", "0,,1", "0-9223372036854775807", "0-3,a"} {
		_, err := parseCPUList(in)
		wantErr(t, err, "cpu list")
	}
}

func TestParseMilliCelsius(t *testing.T) {
	for in, want := range map[string]float64{"47236\n": 47.236, "-5000": -5, "0": 0} {
		if got, err := parseMilliCelsius(in); err != nil || got != want {
			t.Errorf("parseMilliCelsius(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := parseMilliCelsius("N/A"); err == nil {
		t.Error("N/A parsed")
	}
}

func TestNaturalCompare(t *testing.T) {
	got := []string{"hwmon10", "hwmon2", "gpiochip13", "hwmon1", "gpiochip0", "temp10_input", "temp2_input", "gpiochip4", "hwmon01", "a", ""}
	slices.SortFunc(got, naturalCompare)
	want := []string{"", "a", "gpiochip0", "gpiochip4", "gpiochip13", "hwmon1", "hwmon01", "hwmon2", "hwmon10", "temp2_input", "temp10_input"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestIsSensorDriver(t *testing.T) {
	for d, want := range map[string]bool{
		"imx708": true, "imx219": true, "ov5647": true, "ov64a40": true, "arducam_64mp": true,
		"dw9807": false, "rp1-cfe-csi2": false, "unicam": false, "ov": false, "": false,
	} {
		if got := isSensorDriver(d); got != want {
			t.Errorf("isSensorDriver(%q) = %v, want %v", d, got, want)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	for _, b := range fixtureBoards {
		f.Add(readFixture(f, b, "proc/stat"))
	}
	f.Add([]byte("cpu 1 2 3 4\n"))
	f.Add([]byte("cpu 18446744073709551615 18446744073709551615 1 2 3 4 5 6 7 8\n"))
	f.Add([]byte("cpu\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseStat(b)
		if err != nil {
			return
		}
		for _, pair := range [][2]CPUTimes{{c, c}, {CPUTimes{}, c}, {c, CPUTimes{}}} {
			if pct, ok := CPUUsagePercent(pair[0], pair[1]); ok && (pct < 0 || pct > 100 || math.IsNaN(pct)) {
				t.Fatalf("CPUUsagePercent out of range: %v", pct)
			}
		}
	})
}

func FuzzParseMeminfo(f *testing.F) {
	for _, b := range fixtureBoards {
		f.Add(readFixture(f, b, "proc/meminfo"))
	}
	f.Add([]byte("MemTotal: 1 kB\nMemFree: 18014398509481983 kB\nBuffers: 18014398509481983 kB\n"))
	f.Add([]byte("MemTotal:\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMeminfo(b)
		if err != nil {
			return
		}
		if m.Used() > m.MemTotal || m.SwapUsed() > m.SwapTotal {
			t.Fatalf("used exceeds total: %+v", m)
		}
	})
}

func FuzzParseThrottled(f *testing.F) {
	for _, s := range []string{"0\n", "50005\n", "throttled=0x50005", "throttled=0x0\n", "0x", "throttled=", "ffffffff", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := ParseThrottled(s)
		if err != nil {
			return
		}
		if th != ThrottleFromRaw(th.Raw) {
			t.Fatalf("flags disagree with Raw: %+v", th)
		}
	})
}

package sysinfo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// t0 is the fixed wall clock of the fixture tests.
var t0 = time.Date(2024, 6, 4, 12, 0, 0, 0, time.UTC)

// mapFixture copies testdata/<board> into a MapFS, so a test can delete or
// rewrite single files (a missing sensor, a new /proc/stat reading).
func mapFixture(t testing.TB, board string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := os.DirFS(path.Join("testdata", board))
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		m[p] = &fstest.MapFile{Data: b}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// removeTree deletes every file under dir from m.
func removeTree(m fstest.MapFS, dir string) {
	for p := range maps.Keys(m) {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			delete(m, p)
		}
	}
}

// fakeClock is a manual clock. Sleep advances it instead of waiting and
// then runs onSleep, which is where a test swaps /proc/stat for the
// reading "100 ms later". It is safe for concurrent use.
type fakeClock struct {
	mu      sync.Mutex
	t       time.Time
	step    time.Duration // added on every Now, so readings are never the same instant
	slept   []time.Duration
	onSleep func()
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.slept = append(c.slept, d)
	f := c.onSleep
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return nil
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

// fakeExec answers "name args..." from out; anything else behaves like a
// missing binary, as on a machine without vcgencmd.
type fakeExec struct {
	mu    sync.Mutex
	out   map[string]string
	calls []string
}

func (f *fakeExec) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(append([]string{name}, args...), " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, cmd)
	if s, ok := f.out[cmd]; ok {
		if s == "exit 1" {
			return nil, fmt.Errorf("fake: run %s: exit status 1", cmd)
		}
		return []byte(s), nil
	}
	return nil, fmt.Errorf("fake: run %s: %w", name, exec.ErrNotFound)
}

func (f *fakeExec) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// newFixture returns a Linux over root with every live dependency faked:
// statfs reports total/free, uname reports arch, vcgencmd answers from ex.
func newFixture(root fs.FS, arch string, total, free uint64, clk *fakeClock, ex *fakeExec) *Linux {
	return NewLinux(LinuxOptions{
		Root: root,
		Statfs: func(p string) (uint64, uint64, error) {
			if p != "/" {
				return 0, 0, fmt.Errorf("fake statfs: unexpected path %q", p)
			}
			return total, free, nil
		},
		Exec:  ex.Exec,
		Uname: func() (string, error) { return arch, nil },
		Now:   clk.Now,
		Sleep: clk.Sleep,
	})
}

func f64(v float64) *float64 { return &v }

type fixtureCase struct {
	board       string
	arch        string
	total, free uint64
	basic       Basic
	health      Health // CPUUsagePercent is 0: the fixture's /proc/stat does not change
	hw          Hardware
	execCalls   []string // vcgencmd calls one Health makes
}

func fixtureCases() []fixtureCase {
	const gib = 1 << 30
	return []fixtureCase{
		{
			board: "pi4", arch: "aarch64", total: 29 * gib, free: 21 * gib,
			basic: Basic{
				Hostname: "pi4-lab", Model: "Raspberry Pi 4 Model B Rev 1.4", CPUArch: "aarch64", CPUCores: 4,
				MemoryTotalBytes: 3882772 * kB, OSName: "Debian GNU/Linux", OSVersion: "12 (bookworm)",
				KernelVersion: "6.6.51+rpt-rpi-v8", UptimeSeconds: 93102, Serial: "10000000a3b4c5d6", Revision: "c03114",
			},
			health: Health{
				Time: t0, CPUFreqMHz: f64(1800), Load1: 0.42, Load5: 0.35, Load15: 0.30,
				MemoryTotalBytes: 3882772 * kB, MemoryUsedBytes: 709916 * kB, MemoryAvailableBytes: 3172856 * kB,
				SwapTotalBytes: 102396 * kB, SwapUsedBytes: 0,
				DiskTotalBytes: 29 * gib, DiskUsedBytes: 8 * gib,
				TemperatureCelsius: f64(47.236), TemperatureSource: "thermal_zone0",
				Throttle:      &Throttle{Source: ThrottleFirmware},
				UptimeSeconds: 93102,
			},
			hw: Hardware{
				GPIOChips:      []string{"gpiochip0", "gpiochip1"},
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2711", "gpiochip1": "raspberrypi-exp-gpio"},
				I2CBuses:       []int{0, 1, 10, 20, 21, 22},
				PWMChips:       []string{"pwmchip0"},
				// the UVC webcam's two nodes (capture, metadata) are one camera;
				// unicam, codec and ISP nodes and the dw9807 lens are not cameras.
				Cameras: []string{"HD Pro Webcam C920", "imx708"},
				Thermal: true, Throttle: true, ThrottleSource: ThrottleFirmware, IsRaspberryPi: true,
			},
		},
		{
			board: "pi5", arch: "aarch64", total: 58 * gib, free: 40 * gib,
			basic: Basic{
				Hostname: "pi5-nas", Model: "Raspberry Pi 5 Model B Rev 1.0", CPUArch: "aarch64", CPUCores: 4,
				MemoryTotalBytes: 8245696 * kB, OSName: "Debian GNU/Linux", OSVersion: "12 (bookworm)",
				KernelVersion: "6.6.51+rpt-rpi-2712", UptimeSeconds: 29401, Serial: "4f3a9c21b7e8d605", Revision: "d04170",
			},
			health: Health{
				Time: t0, CPUFreqMHz: f64(2400), Load1: 1.87, Load5: 1.42, Load15: 1.10,
				MemoryTotalBytes: 8245696 * kB, MemoryUsedBytes: 1233408 * kB, MemoryAvailableBytes: 7012288 * kB,
				SwapTotalBytes: 204784 * kB, SwapUsedBytes: 24576 * kB,
				DiskTotalBytes: 58 * gib, DiskUsedBytes: 18 * gib,
				TemperatureCelsius: f64(58.65), TemperatureSource: "thermal_zone0",
				Throttle: &Throttle{Raw: 0x50005, UnderVoltage: true, Throttled: true,
					UnderVoltageOccurred: true, ThrottledOccurred: true, Source: ThrottleFirmware},
				UptimeSeconds: 29401,
			},
			hw: Hardware{
				GPIOChips: []string{"gpiochip0", "gpiochip10", "gpiochip11", "gpiochip12", "gpiochip13"},
				// gpio-brcmstb has two chips per device, so its labels are ambiguous.
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-rp1"},
				I2CBuses:       []int{1, 6, 11, 12},
				PWMChips:       []string{"pwmchip0", "pwmchip1"},
				Cameras:        []string{"imx708"},
				Thermal:        true, Throttle: true, ThrottleSource: ThrottleFirmware, IsRaspberryPi: true,
			},
		},
		{
			board: "zero2w", arch: "armv7l", total: 14 * gib, free: 11 * gib,
			basic: Basic{
				Hostname: "zero2w", Model: "Raspberry Pi Zero 2 W Rev 1.0", CPUArch: "armv7l", CPUCores: 4,
				MemoryTotalBytes: 427172 * kB, OSName: "Raspbian GNU/Linux", OSVersion: "12 (bookworm)",
				KernelVersion: "6.6.51+rpt-rpi-v7", UptimeSeconds: 16402, Serial: "00000000e1f2a3b4", Revision: "902120",
			},
			health: Health{
				Time: t0, CPUFreqMHz: f64(600), Load1: 0.08, Load5: 0.11, Load15: 0.09,
				MemoryTotalBytes: 427172 * kB, MemoryUsedBytes: 117296 * kB, MemoryAvailableBytes: 309876 * kB,
				SwapTotalBytes: 102396 * kB, SwapUsedBytes: 20480 * kB,
				DiskTotalBytes: 14 * gib, DiskUsedBytes: 3 * gib,
				TemperatureCelsius: f64(41.856), TemperatureSource: "thermal_zone0",
				Throttle:      &Throttle{Raw: 0x50000, UnderVoltageOccurred: true, ThrottledOccurred: true, Source: ThrottleFirmware},
				UptimeSeconds: 16402,
			},
			hw: Hardware{
				GPIOChips:      []string{"gpiochip0", "gpiochip1"},
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2835", "gpiochip1": "raspberrypi-exp-gpio"},
				I2CBuses:       []int{1, 2},
				PWMChips:       []string{},
				Cameras:        []string{},
				Thermal:        true, Throttle: true, ThrottleSource: ThrottleFirmware, IsRaspberryPi: true,
			},
		},
		// The emulated boards of make test-pi (QEMU raspi0, raspi3b, raspi4b)
		// with Debian's kernels and a busybox initramfs, recorded by
		// `vmtest pi record`: no os-release, no get_throttled node, no
		// vcgencmd, no serial-number in the device tree, the 32-bit
		// kernel's cpuinfo prints zeros for the board, and the arm64
		// boards have the firmware's GPIO expander beside the SoC's.
		{
			board: "raspi0", arch: "armv6l", total: 1 * gib, free: 1 * gib,
			basic: Basic{
				Hostname: "raspberrypi", Model: "Raspberry Pi Zero", CPUArch: "armv6l", CPUCores: 1,
				MemoryTotalBytes: 440376 * kB, KernelVersion: "6.1.0-50-rpi", UptimeSeconds: 11,
			},
			health: Health{
				Time: t0, Load1: 0.31, Load5: 0.07, Load15: 0.02,
				MemoryTotalBytes: 440376 * kB, MemoryUsedBytes: (440376 - 425428) * kB, MemoryAvailableBytes: 425428 * kB,
				DiskTotalBytes: 1 * gib, TemperatureCelsius: f64(20.178), TemperatureSource: "thermal_zone0",
				// the armel kernel's raspberrypi-hwmon: under-voltage now, nothing else
				Throttle:      &Throttle{Source: ThrottleRpiVolt, UnderVoltageOnly: true},
				UptimeSeconds: 11,
			},
			hw: Hardware{
				GPIOChips:      []string{"gpiochip0"},
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2835"},
				I2CBuses:       []int{0, 1, 2},
				PWMChips:       []string{},
				Cameras:        []string{},
				Thermal:        true, Throttle: true, ThrottleSource: ThrottleRpiVolt, IsRaspberryPi: true,
			},
			execCalls: []string{"vcgencmd get_throttled"},
		},
		{
			board: "raspi3b", arch: "aarch64", total: 1 * gib, free: 1 * gib,
			basic: Basic{
				Hostname: "raspberrypi", Model: "Raspberry Pi 3 Model B", CPUArch: "aarch64", CPUCores: 4,
				MemoryTotalBytes: 936104 * kB, KernelVersion: "6.1.0-50-arm64", UptimeSeconds: 7,
			},
			health: Health{
				Time: t0, Load1: 0.16, Load5: 0.03, Load15: 0.01,
				MemoryTotalBytes: 936104 * kB, MemoryUsedBytes: (936104 - 870916) * kB, MemoryAvailableBytes: 870916 * kB,
				DiskTotalBytes: 1 * gib, TemperatureCelsius: f64(25.178), TemperatureSource: "thermal_zone0",
				UptimeSeconds: 7,
			},
			hw: Hardware{
				GPIOChips:      []string{"gpiochip0", "gpiochip1"},
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2835", "gpiochip1": "raspberrypi-exp-gpio"},
				I2CBuses:       []int{0, 1, 2},
				PWMChips:       []string{},
				Cameras:        []string{},
				Thermal:        true, Throttle: false, ThrottleSource: ThrottleNone, IsRaspberryPi: true,
			},
			execCalls: []string{"vcgencmd get_throttled"},
		},
		{
			board: "raspi4b-qemu", arch: "aarch64", total: 1 * gib, free: 1 * gib,
			basic: Basic{
				Hostname: "raspberrypi", Model: "Raspberry Pi 4 Model B", CPUArch: "aarch64", CPUCores: 4,
				MemoryTotalBytes: 936008 * kB, KernelVersion: "6.1.0-50-arm64", UptimeSeconds: 7,
			},
			health: Health{
				Time: t0, Load1: 0.16, Load5: 0.03, Load15: 0.01,
				MemoryTotalBytes: 936008 * kB, MemoryUsedBytes: (936008 - 871828) * kB, MemoryAvailableBytes: 871828 * kB,
				DiskTotalBytes: 1 * gib, UptimeSeconds: 7,
			},
			hw: Hardware{
				GPIOChips:      []string{"gpiochip0", "gpiochip1"},
				GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2711", "gpiochip1": "raspberrypi-exp-gpio"},
				I2CBuses:       []int{0, 1},
				PWMChips:       []string{},
				Cameras:        []string{},
				Thermal:        false, Throttle: false, ThrottleSource: ThrottleNone, IsRaspberryPi: true,
			},
			execCalls: []string{"vcgencmd measure_temp"},
		},
		{
			board: "nosensors", arch: "x86_64", total: 80 * gib, free: 50 * gib,
			basic: Basic{
				Hostname: "ci-runner-07", Model: "Standard PC (Q35 + ICH9, 2009)", CPUArch: "x86_64", CPUCores: 2,
				MemoryTotalBytes: 4013504 * kB, OSName: "Ubuntu", OSVersion: "24.04.1 LTS (Noble Numbat)",
				KernelVersion: "6.8.0-45-generic", UptimeSeconds: 80515,
			},
			health: Health{
				Time: t0, Load1: 0.91, Load5: 0.77, Load15: 0.64,
				MemoryTotalBytes: 4013504 * kB, MemoryUsedBytes: 1252592 * kB, MemoryAvailableBytes: 2760912 * kB,
				DiskTotalBytes: 80 * gib, DiskUsedBytes: 30 * gib,
				TemperatureCelsius: f64(38.85), TemperatureSource: "hwmon:nvme/temp1",
				UptimeSeconds: 80515,
			},
			hw: Hardware{
				GPIOChips:      []string{},
				GPIOChipLabels: map[string]string{},
				I2CBuses:       []int{0}, // from sys/bus/i2c: i2c-dev is not loaded
				PWMChips:       []string{},
				Cameras:        []string{},
				Thermal:        true, Throttle: false, ThrottleSource: ThrottleNone, IsRaspberryPi: false,
			},
			// vcgencmd is looked for once: not found for the temperature,
			// it is not tried again for the throttle state.
			execCalls: []string{"vcgencmd measure_temp"},
		},
	}
}

func TestLinuxFixtures(t *testing.T) {
	for _, tc := range fixtureCases() {
		t.Run(tc.board, func(t *testing.T) {
			ctx := t.Context()
			clk := &fakeClock{t: t0}
			ex := &fakeExec{}
			// os.DirFS, not a MapFS: the real read path, as in production.
			l := newFixture(os.DirFS(path.Join("testdata", tc.board)), tc.arch, tc.total, tc.free, clk, ex)

			b, err := l.Basic(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b != tc.basic {
				t.Errorf("Basic:\n got %+v\nwant %+v", b, tc.basic)
			}

			h, err := l.Health(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// no previous reading: two /proc/stat readings 100 ms apart
			if s := clk.Slept(); len(s) != 1 || s[0] != cpuSampleMin {
				t.Errorf("slept %v, want one %v", s, cpuSampleMin)
			}
			tc.health.Time = t0.Add(cpuSampleMin)
			assertHealth(t, h, tc.health)
			if got := ex.Calls(); !reflect.DeepEqual(got, tc.execCalls) {
				t.Errorf("vcgencmd calls %q, want %q", got, tc.execCalls)
			}
			// A second snapshot reads the same sources and finds the
			// same values, and runs vcgencmd only where it exists.
			calls := len(ex.Calls())
			h2, err := l.Health(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if h2.TemperatureSource != h.TemperatureSource || (h2.Throttle == nil) != (h.Throttle == nil) ||
				h2.MemoryTotalBytes != h.MemoryTotalBytes || h2.UptimeSeconds < h.UptimeSeconds {
				t.Errorf("second snapshot %+v differs from the first %+v", h2, h)
			}
			if len(tc.execCalls) == 1 && len(ex.Calls()) != calls {
				t.Errorf("vcgencmd looked for again after it was not found: %q", ex.Calls()[calls:])
			}

			hw, err := l.Hardware(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(hw, tc.hw) {
				t.Errorf("Hardware:\n got %+v\nwant %+v", hw, tc.hw)
			}
			if hw.IsRaspberryPi != strings.HasPrefix(b.Model, "Raspberry Pi") {
				t.Errorf("IsRaspberryPi %v disagrees with model %q", hw.IsRaspberryPi, b.Model)
			}
		})
	}
}

// assertHealth compares field by field, dereferencing the pointers, so a
// failure says which value is wrong.
func assertHealth(t *testing.T, got, want Health) {
	t.Helper()
	deref := func(p *float64) any {
		if p == nil {
			return nil
		}
		return *p
	}
	if !got.Time.Equal(want.Time) {
		t.Errorf("Time = %v, want %v", got.Time, want.Time)
	}
	if deref(got.CPUFreqMHz) != deref(want.CPUFreqMHz) {
		t.Errorf("CPUFreqMHz = %v, want %v", deref(got.CPUFreqMHz), deref(want.CPUFreqMHz))
	}
	if deref(got.TemperatureCelsius) != deref(want.TemperatureCelsius) || got.TemperatureSource != want.TemperatureSource {
		t.Errorf("temperature = %v from %q, want %v from %q",
			deref(got.TemperatureCelsius), got.TemperatureSource, deref(want.TemperatureCelsius), want.TemperatureSource)
	}
	if !reflect.DeepEqual(got.Throttle, want.Throttle) {
		t.Errorf("Throttle = %+v, want %+v", got.Throttle, want.Throttle)
	}
	g, w := got, want
	g.Time, g.CPUFreqMHz, g.TemperatureCelsius, g.Throttle = time.Time{}, nil, nil, nil
	w.Time, w.CPUFreqMHz, w.TemperatureCelsius, w.Throttle = time.Time{}, nil, nil, nil
	if g != w {
		t.Errorf("Health:\n got %+v\nwant %+v", g, w)
	}
}

// healthOf builds a fixture Linux over m and returns one Health.
func healthOf(t *testing.T, m fstest.MapFS, ex *fakeExec) Health {
	t.Helper()
	l := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, ex)
	h, err := l.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTemperatureChain(t *testing.T) {
	vcgencmd := map[string]string{"vcgencmd measure_temp": "temp=47.2'C\n"}
	for _, tc := range []struct {
		name    string
		edit    func(fstest.MapFS)
		out     map[string]string
		want    *float64
		wantSrc string
	}{
		{"thermal_zone0 wins over vcgencmd", func(fstest.MapFS) {}, vcgencmd, f64(47.236), "thermal_zone0"},
		{"vcgencmd when no thermal zone", noThermalZone, vcgencmd, f64(47.2), "vcgencmd"},
		{"unreadable thermal zone falls through", func(m fstest.MapFS) {
			m["sys/class/thermal/thermal_zone0/temp"] = &fstest.MapFile{Data: []byte("N/A\n")}
		}, vcgencmd, f64(47.2), "vcgencmd"},
		{"hwmon when vcgencmd is missing", noThermalZone, nil, f64(47.236), "hwmon:cpu_thermal/temp1"},
		{"hwmon when vcgencmd fails", noThermalZone, map[string]string{"vcgencmd measure_temp": "exit 1"}, f64(47.236), "hwmon:cpu_thermal/temp1"},
		{"hwmon when vcgencmd prints garbage", noThermalZone, map[string]string{"vcgencmd measure_temp": "VCHI initialization failed\n"}, f64(47.236), "hwmon:cpu_thermal/temp1"},
		{"hwmon without a name file is named by its directory", func(m fstest.MapFS) {
			noThermalZone(m)
			delete(m, "sys/class/hwmon/hwmon0/name")
		}, nil, f64(47.236), "hwmon:hwmon0/temp1"},
		{"hwmon skips chips without temperatures, in natural order", func(m fstest.MapFS) {
			noThermalZone(m)
			removeTree(m, "sys/class/hwmon")
			m["sys/class/hwmon/hwmon2/name"] = &fstest.MapFile{Data: []byte("rpi_volt\n")}
			m["sys/class/hwmon/hwmon2/in0_lcrit_alarm"] = &fstest.MapFile{Data: []byte("0\n")}
			m["sys/class/hwmon/hwmon10/name"] = &fstest.MapFile{Data: []byte("late\n")}
			m["sys/class/hwmon/hwmon10/temp1_input"] = &fstest.MapFile{Data: []byte("1000\n")}
			m["sys/class/hwmon/hwmon3/name"] = &fstest.MapFile{Data: []byte("nvme\n")}
			m["sys/class/hwmon/hwmon3/temp10_input"] = &fstest.MapFile{Data: []byte("99000\n")}
			m["sys/class/hwmon/hwmon3/temp2_input"] = &fstest.MapFile{Data: []byte("bad\n")}
			m["sys/class/hwmon/hwmon3/temp3_input"] = &fstest.MapFile{Data: []byte("40500\n")}
		}, nil, f64(40.5), "hwmon:nvme/temp3"},
		{"nothing at all is nil, not an error", func(m fstest.MapFS) {
			noThermalZone(m)
			removeTree(m, "sys/class/hwmon")
		}, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mapFixture(t, "pi4")
			tc.edit(m)
			h := healthOf(t, m, &fakeExec{out: tc.out})
			if (h.TemperatureCelsius == nil) != (tc.want == nil) ||
				(tc.want != nil && *h.TemperatureCelsius != *tc.want) || h.TemperatureSource != tc.wantSrc {
				t.Errorf("got %v from %q, want %v from %q", h.TemperatureCelsius, h.TemperatureSource, tc.want, tc.wantSrc)
			}
		})
	}
}

func noThermalZone(m fstest.MapFS) { removeTree(m, "sys/class/thermal") }

func noSysfsThrottle(m fstest.MapFS) { removeTree(m, "sys/devices/platform/soc") }

// noThrottleSource leaves neither the firmware node nor the rpi_volt alarm.
func noThrottleSource(m fstest.MapFS) {
	noSysfsThrottle(m)
	removeTree(m, "sys/class/hwmon/hwmon1")
}

func TestThrottleChain(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(fstest.MapFS)
		out  map[string]string
		want *Throttle
	}{
		{"sysfs wins over vcgencmd", func(fstest.MapFS) {}, map[string]string{"vcgencmd get_throttled": "throttled=0x50005\n"},
			&Throttle{Source: ThrottleFirmware}},
		{"vcgencmd when sysfs is absent", noSysfsThrottle, map[string]string{"vcgencmd get_throttled": "throttled=0x50005\n"},
			&Throttle{Raw: 0x50005, UnderVoltage: true, Throttled: true, UnderVoltageOccurred: true, ThrottledOccurred: true, Source: "vcgencmd"}},
		{"vcgencmd when sysfs is garbage", func(m fstest.MapFS) {
			m["sys/devices/platform/soc/soc:firmware/get_throttled"] = &fstest.MapFile{Data: []byte("oops\n")}
		}, map[string]string{"vcgencmd get_throttled": "throttled=0x0\n"}, &Throttle{Source: "vcgencmd"}},
		{"Pi 5 node under soc@107c000000", func(m fstest.MapFS) {
			noSysfsThrottle(m)
			m["sys/devices/platform/soc@107c000000/soc@107c000000:firmware/get_throttled"] = &fstest.MapFile{Data: []byte("80008\n")}
		}, nil, &Throttle{Raw: 0x80008, SoftTempLimit: true, SoftTempLimitOccurred: true, Source: ThrottleFirmware}},
		{"missing vcgencmd is absent, not an error", noThrottleSource, nil, nil},
		{"failing vcgencmd is absent", noThrottleSource, map[string]string{"vcgencmd get_throttled": "exit 1"}, nil},
		{"garbage from vcgencmd is absent", noThrottleSource, map[string]string{"vcgencmd get_throttled": "VCHI initialization failed\n"}, nil},
		{"vcgencmd wins over rpi_volt", noSysfsThrottle, map[string]string{"vcgencmd get_throttled": "throttled=0x0\n"}, &Throttle{Source: ThrottleVcgencmd}},
		{"rpi_volt alarm when nothing else: under-voltage only", noSysfsThrottle, nil,
			&Throttle{Source: ThrottleRpiVolt, UnderVoltageOnly: true}},
		{"rpi_volt alarm raised is under-voltage now", func(m fstest.MapFS) {
			noSysfsThrottle(m)
			m["sys/class/hwmon/hwmon1/in0_lcrit_alarm"] = &fstest.MapFile{Data: []byte("1\n")}
		}, nil, &Throttle{Raw: 1, UnderVoltage: true, Source: ThrottleRpiVolt, UnderVoltageOnly: true}},
		{"garbage from rpi_volt is absent", func(m fstest.MapFS) {
			noSysfsThrottle(m)
			m["sys/class/hwmon/hwmon1/in0_lcrit_alarm"] = &fstest.MapFile{Data: []byte("N/A\n")}
		}, nil, nil},
		{"another hwmon's alarm is not rpi_volt", func(m fstest.MapFS) {
			noThrottleSource(m)
			m["sys/class/hwmon/hwmon1/name"] = &fstest.MapFile{Data: []byte("ina219\n")}
			m["sys/class/hwmon/hwmon1/in0_lcrit_alarm"] = &fstest.MapFile{Data: []byte("1\n")}
		}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mapFixture(t, "pi4")
			tc.edit(m)
			ex := &fakeExec{out: tc.out}
			h := healthOf(t, m, ex)
			if !reflect.DeepEqual(h.Throttle, tc.want) {
				t.Errorf("Throttle = %+v, want %+v", h.Throttle, tc.want)
			}
			hw, err := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, ex).Hardware(t.Context())
			wantSrc := ThrottleNone
			if tc.want != nil {
				wantSrc = tc.want.Source
			}
			if err != nil || hw.Throttle != (tc.want != nil) || hw.ThrottleSource != wantSrc {
				t.Errorf("Hardware.Throttle = %v from %q, %v; want %v from %q", hw.Throttle, hw.ThrottleSource, err, tc.want != nil, wantSrc)
			}
		})
	}
}

func TestBasicFallbacks(t *testing.T) {
	basic := func(t *testing.T, board string, edit func(fstest.MapFS), uname func() (string, error)) Basic {
		t.Helper()
		m := mapFixture(t, board)
		edit(m)
		l := NewLinux(LinuxOptions{Root: m, Uname: uname, Exec: (&fakeExec{}).Exec, Statfs: func(string) (uint64, uint64, error) { return 0, 0, nil }})
		b, err := l.Basic(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	arm := func() (string, error) { return "aarch64", nil }
	setCPUInfo := func(m fstest.MapFS, drop ...string) {
		var keep []string
		for line := range strings.Lines(string(m["proc/cpuinfo"].Data)) {
			k, _, _ := strings.Cut(line, ":")
			if !slices.Contains(drop, strings.TrimSpace(k)) {
				keep = append(keep, line)
			}
		}
		m["proc/cpuinfo"] = &fstest.MapFile{Data: []byte(strings.Join(keep, ""))}
	}

	t.Run("model from cpuinfo when no device tree", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) { removeTree(m, "proc/device-tree") }, arm)
		if b.Model != "Raspberry Pi 4 Model B Rev 1.4" {
			t.Errorf("Model = %q", b.Model)
		}
	})
	t.Run("device tree model is cut at the NUL and trimmed", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) {
			m["proc/device-tree/model"] = &fstest.MapFile{Data: []byte("Raspberry Pi Compute Module 4 Rev 1.1\x00junk")}
		}, arm)
		if b.Model != "Raspberry Pi Compute Module 4 Rev 1.1" {
			t.Errorf("Model = %q", b.Model)
		}
	})
	t.Run("model unknown with no source", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) {
			removeTree(m, "proc/device-tree")
			setCPUInfo(m, "Model")
		}, arm)
		if b.Model != "unknown" {
			t.Errorf("Model = %q", b.Model)
		}
	})
	t.Run("serial from device tree when cpuinfo has none", func(t *testing.T) {
		b := basic(t, "pi5", func(m fstest.MapFS) { setCPUInfo(m, "Serial") }, arm)
		if b.Serial != "4f3a9c21b7e8d605" || b.Revision != "d04170" {
			t.Errorf("Serial %q Revision %q", b.Serial, b.Revision)
		}
	})
	// Debian's 32-bit kernels print zeros for the board (recorded on QEMU's
	// raspi0): zeros are unknown, and the device tree the firmware fills in
	// answers when it has the values.
	t.Run("all-zero serial and revision are unknown", func(t *testing.T) {
		b := basic(t, "raspi0", func(fstest.MapFS) {}, arm)
		if b.Serial != "" || b.Revision != "" {
			t.Errorf("Serial %q Revision %q, want both unknown", b.Serial, b.Revision)
		}
	})
	t.Run("zeros give way to the device tree's serial and revision", func(t *testing.T) {
		b := basic(t, "raspi0", func(m fstest.MapFS) {
			m["proc/device-tree/serial-number"] = &fstest.MapFile{Data: []byte("00000000c0ffee42\x00")}
			m["proc/device-tree/system/linux,revision"] = &fstest.MapFile{Data: []byte{0x00, 0x90, 0x00, 0x93}}
		}, arm)
		if b.Serial != "00000000c0ffee42" || b.Revision != "900093" {
			t.Errorf("Serial %q Revision %q", b.Serial, b.Revision)
		}
	})
	t.Run("arm64 cpuinfo has no revision: the device tree's, else unknown", func(t *testing.T) {
		b := basic(t, "raspi3b", func(m fstest.MapFS) {
			m["sys/firmware/devicetree/base/system/linux,revision"] = &fstest.MapFile{Data: []byte{0x00, 0xa0, 0x20, 0x82}}
		}, arm)
		if b.Revision != "a02082" || b.Serial != "" {
			t.Errorf("Serial %q Revision %q", b.Serial, b.Revision)
		}
		for name, val := range map[string][]byte{"zero": {0, 0, 0, 0}, "short": {0xa0, 0x20, 0x82}} {
			b := basic(t, "raspi3b", func(m fstest.MapFS) {
				m["proc/device-tree/system/linux,revision"] = &fstest.MapFile{Data: val}
				m["proc/device-tree/serial-number"] = &fstest.MapFile{Data: []byte("0000000000000000\x00")}
			}, arm)
			if b.Revision != "" || b.Serial != "" {
				t.Errorf("%s: Serial %q Revision %q, want unknown", name, b.Serial, b.Revision)
			}
		}
	})
	t.Run("cores from cpu/online without cpuinfo", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) { delete(m, "proc/cpuinfo") }, arm)
		if b.CPUCores != 4 || b.Model != "Raspberry Pi 4 Model B Rev 1.4" || b.Serial != "10000000a3b4c5d6" {
			t.Errorf("got %+v", b)
		}
	})
	t.Run("one core when nothing says", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) {
			delete(m, "proc/cpuinfo")
			m["sys/devices/system/cpu/online"] = &fstest.MapFile{Data: []byte("garbage\n")}
		}, arm)
		if b.CPUCores != 1 {
			t.Errorf("CPUCores = %d", b.CPUCores)
		}
	})
	t.Run("uname failure is unknown arch", func(t *testing.T) {
		b := basic(t, "pi4", func(fstest.MapFS) {}, func() (string, error) { return "", errors.New("no uname") })
		if b.CPUArch != "unknown" {
			t.Errorf("CPUArch = %q", b.CPUArch)
		}
	})
	t.Run("hostname from etc/hostname, os from usr/lib, a bad os-release line", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) {
			delete(m, "proc/sys/kernel/hostname")
			m["etc/hostname"] = &fstest.MapFile{Data: []byte("frometc\n")}
			delete(m, "etc/os-release")
			m["usr/lib/os-release"] = &fstest.MapFile{Data: []byte("PRETTY_NAME=\"Pretty OS\"\nbroken line\nVERSION_ID=3\n")}
		}, arm)
		if b.Hostname != "frometc" || b.OSName != "Pretty OS" || b.OSVersion != "3" {
			t.Errorf("got %+v", b)
		}
	})
	t.Run("no os-release, no hostname, no kernel version", func(t *testing.T) {
		b := basic(t, "pi4", func(m fstest.MapFS) {
			delete(m, "etc/os-release")
			removeTree(m, "proc/sys")
		}, arm)
		if b.OSName != "" || b.OSVersion != "" || b.Hostname != "" || b.KernelVersion != "" {
			t.Errorf("got %+v", b)
		}
	})
}

func TestRequiredFiles(t *testing.T) {
	for _, file := range []string{"proc/meminfo", "proc/uptime"} {
		m := mapFixture(t, "pi4")
		delete(m, file)
		_, err := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Basic(t.Context())
		wantErr(t, err, file)
	}
	for _, file := range []string{"proc/stat", "proc/meminfo", "proc/loadavg", "proc/uptime"} {
		m := mapFixture(t, "pi4")
		delete(m, file)
		_, err := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Health(t.Context())
		wantErr(t, err, file)
	}
	m := mapFixture(t, "pi4")
	m["proc/meminfo"] = &fstest.MapFile{Data: []byte("MemFree: 1 kB\n")}
	_, err := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Health(t.Context())
	wantErr(t, err, "/proc/meminfo", "MemTotal")

	l := NewLinux(LinuxOptions{
		Root: mapFixture(t, "pi4"), Exec: (&fakeExec{}).Exec, Now: (&fakeClock{t: t0}).Now, Sleep: (&fakeClock{}).Sleep,
		Statfs: func(string) (uint64, uint64, error) { return 0, 0, errors.New("EACCES") },
	})
	_, err = l.Health(t.Context())
	wantErr(t, err, "statfs", `"/"`, "EACCES")
}

func TestHardwareFallbacks(t *testing.T) {
	t.Run("gpio chips from legacy sysfs when sys/bus/gpio is missing", func(t *testing.T) {
		m := mapFixture(t, "pi4")
		removeTree(m, "sys/bus/gpio")
		hw, err := newFixture(m, "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Hardware(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(hw.GPIOChips, []string{"gpiochip0", "gpiochip1"}) || len(hw.GPIOChipLabels) != 2 {
			t.Errorf("got %v %v", hw.GPIOChips, hw.GPIOChipLabels)
		}
	})
	t.Run("i2c from sys/bus/i2c when i2c-dev is not loaded", func(t *testing.T) {
		m := mapFixture(t, "zero2w")
		removeTree(m, "sys/class/i2c-dev")
		m["sys/bus/i2c/devices/i2c-1/name"] = &fstest.MapFile{Data: []byte("bcm2835 (i2c@7e804000)\n")}
		m["sys/bus/i2c/devices/1-0050/name"] = &fstest.MapFile{Data: []byte("24c32\n")}
		hw, err := newFixture(m, "armv7l", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Hardware(t.Context())
		if err != nil || !reflect.DeepEqual(hw.I2CBuses, []int{1}) {
			t.Errorf("got %v, %v", hw.I2CBuses, err)
		}
	})
	t.Run("empty tree is empty lists, never nil", func(t *testing.T) {
		m := fstest.MapFS{"proc/meminfo": {Data: []byte("MemTotal: 1 kB\n")}}
		hw, err := newFixture(m, "x86_64", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Hardware(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if hw.GPIOChips == nil || hw.GPIOChipLabels == nil || hw.I2CBuses == nil || hw.PWMChips == nil || hw.Cameras == nil {
			t.Errorf("nil list in %+v", hw)
		}
		if hw.Thermal || hw.Throttle || hw.IsRaspberryPi {
			t.Errorf("got %+v", hw)
		}
	})
	t.Run("legacy bcm2835-v4l2 camera", func(t *testing.T) {
		m := mapFixture(t, "zero2w")
		m["sys/class/video4linux/video0/name"] = &fstest.MapFile{Data: []byte("mmal service 16.1\n")}
		hw, err := newFixture(m, "armv7l", 1, 0, &fakeClock{t: t0}, &fakeExec{}).Hardware(t.Context())
		if err != nil || !reflect.DeepEqual(hw.Cameras, []string{"mmal service 16.1"}) {
			t.Errorf("got %v, %v", hw.Cameras, err)
		}
	})
}

// statFile renders c as a /proc/stat with two CPUs.
func statFile(c CPUTimes) []byte {
	line := func(name string, c CPUTimes) string {
		return fmt.Sprintf("%s %d %d %d %d %d %d %d %d %d %d\n", name,
			c.User, c.Nice, c.System, c.Idle, c.IOWait, c.IRQ, c.SoftIRQ, c.Steal, c.Guest, c.GuestNice)
	}
	half := CPUTimes{c.User / 2, c.Nice / 2, c.System / 2, c.Idle / 2, c.IOWait / 2, c.IRQ / 2, c.SoftIRQ / 2, c.Steal / 2, c.Guest / 2, c.GuestNice / 2}
	rest := CPUTimes{c.User - half.User, c.Nice - half.Nice, c.System - half.System, c.Idle - half.Idle, c.IOWait - half.IOWait,
		c.IRQ - half.IRQ, c.SoftIRQ - half.SoftIRQ, c.Steal - half.Steal, c.Guest - half.Guest, c.GuestNice - half.GuestNice}
	return []byte(line("cpu ", c) + line("cpu0", half) + line("cpu1", rest) + "ctxt 1\nbtime 1717400112\n")
}

func TestCPUUsageSampling(t *testing.T) {
	m := mapFixture(t, "pi4")
	setStat := func(c CPUTimes) { m["proc/stat"] = &fstest.MapFile{Data: statFile(c)} }
	clk := &fakeClock{t: t0}
	l := newFixture(m, "aarch64", 1, 0, clk, &fakeExec{})
	ctx := t.Context()

	// step: the busy and idle ticks that elapse between two readings
	at := CPUTimes{User: 100000, System: 50000, Idle: 800000, IOWait: 1000}
	step := func(busy, idle uint64) CPUTimes {
		at.User += busy
		at.Idle += idle
		return at
	}
	usage := func(wantSlept []time.Duration, want float64) {
		t.Helper()
		clk.mu.Lock()
		clk.slept = nil
		clk.mu.Unlock()
		h, err := l.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.CPUUsagePercent != want {
			t.Errorf("CPUUsagePercent = %v, want %v", h.CPUUsagePercent, want)
		}
		if got := clk.Slept(); !reflect.DeepEqual(got, wantSlept) {
			t.Errorf("slept %v, want %v", got, wantSlept)
		}
	}
	onSleep := func(next func()) {
		clk.mu.Lock()
		clk.onSleep = next
		clk.mu.Unlock()
	}
	window := []time.Duration{cpuSampleMin}

	// First call: no previous reading, so two readings 100 ms apart.
	setStat(at)
	onSleep(func() { setStat(step(15, 5)) }) // 20 ticks, 75 % busy
	usage(window, 75)

	// 5 s later the held reading is used: no wait.
	onSleep(nil)
	clk.Advance(5 * time.Second)
	setStat(step(100, 300))
	usage(nil, 25)

	// 30 ms later the held reading is too fresh: wait out the window.
	clk.Advance(30 * time.Millisecond)
	onSleep(func() { setStat(step(1, 1)) })
	usage([]time.Duration{cpuSampleMin - 30*time.Millisecond}, 50)

	// Exactly 60 s later it is still usable.
	onSleep(nil)
	clk.Advance(cpuSampleMax)
	setStat(step(60, 540))
	usage(nil, 10)

	// 61 s later it is stale: sample afresh.
	clk.Advance(cpuSampleMax + time.Second)
	setStat(step(5000, 5000)) // long-ago activity, not "now"
	onSleep(func() { setStat(step(0, 20)) })
	usage(window, 0)

	// Counters going backwards (a fixture swap, another boot): the held
	// reading is dropped and the new one is the start of a fresh window.
	clk.Advance(2 * time.Second)
	at = CPUTimes{User: 10, Idle: 90}
	setStat(at)
	onSleep(func() { setStat(step(9, 1)) })
	usage(window, 90)

	// A clock that stepped back also means a fresh sample.
	clk.Advance(-time.Hour)
	onSleep(func() { setStat(step(2, 8)) })
	usage(window, 20)

	// A cancelled context stops the wait.
	clk.Advance(time.Hour)
	cctx, cancel := context.WithCancel(ctx)
	onSleep(nil)
	l2 := newFixture(m, "aarch64", 1, 0, clk, &fakeExec{})
	l2.sleep = func(context.Context, time.Duration) error { cancel(); return cctx.Err() }
	_, err := l2.Health(cctx)
	wantErr(t, err, "/proc/stat")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestCPUUsageRealSleepHonoursDeadline: Health with the real sleep ends
// with its context's deadline, and the real sleep returns at the deadline
// however long it was asked to wait (an hour: only the two-minute hang
// guard, never a duration, decides the verdict).
func TestCPUUsageRealSleepHonoursDeadline(t *testing.T) {
	l := NewLinux(LinuxOptions{Root: mapFixture(t, "pi4"), Exec: (&fakeExec{}).Exec,
		Statfs: func(string) (uint64, uint64, error) { return 1, 0, nil }})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	if _, err := l.Health(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	sctx, scancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer scancel()
	done := make(chan error, 1)
	go func() { done <- sleepCtx(sctx, time.Hour) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("sleepCtx = %v, want deadline exceeded", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("sleepCtx slept past its 5 ms deadline")
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, src := range []Source{
		newFixture(mapFixture(t, "pi4"), "aarch64", 1, 0, &fakeClock{t: t0}, &fakeExec{}),
		NewSim(SimOptions{}),
	} {
		if _, err := src.Basic(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%T Basic: %v", src, err)
		}
		if _, err := src.Health(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%T Health: %v", src, err)
		}
		if _, err := src.Hardware(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%T Hardware: %v", src, err)
		}
	}
}

// TestLinuxConcurrent is for -race: the held /proc/stat reading is shared.
func TestLinuxConcurrent(t *testing.T) {
	clk := &fakeClock{t: t0, step: 10 * time.Millisecond}
	l := newFixture(os.DirFS("testdata/pi5"), "aarch64", 1, 0, clk, &fakeExec{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if _, err := l.Health(t.Context()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.hasPrev {
		t.Error("no reading held after concurrent calls")
	}
}

func TestExecCommand(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses sh")
	}
	ctx := t.Context()
	_, err := execCommand(ctx, "raspi-mcp-no-such-binary", "measure_temp")
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing binary: err = %v, want exec.ErrNotFound", err)
	}
	wantErr(t, err, "raspi-mcp-no-such-binary")

	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	out, err := execCommand(ctx, "sh", "-c", `echo "temp=40.5'C"`)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ParseVcgencmdTemp(string(out)); err != nil || c != 40.5 {
		t.Errorf("got %v, %v from %q", c, err, out)
	}
	_, err = execCommand(ctx, "sh", "-c", "echo VCHI initialization failed >&2; exit 255")
	wantErr(t, err, "sh -c", "VCHI initialization failed")
}

// TestLinuxDefaultExecWithoutVcgencmd runs the real exec against a fixture
// on a machine without vcgencmd: the fallbacks must end in "absent".
func TestLinuxDefaultExecWithoutVcgencmd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("live exec is Linux-only")
	}
	if _, err := exec.LookPath("vcgencmd"); err == nil {
		t.Skip("vcgencmd is installed here")
	}
	if _, err := os.Stat("/usr/bin/vcgencmd"); err == nil {
		t.Skip("vcgencmd is installed here")
	}
	clk := &fakeClock{t: t0}
	l := NewLinux(LinuxOptions{Root: os.DirFS("testdata/nosensors"), Now: clk.Now, Sleep: clk.Sleep,
		Statfs: func(string) (uint64, uint64, error) { return 1, 0, nil }})
	h, err := l.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.Throttle != nil || h.TemperatureSource != "hwmon:nvme/temp1" {
		t.Errorf("Throttle %+v, temperature from %q", h.Throttle, h.TemperatureSource)
	}
}

// TestLinuxLive reads the machine the test runs on: a Pi, a laptop or an
// x86 CI box without any Pi files. Only sanity is checked.
func TestLinuxLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("not Linux")
	}
	if _, err := os.ReadFile("/proc/stat"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	ctx := t.Context()
	l := NewLinux(LinuxOptions{})

	b, err := l.Basic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.CPUCores < 1 || b.MemoryTotalBytes == 0 || b.CPUArch == "" || b.CPUArch == "unknown" || b.Model == "" || b.KernelVersion == "" {
		t.Errorf("Basic: %+v", b)
	}
	t.Logf("Basic: %+v", b)

	for i := range 2 { // the second call uses (or waits out) the held reading
		h, err := l.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.CPUUsagePercent < 0 || h.CPUUsagePercent > 100 {
			t.Errorf("CPUUsagePercent = %v", h.CPUUsagePercent)
		}
		if h.MemoryTotalBytes == 0 || h.MemoryUsedBytes > h.MemoryTotalBytes || h.MemoryAvailableBytes > h.MemoryTotalBytes {
			t.Errorf("memory: %+v", h)
		}
		if h.DiskTotalBytes == 0 || h.DiskUsedBytes > h.DiskTotalBytes {
			t.Errorf("disk: total %d used %d", h.DiskTotalBytes, h.DiskUsedBytes)
		}
		if c := h.TemperatureCelsius; c != nil && (*c < -40 || *c > 150 || h.TemperatureSource == "") {
			t.Errorf("temperature %v from %q", *c, h.TemperatureSource)
		}
		if h.Time.IsZero() || h.Load1 < 0 {
			t.Errorf("Health: %+v", h)
		}
		t.Logf("Health %d: cpu %.1f%% temp %v from %q throttle %+v", i, h.CPUUsagePercent, h.TemperatureCelsius, h.TemperatureSource, h.Throttle)
	}

	hw, err := l.Hardware(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hw.IsRaspberryPi != strings.HasPrefix(b.Model, "Raspberry Pi") {
		t.Errorf("IsRaspberryPi %v for model %q", hw.IsRaspberryPi, b.Model)
	}
	if hw.GPIOChips == nil || hw.I2CBuses == nil || hw.PWMChips == nil || hw.Cameras == nil {
		t.Errorf("nil list in %+v", hw)
	}
	t.Logf("Hardware: %+v", hw)
}

func BenchmarkLinuxHealth(b *testing.B) {
	// The clock advances 1 s per reading, so every call finds a usable
	// held reading and never waits: this measures reading and parsing.
	clk := &fakeClock{t: t0, step: time.Second}
	l := newFixture(os.DirFS("testdata/pi4"), "aarch64", 1<<35, 1<<34, clk, &fakeExec{})
	ctx := b.Context()
	if _, err := l.Health(ctx); err != nil { // warm the held reading; this one sleeps (fake)
		b.Fatal(err)
	}
	clk.onSleep = func() { b.Fatal("benchmark slept: the held reading was not used") }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLinuxHealthLive(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("not Linux")
	}
	// Real /, statfs and exec; only the clock is fake, for the same reason
	// as above: otherwise each iteration would wait out the 100 ms window.
	clk := &fakeClock{t: time.Now(), step: time.Second}
	l := NewLinux(LinuxOptions{Now: clk.Now})
	ctx := b.Context()
	if _, err := l.Health(ctx); err != nil {
		b.Fatal(err)
	}
	l.sleep = func(context.Context, time.Duration) error {
		b.Fatal("benchmark slept: the held reading was not used")
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseStat(b *testing.B) {
	data := readFixture(b, "pi4", "proc/stat")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStat(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseMeminfo(b *testing.B) {
	data := readFixture(b, "pi4", "proc/meminfo")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMeminfo(data); err != nil {
			b.Fatal(err)
		}
	}
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// boardFixture is sysinfo.Linux over one of hw/sysinfo's recorded trees
// (the /proc, /sys and device-tree files of a board), with no vcgencmd and
// nothing of this machine read.
func boardFixture(t *testing.T, board string) *sysinfo.Linux {
	t.Helper()
	return sysinfo.NewLinux(sysinfo.LinuxOptions{
		Root:   os.DirFS(path.Join("..", "hw", "sysinfo", "testdata", board)),
		Statfs: func(string) (uint64, uint64, error) { return 1 << 30, 1 << 29, nil },
		Exec: func(context.Context, string, ...string) ([]byte, error) {
			return nil, errors.Join(errors.New("fixture: no vcgencmd"), exec.ErrNotFound)
		},
		Uname: func() (string, error) { return "armv6l", nil },
		Now:   func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) },
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
}

// On the emulated boards (Debian kernels: no get_throttled node, no
// vcgencmd) the snapshot, its line and the summary say where throttling
// comes from, and "unknown" when nothing tells, never "not throttled".
func TestThrottlingSourceOnTheEmulatedBoards(t *testing.T) {
	for _, tc := range []struct {
		board, src  string
		uv          *bool
		flags       bool
		line, notIn string
		summary     string
	}{
		// the armel kernel's rpi_volt alarm: under-voltage now, nothing else
		{"raspi0", "hwmon rpi_volt", new(bool), false, "no under-voltage now (hwmon rpi_volt; throttling unknown)", "not throttled",
			`{"under_voltage_now":false,"src":"hwmon rpi_volt"}`},
		{"raspi3b", "none", nil, false, "throttling unknown (no source on this kernel)", "not throttled", `{"src":"none"}`},
		{"raspi4b-qemu", "none", nil, false, "throttling unknown", "no throttling flags", `{"src":"none"}`},
		// a Raspberry Pi OS kernel: the firmware node, all flags
		{"pi4", "firmware", new(bool), true, "not throttled", "unknown", `{"now":[],"since_boot":[],"src":"firmware"}`},
	} {
		t.Run(tc.board, func(t *testing.T) {
			h, err := boardFixture(t, tc.board).Health(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			s := snapshotOf(h)
			if s.ThrottlingSource != tc.src || (s.UnderVoltageNow == nil) != (tc.uv == nil) ||
				(tc.uv != nil && *s.UnderVoltageNow != *tc.uv) || (s.ThrottlingFlags != nil) != tc.flags || (s.ThrottlingHistory != nil) != tc.flags {
				js, _ := json.Marshal(s)
				t.Errorf("snapshot %s", js)
			}
			if line := healthLine(s); !strings.Contains(line, tc.line) || strings.Contains(line, tc.notIn) {
				t.Errorf("line %q, want %q and not %q", line, tc.line, tc.notIn)
			}
			if js, _ := json.Marshal(summaryThrottle(h.Throttle)); string(js) != tc.summary {
				t.Errorf("summary throttle %s, want %s", js, tc.summary)
			}
		})
	}
}

// The rpi_volt alarm raised is under-voltage now, in every output.
func TestUnderVoltageFromRpiVolt(t *testing.T) {
	h := sysinfo.Health{Throttle: &sysinfo.Throttle{Raw: 1, UnderVoltage: true, Source: sysinfo.ThrottleRpiVolt, UnderVoltageOnly: true}}
	s := snapshotOf(h)
	if s.UnderVoltageNow == nil || !*s.UnderVoltageNow || s.ThrottlingFlags != nil || s.ThrottlingHistory != nil {
		t.Errorf("snapshot %+v", s)
	}
	if line := healthLine(s); !strings.Contains(line, "UNDER-VOLTAGE now (hwmon rpi_volt)") {
		t.Errorf("line %q", line)
	}
	if js, _ := json.Marshal(summaryThrottle(h.Throttle)); string(js) != `{"under_voltage_now":true,"src":"hwmon rpi_volt"}` {
		t.Errorf("summary %s", js)
	}
	// The stored sample, its series, history records and Prometheus
	// families know under-voltage only: throttling is unknown, not 0.
	for _, uv := range []bool{true, false} {
		h.Throttle.UnderVoltage, h.Throttle.Raw = uv, 0
		if uv {
			h.Throttle.Raw = 1
		}
		smp := sampleOf(h)
		get := func(name string) (float64, bool) {
			g, err := series.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			return g(smp)
		}
		if v, ok := get("under_voltage"); !ok || (v == 1) != uv {
			t.Errorf("uv %v: under_voltage series %v %v", uv, v, ok)
		}
		for _, name := range []string{"throttled", "freq_capped", "soft_temp_limit"} {
			if v, ok := get(name); ok {
				t.Errorf("uv %v: %s series %v, want unknown", uv, name, v)
			}
		}
		if rec := sampleOut(smp); rec.UnderVoltage == nil || *rec.UnderVoltage != uv || rec.Throttled != nil {
			t.Errorf("uv %v: history record %+v", uv, rec)
		}
		if eps := series.Episodes([]store.Sample{smp, smp}, time.Minute); uv != (len(eps) == 1) {
			t.Errorf("uv %v: episodes %+v", uv, eps)
		}
		e := &emitter{s: &scrape.Snapshot{}}
		e.health(h)
		var got []string
		for _, p := range e.s.Points {
			if p.Family == int(famThrottled) {
				got = append(got, fmt.Sprint(p.Labels, p.Value))
			}
		}
		want := fmt.Sprint([]string{fmt.Sprint([]string{"under_voltage", "now"}, map[bool]float64{true: 1}[uv])})
		if fmt.Sprint(got) != want {
			t.Errorf("uv %v: Prometheus throttle points %v, want %v", uv, got, want)
		}
	}
}

// The basics line leaves out what the device does not report: the
// emulated Pi Zero boots a busybox image without os-release.
func TestBasicLineWithoutOSRelease(t *testing.T) {
	st := &systemTools{sys: boardFixture(t, "raspi0")}
	b, err := st.basicInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.Serial != "" || b.Revision != "" {
		t.Errorf("serial %q revision %q: zeros are not an identity", b.Serial, b.Revision)
	}
	want := "raspberrypi: Raspberry Pi Zero, kernel 6.1.0-50-rpi, up 11s"
	if got := basicLine(b); got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	b.OSName, b.OSVersion, b.KernelVersion, b.Hostname = "Debian GNU/Linux", "12 (bookworm)", "", ""
	if got := basicLine(b); got != "Raspberry Pi Zero, Debian GNU/Linux 12 (bookworm), up 11s" {
		t.Errorf("line %q", got)
	}
}

// i2c_list_buses lists every bus the emulated Pi Zero has (0, 1 and 2, as
// system_get_capabilities does), each saying whether the allowlist lets the
// caller use it, not only the helper's allowed bus 1.
func TestListBusesShowsEveryBusAndWhichAreAllowed(t *testing.T) {
	hw, err := boardFixture(t, "raspi0").Hardware(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := mergeBuses(hw.I2CBuses, []proto.I2CBus{{Bus: 1, Name: "bcm2835 (i2c@7e804000)"}})
	want := []busInfo{{Bus: 0}, {Bus: 1, Description: "bcm2835 (i2c@7e804000)", Allowed: true}, {Bus: 2}}
	if !slices.Equal(got, want) {
		t.Errorf("buses %+v, want %+v", got, want)
	}
	// A bus the helper reads but /sys did not list (no i2c-dev yet) is kept.
	if got := mergeBuses(nil, []proto.I2CBus{{Bus: 3, Name: "x"}}); !slices.Equal(got, []busInfo{{Bus: 3, Description: "x", Allowed: true}}) {
		t.Errorf("helper-only bus: %+v", got)
	}
}

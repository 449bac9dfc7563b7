// Package sysinfo tells the agent what board it runs on and how healthy it is.
//
// The agent is unprivileged, so everything comes from /proc and /sys (plus
// vcgencmd as a fallback on Raspberry Pi OS). Parsing is done by pure
// functions over bytes, and [Linux] reads through an [io/fs.FS] rooted at
// "/", so the whole package is testable against fixture trees. [Sim] is a
// cheap, deterministic stand-in for laptops and demos.
package sysinfo

import (
	"context"
	"strings"
	"time"
)

// Source is what the agent needs from the machine.
type Source interface {
	Basic(ctx context.Context) (Basic, error)
	Health(ctx context.Context) (Health, error)
	Hardware(ctx context.Context) (Hardware, error)
}

// Basic is the slow-changing identity of the device.
type Basic struct {
	Hostname         string
	Model            string // "Raspberry Pi 4 Model B Rev 1.4"; from device-tree model, else cpuinfo "Model", else DMI product_name, else "unknown"
	CPUArch          string // uname machine, e.g. "aarch64", "armv7l", "armv6l", "x86_64"
	CPUCores         int    // >= 1
	MemoryTotalBytes uint64
	OSName           string // os-release NAME or PRETTY_NAME, e.g. "Debian GNU/Linux" / "Raspberry Pi OS"
	OSVersion        string // os-release VERSION or VERSION_ID, e.g. "12 (bookworm)"
	KernelVersion    string // /proc/sys/kernel/osrelease
	UptimeSeconds    uint64
	Serial           string // cpuinfo Serial or device-tree serial-number; "" if absent or all zeros (unknown)
	Revision         string // cpuinfo Revision or device-tree system/linux,revision (Pi board revision code); "" if absent or all zeros (unknown)
}

// Throttle is the firmware's throttling state: the get_throttled bit field,
// or as much of it as the kernel's source tells.
type Throttle struct {
	Raw                                                                                uint32 // the get_throttled bit field (for hwmon rpi_volt: bit 0 only)
	UnderVoltage, FreqCapped, Throttled, SoftTempLimit                                 bool   // bits 0,1,2,3: now
	UnderVoltageOccurred, FreqCappedOccurred, ThrottledOccurred, SoftTempLimitOccurred bool   // bits 16,17,18,19: since boot
	Source                                                                             string // ThrottleFirmware, ThrottleVcgencmd, ThrottleRpiVolt or "sim"
	// UnderVoltageOnly says only UnderVoltage is known: the hwmon rpi_volt
	// alarm tells under-voltage now, nothing about capping, throttling or
	// what happened since boot, so the other flags mean "unknown", not false.
	UnderVoltageOnly bool
}

// Where throttling comes from, best first. With none, the state is unknown.
const (
	ThrottleFirmware = "firmware"       // the firmware's get_throttled node in sysfs (Raspberry Pi kernels)
	ThrottleVcgencmd = "vcgencmd"       // vcgencmd get_throttled (Raspberry Pi OS)
	ThrottleRpiVolt  = "hwmon rpi_volt" // in0_lcrit_alarm of the raspberrypi-hwmon driver: under-voltage now only
	ThrottleNone     = "none"
)

// ThrottleFromRaw decodes a get_throttled value; Source is left empty
// because only the caller knows where the value came from.
func ThrottleFromRaw(raw uint32) Throttle {
	bit := func(n uint) bool { return raw&(1<<n) != 0 }
	return Throttle{
		Raw:                   raw,
		UnderVoltage:          bit(0),
		FreqCapped:            bit(1),
		Throttled:             bit(2),
		SoftTempLimit:         bit(3),
		UnderVoltageOccurred:  bit(16),
		FreqCappedOccurred:    bit(17),
		ThrottledOccurred:     bit(18),
		SoftTempLimitOccurred: bit(19),
	}
}

// Health is a point-in-time snapshot of load, memory, disk and thermals.
type Health struct {
	Time                          time.Time
	CPUUsagePercent               float64  // 0..100, all CPUs, from the delta between two /proc/stat readings like top
	CPUFreqMHz                    *float64 // cpu0 scaling_cur_freq, nil if absent
	Load1, Load5, Load15          float64
	MemoryTotalBytes              uint64
	MemoryUsedBytes               uint64 // MemTotal - MemAvailable (fallback MemFree+Buffers+Cached when no MemAvailable)
	MemoryAvailableBytes          uint64
	SwapTotalBytes, SwapUsedBytes uint64
	DiskTotalBytes, DiskUsedBytes uint64    // statfs of "/" like df: total=blocks*bsize, used=(blocks-bfree)*bsize
	TemperatureCelsius            *float64  // nil when no source
	TemperatureSource             string    // "thermal_zone0", "vcgencmd", "hwmon:<name>/temp1", "sim", "" if none
	Throttle                      *Throttle // nil when no source gives it (unknown, not "not throttled"): absent is NOT an error
	UptimeSeconds                 uint64
}

// Hardware is what the device has, for the capability matrix.
type Hardware struct {
	GPIOChips []string // names of /dev/gpiochipN, e.g. "gpiochip0", sorted by N
	// GPIOChipLabels maps a GPIOChips name to its kernel label (e.g.
	// "gpiochip0" -> "pinctrl-bcm2711"), because on a Pi 5 the label is how
	// you tell the header chip (pinctrl-rp1) from the SoC's own. A chip whose
	// label cannot be attributed unambiguously is missing from the map.
	GPIOChipLabels map[string]string
	I2CBuses       []int    // N of sys/class/i2c-dev/i2c-N (or sys/bus/i2c/devices/i2c-N), sorted
	PWMChips       []string // sys/class/pwm/pwmchipN, sorted by N
	Cameras        []string // sensors and USB cameras found under sys/class/video4linux, sorted; may be empty
	Thermal        bool     // a temperature source exists
	Throttle       bool     // a throttle source exists
	ThrottleSource string   // which: ThrottleFirmware, ThrottleVcgencmd, ThrottleRpiVolt, "sim", or ThrottleNone
	IsRaspberryPi  bool     // model starts with "Raspberry Pi"
}

// isRaspberryPi is the one place that decides what counts as a Pi.
func isRaspberryPi(model string) bool {
	return strings.HasPrefix(model, "Raspberry Pi")
}

package sysinfo

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// Simulated board constants: a 4 GB Pi 4 on a 32 GB card.
const (
	simDefaultModel = "Raspberry Pi 4 Model B Rev 1.4 (simulated)"
	simCores        = 4
	simMemTotal     = 4 << 30
	simSwapTotal    = 100 << 20 // dphys-swapfile's default
	simDiskTotal    = 7_516_160 * 4096
	simDiskUsed     = simDiskTotal / 5 * 2
	simPage         = 4096
)

// SimOptions configures [NewSim].
type SimOptions struct {
	Model string           // default "Raspberry Pi 4 Model B Rev 1.4 (simulated)"
	Now   func() time.Time // default time.Now
	Start time.Time        // "boot" time for uptime; default the first Now()
}

// Sim is the simulated board for laptops, demos and fast tests. Every value
// is a pure function of Now()-Start, so it is deterministic under a fake
// clock, yet moves smoothly under a real one. It has no goroutines; its one
// piece of mutable state is the firmware's throttle bits, which a test or a
// demo flips with SetThrottle to watch the agent react.
type Sim struct {
	model    string
	now      func() time.Time
	start    time.Time
	throttle atomic.Uint32
}

var _ Source = (*Sim)(nil)

// NewSim returns a simulated Source.
func NewSim(o SimOptions) *Sim {
	s := &Sim{model: o.Model, now: o.Now, start: o.Start}
	if s.model == "" {
		s.model = simDefaultModel
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.start.IsZero() {
		s.start = s.now()
	}
	s.throttle.Store(1 << 16) // a past under-voltage, nothing now
	return s
}

// SetThrottle replaces the board's get_throttled bit field (bit 0 under-voltage
// now, bit 2 throttled now, bits 16-19 the same since boot).
func (s *Sim) SetThrottle(raw uint32) { s.throttle.Store(raw) }

// Basic reports a Pi 4 running 64-bit Raspberry Pi OS bookworm.
func (s *Sim) Basic(ctx context.Context) (Basic, error) {
	if err := ctx.Err(); err != nil {
		return Basic{}, err
	}
	_, e := s.elapsed()
	return Basic{
		Hostname:         "raspberrypi",
		Model:            s.model,
		CPUArch:          "aarch64",
		CPUCores:         simCores,
		MemoryTotalBytes: simMemTotal,
		OSName:           "Debian GNU/Linux",
		OSVersion:        "12 (bookworm)",
		KernelVersion:    "6.6.51+rpt-rpi-v8",
		UptimeSeconds:    uint64(e),
		Serial:           "1000000000c0ffee",
		Revision:         "c03114",
	}, nil
}

// Health moves CPU (5-40 %), temperature (45-65 °C) and memory (30-40 %
// used) along sums of sines with periods from seconds to minutes, and
// always reports a past under-voltage so a demo has something to show.
func (s *Sim) Health(ctx context.Context) (Health, error) {
	if err := ctx.Err(); err != nil {
		return Health{}, err
	}
	now, e := s.elapsed()
	cpu := simCPU(e)
	busy := (cpu - 22.5) / 17.5 // -1..1, lets temperature and memory follow load a little
	temp := 55 + 7*wave(e, 480, 0) + 3*busy
	freq := 600.0
	if cpu >= 15 {
		freq = 1800 // ondemand jumps straight to the top
	}
	used := uint64(simMemTotal*(0.35+0.04*wave(e, 300, 0.5)+0.01*busy)) / simPage * simPage
	th := ThrottleFromRaw(s.throttle.Load())
	th.Source = "sim"
	return Health{
		Time:                 now,
		CPUUsagePercent:      cpu,
		CPUFreqMHz:           &freq,
		Load1:                simCores * cpu / 100,
		Load5:                simCores * (0.225 + 0.03*wave(e, 600, 1)),
		Load15:               simCores * (0.22 + 0.01*wave(e, 1800, 2)),
		MemoryTotalBytes:     simMemTotal,
		MemoryUsedBytes:      used,
		MemoryAvailableBytes: simMemTotal - used,
		SwapTotalBytes:       simSwapTotal,
		SwapUsedBytes:        0,
		DiskTotalBytes:       simDiskTotal,
		DiskUsedBytes:        simDiskUsed,
		TemperatureCelsius:   &temp,
		TemperatureSource:    "sim",
		Throttle:             &th,
		UptimeSeconds:        uint64(e),
	}, nil
}

// Hardware reports a Pi 4 with I2C, PWM and a Camera Module 3 enabled.
func (s *Sim) Hardware(ctx context.Context) (Hardware, error) {
	if err := ctx.Err(); err != nil {
		return Hardware{}, err
	}
	return Hardware{
		GPIOChips:      []string{"gpiochip0"},
		GPIOChipLabels: map[string]string{"gpiochip0": "pinctrl-bcm2711"},
		I2CBuses:       []int{1},
		PWMChips:       []string{"pwmchip0"},
		Cameras:        []string{"imx708"},
		Thermal:        true,
		Throttle:       true,
		ThrottleSource: "sim",
		IsRaspberryPi:  isRaspberryPi(s.model),
	}, nil
}

// Counters reports eth0 receiving about 50 KB/s and sending about 6 KB/s,
// a lightly used wlan0 (a few KB/s) and an SD card (mmcblk0) writing about
// 20 KB/s at 1-3 % busy. Each counter is the integral since Start of a rate
// that swings around its mean but stays positive, so counters never step
// back and [Rates] over any interval lands near the mean.
func (s *Sim) Counters(ctx context.Context) (Counters, error) {
	if err := ctx.Err(); err != nil {
		return Counters{}, err
	}
	now, e := s.elapsed()
	ethRx := simIntegral(e, 50_000, 0.3, 180, 0)
	ethTx := simIntegral(e, 6_000, 0.5, 240, 1)
	wlanRx := simIntegral(e, 1_500, 0.6, 60, 2)
	wlanTx := simIntegral(e, 800, 0.6, 75, 3)
	written := simIntegral(e, 20_000, 0.5, 120, 0.5)
	read := simIntegral(e, 4_000, 0.8, 300, 1.5)
	return Counters{
		Time: now,
		Net: []NetCounters{
			{
				Name:    "eth0",
				RxBytes: uint64(ethRx), RxPackets: uint64(ethRx / 1100), RxDrops: uint64(e / 900),
				TxBytes: uint64(ethTx), TxPackets: uint64(ethTx / 200),
			},
			{
				Name:    "wlan0",
				RxBytes: uint64(wlanRx), RxPackets: uint64(wlanRx / 300), RxDrops: uint64(e / 300),
				TxBytes: uint64(wlanTx), TxPackets: uint64(wlanTx / 250), TxErrors: uint64(e / 3600),
			},
		},
		Disk: []DiskCounters{{
			Name:           "mmcblk0",
			ReadsCompleted: uint64(read / 16384), SectorsRead: uint64(read / diskSectorBytes),
			WritesCompleted: uint64(written / 8192), SectorsWritten: uint64(written / diskSectorBytes),
			IOTicksMs: uint64(simIntegral(e, 20, 0.5, 120, 0.5)), // 20 ms/s = 2 % busy, following the writes
			InFlight:  uint64(e) % 3,                             // 0..2 requests queued
		}},
	}, nil
}

// simIntegral is the integral over [0, e] of mean*(1 + swing*sin(2πt/period
// + phase)). With swing < 1 the rate is always positive, so the result
// grows strictly with e and conversions to integer counters never go back.
func simIntegral(e, mean, swing, period, phase float64) float64 {
	w := 2 * math.Pi / period
	return mean * (e + swing/w*(math.Cos(phase)-math.Cos(w*e+phase)))
}

// elapsed is the simulated uptime; a clock before Start reads as boot.
func (s *Sim) elapsed() (time.Time, float64) {
	now := s.now()
	return now, max(now.Sub(s.start).Seconds(), 0)
}

// simCPU stays within 5..40: 22.5 ± (12 + 5.5).
func simCPU(e float64) float64 {
	return 22.5 + 12*wave(e, 97, 0) + 5.5*wave(e, 23, 1)
}

// wave is a sine of the given period in seconds, in -1..1.
func wave(e, period, phase float64) float64 {
	return math.Sin(2*math.Pi*e/period + phase)
}

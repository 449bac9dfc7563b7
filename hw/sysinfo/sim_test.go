package sysinfo

import (
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"
)

func TestSimRanges(t *testing.T) {
	ctx := t.Context()
	now := t0
	s := NewSim(SimOptions{Now: func() time.Time { return now }, Start: t0})
	b, err := s.Basic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.CPUCores != 4 || b.MemoryTotalBytes != 4<<30 || b.Model != simDefaultModel || b.UptimeSeconds != 0 {
		t.Errorf("Basic: %+v", b)
	}
	// Two hours in 7 s steps covers every wave (the longest period is 30 min).
	for e := time.Duration(0); e <= 2*time.Hour; e += 7 * time.Second {
		now = t0.Add(e)
		h, err := s.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		used := float64(h.MemoryUsedBytes) / float64(h.MemoryTotalBytes)
		switch {
		case h.CPUUsagePercent < 5 || h.CPUUsagePercent > 40:
			t.Fatalf("at %v: cpu %v outside 5..40", e, h.CPUUsagePercent)
		case *h.TemperatureCelsius < 45 || *h.TemperatureCelsius > 65:
			t.Fatalf("at %v: temperature %v outside 45..65", e, *h.TemperatureCelsius)
		case used < 0.30 || used > 0.40:
			t.Fatalf("at %v: memory used %.3f outside 30..40 %%", e, used)
		case h.MemoryUsedBytes+h.MemoryAvailableBytes != h.MemoryTotalBytes || h.MemoryUsedBytes%simPage != 0:
			t.Fatalf("at %v: memory does not add up: %+v", e, h)
		case h.DiskUsedBytes > h.DiskTotalBytes || h.SwapUsedBytes > h.SwapTotalBytes:
			t.Fatalf("at %v: disk or swap: %+v", e, h)
		case h.Load1 < 0 || h.Load5 < 0 || h.Load15 < 0 || h.Load1 != 4*h.CPUUsagePercent/100:
			t.Fatalf("at %v: load %v %v %v", e, h.Load1, h.Load5, h.Load15)
		case *h.CPUFreqMHz != 600 && *h.CPUFreqMHz != 1800:
			t.Fatalf("at %v: frequency %v", e, *h.CPUFreqMHz)
		case h.UptimeSeconds != uint64(e/time.Second) || !h.Time.Equal(now):
			t.Fatalf("at %v: uptime %d time %v", e, h.UptimeSeconds, h.Time)
		case h.TemperatureSource != "sim":
			t.Fatalf("temperature source %q", h.TemperatureSource)
		}
		want := Throttle{Raw: 1 << 16, UnderVoltageOccurred: true, Source: "sim"}
		if h.Throttle == nil || *h.Throttle != want {
			t.Fatalf("Throttle %+v, want %+v", h.Throttle, want)
		}
	}
	hw, err := s.Hardware(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hw.IsRaspberryPi || !hw.Thermal || !hw.Throttle || len(hw.GPIOChips) == 0 {
		t.Errorf("Hardware: %+v", hw)
	}
}

func TestSimSmooth(t *testing.T) {
	now := t0
	s := NewSim(SimOptions{Now: func() time.Time { return now }, Start: t0})
	prev, err := s.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var minCPU, maxCPU = 100.0, 0.0
	for range 3600 {
		now = now.Add(time.Second)
		h, err := s.Health(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// The fastest wave (23 s, amplitude 5.5) moves at most 2π·5.5/23 ≈ 1.5 %/s.
		if d := math.Abs(h.CPUUsagePercent - prev.CPUUsagePercent); d > 2.5 {
			t.Fatalf("cpu jumped %.2f in 1 s at %v", d, now.Sub(t0))
		}
		if d := math.Abs(*h.TemperatureCelsius - *prev.TemperatureCelsius); d > 0.5 {
			t.Fatalf("temperature jumped %.2f in 1 s", d)
		}
		minCPU, maxCPU = min(minCPU, h.CPUUsagePercent), max(maxCPU, h.CPUUsagePercent)
		prev = h
	}
	if maxCPU-minCPU < 15 {
		t.Errorf("cpu hardly moves in an hour: %.1f..%.1f", minCPU, maxCPU)
	}
}

func TestSimDeterministic(t *testing.T) {
	at := t0.Add(1234567 * time.Millisecond)
	clock := func() time.Time { return at }
	a := NewSim(SimOptions{Now: clock, Start: t0})
	b := NewSim(SimOptions{Now: clock, Start: t0})
	for range 3 {
		ha, _ := a.Health(t.Context())
		hb, _ := b.Health(t.Context())
		if !reflect.DeepEqual(ha, hb) {
			t.Fatalf("same clock, different Health:\n%+v\n%+v", ha, hb)
		}
		ba, _ := a.Basic(t.Context())
		bb, _ := b.Basic(t.Context())
		if ba != bb || ba.UptimeSeconds != 1234 {
			t.Fatalf("Basic %+v vs %+v", ba, bb)
		}
	}
}

func TestSimOptions(t *testing.T) {
	t.Run("start defaults to the first Now", func(t *testing.T) {
		now := t0
		s := NewSim(SimOptions{Now: func() time.Time { return now }})
		now = now.Add(90 * time.Second)
		if b, _ := s.Basic(t.Context()); b.UptimeSeconds != 90 {
			t.Errorf("uptime %d, want 90", b.UptimeSeconds)
		}
	})
	t.Run("a clock before Start reads as boot", func(t *testing.T) {
		s := NewSim(SimOptions{Now: func() time.Time { return t0.Add(-time.Hour) }, Start: t0})
		h, err := s.Health(t.Context())
		if err != nil || h.UptimeSeconds != 0 {
			t.Errorf("uptime %d, %v", h.UptimeSeconds, err)
		}
	})
	t.Run("custom model", func(t *testing.T) {
		s := NewSim(SimOptions{Model: "Banana Pi M5"})
		b, _ := s.Basic(t.Context())
		hw, _ := s.Hardware(t.Context())
		if b.Model != "Banana Pi M5" || hw.IsRaspberryPi {
			t.Errorf("model %q IsRaspberryPi %v", b.Model, hw.IsRaspberryPi)
		}
	})
	t.Run("hardware lists are fresh per call", func(t *testing.T) {
		s := NewSim(SimOptions{})
		a, _ := s.Hardware(t.Context())
		a.Cameras[0] = "changed"
		a.GPIOChipLabels["gpiochip0"] = "changed"
		b, _ := s.Hardware(t.Context())
		if b.Cameras[0] != "imx708" || b.GPIOChipLabels["gpiochip0"] != "pinctrl-bcm2711" {
			t.Errorf("a caller's edit leaked: %+v", b)
		}
	})
}

// TestSimNoGoroutines guards "cheap": a Sim must not start anything.
func TestSimNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	s := NewSim(SimOptions{})
	for range 100 {
		_, _ = s.Health(t.Context())
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines %d -> %d", before, after)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = s.Health(t.Context()) }); a > 4 {
		t.Errorf("Health allocates %v times", a)
	}
}

func BenchmarkSimHealth(b *testing.B) {
	s := NewSim(SimOptions{})
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Health(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

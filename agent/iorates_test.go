package agent

import (
	"context"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// The snapshot carries the network and disk_io blocks with the tool catalog's
// names, in system_get_health_snapshot and metrics_get_realtime_metrics alike.
func TestSnapshotNetworkAndDiskIO(t *testing.T) {
	r := newRig(t, nil)
	for _, tool := range []string{"system_get_health_snapshot", "metrics_get_realtime_metrics"} {
		res, sc := r.as(admin, tool, nil)
		if res.IsError {
			t.Fatal(sc)
		}
		nw := sc["network"].(map[string]any)
		eth := nw["interfaces"].(map[string]any)["eth0"].(map[string]any)
		// The simulated eth0 receives about 50 KB/s and sends about 6 KB/s.
		if eth["bytes_recv_per_sec"].(float64) <= eth["bytes_sent_per_sec"].(float64) || eth["packets_recv_per_sec"].(float64) <= 0 {
			t.Errorf("%s eth0: %v", tool, eth)
		}
		// eth0 has a 1000 Mbit/s link in the fixture; wlan0 has no speed.
		if u, ok := eth["utilization_percent"].(float64); !ok || u <= 0 || u > 100 {
			t.Errorf("%s eth0 utilization: %v", tool, eth)
		}
		if _, ok := nw["interfaces"].(map[string]any)["wlan0"].(map[string]any)["utilization_percent"]; ok {
			t.Errorf("%s wlan0 has a utilization without a link speed", tool)
		}
		tb := nw["total_bandwidth_mbps"].(map[string]any)
		if tb["down"].(float64) <= 0 || tb["up"].(float64) <= 0 {
			t.Errorf("%s totals: %v", tool, tb)
		}
		dio := sc["disk_io"].(map[string]any)
		mmc := dio["devices"].(map[string]any)["mmcblk0"].(map[string]any)
		for _, k := range []string{"read_bytes_per_sec", "write_bytes_per_sec", "read_iops", "write_iops", "busy_percent", "queue_depth"} {
			if _, ok := mmc[k].(float64); !ok {
				t.Errorf("%s mmcblk0 lacks %s: %v", tool, k, mmc)
			}
		}
		if tot := dio["total"].(map[string]any); tot["write_mb_per_sec"].(float64) <= 0 {
			t.Errorf("%s disk total: %v", tool, tot)
		}
	}
}

func TestIOBlocksByHand(t *testing.T) {
	nb, db := ioBlocks([]sysinfo.NetRates{{Name: "eth0", RxBytesPerSec: 12.5e6, TxBytesPerSec: 1e6, RxPacketsPerSec: 90, TxPacketsPerSec: 10, RxErrorsPerSec: 1, TxDropsPerSec: 0.5}},
		[]sysinfo.DiskRates{{Name: "sda", ReadBytesPerSec: 2e6, WriteBytesPerSec: 5e5, QueueDepth: 3}, {Name: "sdb", ReadBytesPerSec: 1e6}},
		map[string]int{"eth0": 1000}, 2)
	e := nb.Interfaces["eth0"]
	if *e.UtilizationPercent != 10 || e.ErrorRatePercent != 1 || e.DropRatePercent != 0.5 || nb.TotalBandwidthMbps != (upDown{Up: 8, Down: 100}) {
		t.Fatalf("network: %+v %+v", e, nb.TotalBandwidthMbps)
	}
	if db.Total != (diskTotal{ReadMBPerSec: 3, WriteMBPerSec: 0.5}) || db.Devices["sda"].QueueDepth != 3 || db.IntervalSeconds != 2 {
		t.Fatalf("disk: %+v", db)
	}
}

// The meter waits for a baseline only once: a call within ioBaseline of the
// last repeats its rates, a later one measures since the last reading.
func TestIOMeterReusesReadings(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0
	src := sysinfo.NewSim(sysinfo.SimOptions{Now: func() time.Time { return now }, Start: t0.Add(-time.Hour)})
	var m ioMeter
	// First call: a baseline, then a second reading after ioBaseline of
	// real waiting; the simulated clock does not move, so no interval.
	if _, _, _, ok, err := m.rates(context.Background(), src); err != nil || ok {
		t.Fatalf("no time passed on the simulated clock: ok %v, %v", ok, err)
	}
	now = now.Add(10 * time.Second)
	_, _, secs, ok, err := m.rates(context.Background(), src)
	if err != nil || !ok || secs != 10 {
		t.Fatalf("10 s later: %v s, %v %v", secs, ok, err)
	}
	now = now.Add(100 * time.Millisecond)
	if _, _, again, ok, _ := m.rates(context.Background(), src); !ok || again != 10 {
		t.Fatalf("100 ms later the last rates are repeated: %v s", again)
	}
	now = now.Add(time.Second)
	if _, _, s2, ok, _ := m.rates(context.Background(), src); !ok || s2 != 1.1 {
		t.Fatalf("then measured since the last reading: %v s", s2)
	}
}

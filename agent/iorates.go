package agent

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// The health snapshot's network and disk_io blocks are rates, which take two
// readings of the kernel's counters. The meter keeps the last reading, so a
// snapshot usually compares with the previous call's; a call soon after the
// previous one repeats its rates rather than measure over a few
// milliseconds, and only the first call, or one after a long pause, takes a
// baseline and waits ioBaseline for the second reading.
const (
	ioBaseline = 500 * time.Millisecond
	ioMaxAge   = 5 * time.Minute // an older reading averages over too long to be "now"
)

type ioMeter struct {
	mu   sync.Mutex
	prev *sysinfo.Counters
	last *ioRates // the rates computed last, for calls within ioBaseline of it
}

type ioRates struct {
	net  []sysinfo.NetRates
	disk []sysinfo.DiskRates
	secs float64
}

// rates measures the network and disk rates now. ok is false when this
// source has no counters.
func (m *ioMeter) rates(ctx context.Context, src sysinfo.Source) (net []sysinfo.NetRates, disk []sysinfo.DiskRates, secs float64, ok bool, err error) {
	ctr, has := src.(sysinfo.CounterSource)
	if !has {
		return nil, nil, 0, false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, err := ctr.Counters(ctx)
	if err != nil {
		return nil, nil, 0, false, err
	}
	var age time.Duration
	if m.prev != nil {
		age = cur.Time.Sub(m.prev.Time)
	}
	switch {
	case m.prev != nil && age >= ioBaseline && age <= ioMaxAge:
	case m.prev != nil && age >= 0 && age < ioBaseline && m.last != nil:
		return m.last.net, m.last.disk, m.last.secs, m.last.secs > 0, nil
	default:
		base := cur
		m.prev = &base
		t := time.NewTimer(ioBaseline)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, 0, false, ctx.Err()
		case <-t.C:
		}
		if cur, err = ctr.Counters(ctx); err != nil {
			return nil, nil, 0, false, err
		}
	}
	net, disk = sysinfo.Rates(*m.prev, cur)
	secs = cur.Time.Sub(m.prev.Time).Seconds()
	m.prev = &cur
	m.last = &ioRates{net: net, disk: disk, secs: secs}
	return net, disk, secs, secs > 0, nil
}

// networkBlock is the health snapshot's network block: each interface's byte,
// packet, error and drop rates and the total bandwidth up and down (tool
// catalog, spec 002 addendum §4.1).
type networkBlock struct {
	Interfaces         map[string]netIfaceRates `json:"interfaces" jsonschema:"per interface (loopback excluded)"`
	TotalBandwidthMbps upDown                   `json:"total_bandwidth_mbps" jsonschema:"all interfaces together, megabits per second"`
	IntervalSeconds    float64                  `json:"interval_seconds" jsonschema:"the rates are averages over this interval"`
}

// netIfaceRates are one interface's rates.
type netIfaceRates struct {
	BytesSentPerSec    float64  `json:"bytes_sent_per_sec"`
	BytesRecvPerSec    float64  `json:"bytes_recv_per_sec"`
	PacketsSentPerSec  float64  `json:"packets_sent_per_sec"`
	PacketsRecvPerSec  float64  `json:"packets_recv_per_sec"`
	ErrorRatePercent   float64  `json:"error_rate_percent" jsonschema:"errors per packet, both directions, percent"`
	DropRatePercent    float64  `json:"drop_rate_percent" jsonschema:"drops per packet, both directions, percent"`
	UtilizationPercent *float64 `json:"utilization_percent,omitempty" jsonschema:"busier direction against the link speed; absent when the speed is unknown (Wi-Fi, link down)"`
}

// upDown is a pair of directions.
type upDown struct {
	Up   float64 `json:"up"`
	Down float64 `json:"down"`
}

// diskIOBlock is the health snapshot's disk_io block: each disk's read and
// write rates, IOPS, busy time and queue depth, and the totals (tool
// catalog, spec 002 addendum §4.2).
type diskIOBlock struct {
	Devices         map[string]diskDevRates `json:"devices" jsonschema:"per whole disk (partitions and virtual devices excluded)"`
	Total           diskTotal               `json:"total"`
	IntervalSeconds float64                 `json:"interval_seconds"`
}

// diskDevRates are one disk's rates.
type diskDevRates struct {
	ReadBytesPerSec  float64 `json:"read_bytes_per_sec"`
	WriteBytesPerSec float64 `json:"write_bytes_per_sec"`
	ReadIOPS         float64 `json:"read_iops"`
	WriteIOPS        float64 `json:"write_iops"`
	BusyPercent      float64 `json:"busy_percent"`
	QueueDepth       int     `json:"queue_depth" jsonschema:"I/Os in flight at the reading"`
}

// diskTotal is every disk together; a MB is 10^6 bytes.
type diskTotal struct {
	ReadMBPerSec  float64 `json:"read_mb_per_sec"`
	WriteMBPerSec float64 `json:"write_mb_per_sec"`
}

// ioBlocks turns rates into the snapshot's blocks. speeds are link speeds in
// Mbit/s by interface; a missing or zero speed leaves utilization out.
func ioBlocks(net []sysinfo.NetRates, disk []sysinfo.DiskRates, speeds map[string]int, secs float64) (*networkBlock, *diskIOBlock) {
	nb := &networkBlock{Interfaces: map[string]netIfaceRates{}, IntervalSeconds: round2(secs)}
	for _, r := range net {
		pk := r.RxPacketsPerSec + r.TxPacketsPerSec
		ir := netIfaceRates{BytesSentPerSec: round2(r.TxBytesPerSec), BytesRecvPerSec: round2(r.RxBytesPerSec),
			PacketsSentPerSec: round2(r.TxPacketsPerSec), PacketsRecvPerSec: round2(r.RxPacketsPerSec)}
		if pk > 0 {
			ir.ErrorRatePercent = round4((r.RxErrorsPerSec + r.TxErrorsPerSec) / pk * 100)
			ir.DropRatePercent = round4((r.RxDropsPerSec + r.TxDropsPerSec) / pk * 100)
		}
		if sp := speeds[r.Name]; sp > 0 {
			// Links are full duplex: the busier direction is what fills up.
			u := round2(clamp(math.Max(r.RxBytesPerSec, r.TxBytesPerSec)*8/(float64(sp)*1e6)*100, 0, 100))
			ir.UtilizationPercent = &u
		}
		nb.Interfaces[r.Name] = ir
		nb.TotalBandwidthMbps.Up += r.TxBytesPerSec * 8 / 1e6
		nb.TotalBandwidthMbps.Down += r.RxBytesPerSec * 8 / 1e6
	}
	nb.TotalBandwidthMbps.Up, nb.TotalBandwidthMbps.Down = round4(nb.TotalBandwidthMbps.Up), round4(nb.TotalBandwidthMbps.Down)
	db := &diskIOBlock{Devices: map[string]diskDevRates{}, IntervalSeconds: round2(secs)}
	for _, r := range disk {
		db.Devices[r.Name] = diskDevRates{ReadBytesPerSec: round2(r.ReadBytesPerSec), WriteBytesPerSec: round2(r.WriteBytesPerSec),
			ReadIOPS: round2(r.ReadIOPS), WriteIOPS: round2(r.WriteIOPS), BusyPercent: round2(r.BusyPercent), QueueDepth: int(r.QueueDepth)}
		db.Total.ReadMBPerSec += r.ReadBytesPerSec / 1e6
		db.Total.WriteMBPerSec += r.WriteBytesPerSec / 1e6
	}
	db.Total.ReadMBPerSec, db.Total.WriteMBPerSec = round4(db.Total.ReadMBPerSec), round4(db.Total.WriteMBPerSec)
	return nb, db
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

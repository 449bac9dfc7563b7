package store

import "time"

// Sample is one reading of the device by a sampling job: what
// system.get_health_snapshot returns plus network and disk rates computed from
// counter deltas. Floats are float32 on purpose: sensors and rates have far
// fewer than 7 significant digits, and it halves what the SD card stores.
type Sample struct {
	Time       time.Time // millisecond precision when stored
	CPUPercent float32   // 0..100 over the interval
	FreqMHz    float32   // NaN when unknown
	TempC      float32   // NaN when no sensor
	Load1      float32
	Load5      float32
	Load15     float32

	MemTotal, MemUsed, MemAvail uint64 // bytes
	SwapTotal, SwapUsed         uint64
	DiskTotal, DiskUsed         uint64 // root file system

	HasThrottle bool
	Throttle    uint32 // get_throttled bits (0..3 now, 16..19 since boot), or UnderVoltageOnly with bit 0

	Net  []NetRate  // one per interface seen in both readings, sorted by name
	Disk []DiskRate // one per block device seen in both readings, sorted by name
}

// NetRate is one interface's rates over the sample interval, from which the
// health snapshot's network block is computed (spec 002 addendum §4.1).
type NetRate struct {
	Name            string
	RxBytesPerSec   float32
	TxBytesPerSec   float32
	RxPacketsPerSec float32
	TxPacketsPerSec float32
	RxErrorsPerSec  float32
	TxErrorsPerSec  float32
	RxDropsPerSec   float32
	TxDropsPerSec   float32
}

// DiskRate is one block device's rates over the sample interval, from which
// the health snapshot's disk_io block is computed (spec 002 addendum §4.2).
type DiskRate struct {
	Name             string
	ReadBytesPerSec  float32
	WriteBytesPerSec float32
	ReadIOPS         float32
	WriteIOPS        float32
	BusyPercent      float32 // time with I/O in flight, 0..100
}

// Job is a sampling job as the jobs bucket keeps it, so it resumes after a
// restart or a reboot.
type Job struct {
	ID              string    `json:"id"`
	IntervalSeconds int       `json:"interval_seconds"`
	RetentionHours  int       `json:"retention_hours"`
	Status          string    `json:"status"`            // "running" or "stopped"
	Default         bool      `json:"default,omitempty"` // the configured job, started on first run
	CreatedBy       string    `json:"created_by"`
	CreatedAt       time.Time `json:"created_at"`
	StoppedAt       time.Time `json:"stopped_at,omitzero"`
}

// Throttle bits beside get_throttled's (0-3 now, 16-19 since boot).
const (
	// ThrottleKnownBits are the firmware's bits a sample keeps.
	ThrottleKnownBits = 0xF000F
	// UnderVoltageOnly marks a Throttle from a source that knows only
	// whether the supply is under-voltage now (hwmon rpi_volt): bit 0 is
	// then the truth and every other flag unknown, not clear. Bit 6 keeps
	// it to the one byte a uvarint takes below 128.
	UnderVoltageOnly = 1 << 6
)

// ThrottleKnown says whether the sample knows get_throttled bit n.
func (s Sample) ThrottleKnown(n uint) bool {
	return s.HasThrottle && (s.Throttle&UnderVoltageOnly == 0 || n == 0)
}

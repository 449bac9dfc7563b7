// Package iostat reads the write counters the SD-card benchmarks report: a
// process's /proc/PID/io and a block device's /sys/block/DEV/stat.
package iostat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Proc reads one counter of /proc/PID/io ("self": this process). write_bytes
// is what the kernel accounts as sent towards the block device when the
// process dirties page-cache pages, wchar the bytes it passed to write(2)
// and its kin, sockets and pipes included. ok is false off Linux or where
// the kernel does not account I/O.
func Proc(pid, field string) (n int64, ok bool) {
	data, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(l, field+": "); found {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// BlockDevEnv names the block device (say loop0) holding the file system
// TMPDIR is on, which nothing else writes, for DeviceWritten.
const BlockDevEnv = "RASPI_BENCH_BLOCKDEV"

// DeviceWritten is what the block device named by $RASPI_BENCH_BLOCKDEV has
// written, in bytes, after syncing: what reaches the card, journal included.
// ok is false when the variable is not set; a device that cannot be read
// fails tb. It is needed because on kernels whose page cache keeps large
// folios, write_bytes counts a 4 KiB write into a file read through mmap
// (bbolt's way) as the whole folio, up to 256 KiB, and so overstates the
// wear.
func DeviceWritten(tb testing.TB) (n int64, ok bool) {
	tb.Helper()
	dev := os.Getenv(BlockDevEnv)
	if dev == "" {
		return 0, false
	}
	syscall.Sync()
	data, err := os.ReadFile("/sys/block/" + dev + "/stat")
	if err != nil {
		tb.Fatalf("%s: %v", BlockDevEnv, err)
	}
	f := strings.Fields(string(data))
	if len(f) < 7 {
		tb.Fatalf("%s: %s/stat: %q", BlockDevEnv, dev, data)
	}
	sectors, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		tb.Fatalf("%s: %v", BlockDevEnv, err)
	}
	return sectors * 512, true
}

package i2c

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"periph.io/x/conn/v3/i2c"
)

// ScanResult is what Scan found on one bus.
type ScanResult struct {
	Bus       int
	Addresses []int // devices that answered, ascending
	// Drivers maps addresses with a kernel driver bound (sysfs
	// sys/bus/i2c/devices/N-00AA/driver) to the driver's name. They are
	// reported as in use ("UU" in i2cdetect) and not probed: the driver owns
	// the chip, and a stray transfer could upset its state machine. The name
	// is empty when the kernel refused the address as busy but sysfs did not
	// name the driver.
	Drivers map[int]string
	// Skipped lists addresses that were not probed because the adapter lacks
	// the only safe probe for them (a read, in the EEPROM ranges). It is
	// empty on every adapter that can read a byte, which is nearly all.
	Skipped []int
}

// Scan range, as i2cdetect's default: 0x00-0x07 and 0x78-0x7F are reserved.
const (
	scanFirst = 0x08
	scanLast  = 0x77
)

// readProbeRange reports the addresses i2cdetect probes with a read rather
// than a quick write: 0x30-0x37 and 0x50-0x5F hold EEPROMs (SPD, HAT ID,
// AT24RF08) that a quick write can leave mid-write or corrupt.
func readProbeRange(addr int) bool {
	return (addr >= 0x30 && addr <= 0x37) || (addr >= 0x50 && addr <= 0x5F)
}

// Scan probes 0x08..0x77 like i2cdetect's default mode: a quick write (SMBus
// quick, no data) for most addresses, a one-byte read for 0x30-0x37 and
// 0x50-0x5F, and nothing at all for addresses a kernel driver has bound
// (found under sysRoot, "/" on a live system; "" means "/").
//
// The probes need b to implement Prober. If the adapter cannot do a quick
// write, those addresses are read instead (as i2cdetect -r); if it cannot
// read, the EEPROM ranges are skipped rather than written. A bus that is not
// a Prober is scanned by one-byte reads through Tx for every address, as
// i2cdetect -r: periph cannot send a zero-length write, and a read never
// writes to anything.
//
// The bus number only names things: it selects the sysfs entries
// ("1-0048") and appears in the result and errors.
func Scan(ctx context.Context, b i2c.Bus, bus int, sysRoot string) (ScanResult, error) {
	bound, err := boundDrivers(sysRoot, bus)
	if err != nil {
		return ScanResult{}, fmt.Errorf("i2c: bus %d: scan: %w", bus, err)
	}
	res := ScanResult{Bus: bus, Addresses: []int{}, Drivers: map[int]string{}}
	p, isProber := b.(Prober)
	canQuick, canRead := true, true
	for addr := scanFirst; addr <= scanLast; addr++ {
		if err := ctx.Err(); err != nil {
			return ScanResult{}, fmt.Errorf("i2c: bus %d: scan stopped at 0x%02x: %w", bus, addr, err)
		}
		if name, ok := bound[addr]; ok {
			res.Drivers[addr] = name
			continue
		}
		var pr Presence
		if isProber {
			var skip bool
			pr, skip, err = probe(p, addr, &canQuick, &canRead)
			if err != nil {
				return ScanResult{}, fmt.Errorf("i2c: bus %d addr 0x%02x: scan: %w", bus, addr, err)
			}
			if skip {
				res.Skipped = append(res.Skipped, addr)
				continue
			}
		} else {
			var one [1]byte
			if b.Tx(uint16(addr), nil, one[:]) == nil {
				pr = Present
			}
		}
		switch pr {
		case Present:
			res.Addresses = append(res.Addresses, addr)
		case Busy:
			res.Drivers[addr] = ""
		}
	}
	return res, nil
}

// probe picks the operation for addr and falls back as Scan documents,
// remembering in canQuick and canRead what the adapter turned out to lack.
func probe(p Prober, addr int, canQuick, canRead *bool) (pr Presence, skip bool, err error) {
	if !readProbeRange(addr) && *canQuick {
		pr, err = p.Probe(uint16(addr), ProbeQuickWrite)
		if !errors.Is(err, errors.ErrUnsupported) {
			return pr, false, err
		}
		*canQuick = false
	}
	if !*canRead {
		return Absent, true, nil
	}
	pr, err = p.Probe(uint16(addr), ProbeReadByte)
	if errors.Is(err, errors.ErrUnsupported) {
		*canRead = false
		if !*canQuick {
			return Absent, false, fmt.Errorf("adapter can neither quick-write nor read a byte: %w", err)
		}
		return Absent, true, nil
	}
	return pr, false, err
}

// boundDrivers reads which addresses of bus have a driver bound, from
// sysRoot/sys/bus/i2c/devices/<bus>-00AA/driver (a symlink to the driver).
// A missing directory (no I2C core, or a fixture without it) means none.
func boundDrivers(sysRoot string, bus int) (map[int]string, error) {
	if sysRoot == "" {
		sysRoot = "/"
	}
	dir := filepath.Join(sysRoot, "sys", "bus", "i2c", "devices")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[int]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := strconv.Itoa(bus) + "-"
	bound := map[int]string{}
	for _, e := range entries {
		hex, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(hex) != 4 {
			continue
		}
		addr, err := strconv.ParseUint(hex, 16, 16)
		if err != nil || addr > 0x7F { // 10-bit clients are "N-a0AA"
			continue
		}
		link := filepath.Join(dir, e.Name(), "driver")
		if target, err := os.Readlink(link); err == nil {
			bound[int(addr)] = filepath.Base(target)
		} else if _, err := os.Lstat(link); err == nil {
			bound[int(addr)] = "" // present but not a link: bound, name unknown
		}
	}
	return bound, nil
}

package i2c

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"periph.io/x/conn/v3/i2c"
	"periph.io/x/conn/v3/physic"
	"periph.io/x/host/v3/sysfs"
)

// Linux is the Opener of a live Linux machine: buses come from sysfs and
// open as /dev/i2c-N.
//
// Open returns a bus that does ordinary transfers with periph's
// host/v3/sysfs (I2C_RDWR) and probes with SMBus ioctls on a second handle
// of the same /dev/i2c-N, because periph cannot send a quick write (its Tx
// skips empty transfers) and does not export its file. The same handle lets
// SMBus-only adapters, which reject I2C_RDWR (i2c-stub, many PC SMBus
// controllers), still serve register reads and writes: their transfers are
// mapped onto the equivalent SMBus commands.
type Linux struct {
	root string
}

var _ Opener = (*Linux)(nil)

// NewLinux returns the Opener for the machine whose sysfs is under sysRoot
// ("/" or "" for the live one; a fixture directory in tests). Only Buses and
// Scan read sysRoot: Open always opens /dev/i2c-N, since device nodes in a
// fixture could not take ioctls anyway.
func NewLinux(sysRoot string) *Linux {
	if sysRoot == "" {
		sysRoot = "/"
	}
	return &Linux{root: sysRoot}
}

// Buses lists the adapters i2c-dev exposes (sys/class/i2c-dev/i2c-N/name).
// When i2c-dev is not loaded, it falls back to every adapter of the I2C core
// (sys/bus/i2c/devices/i2c-N/name), so the user still sees that buses exist;
// Open then fails with a message naming /dev/i2c-N. No I2C at all is an
// empty list, not an error.
func (l *Linux) Buses(ctx context.Context) ([]BusInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("i2c: list buses: %w", err)
	}
	for _, rel := range []string{"sys/class/i2c-dev", "sys/bus/i2c/devices"} {
		dir := filepath.Join(l.root, rel)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("i2c: list buses: %w", err)
		}
		var buses []BusInfo
		for _, e := range entries {
			num, ok := strings.CutPrefix(e.Name(), "i2c-")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || strconv.Itoa(n) != num {
				continue
			}
			name, _ := os.ReadFile(filepath.Join(dir, e.Name(), "name")) // a bus without a name is still a bus
			buses = append(buses, BusInfo{Bus: n, Name: strings.TrimSpace(string(name))})
		}
		if len(buses) > 0 {
			sort.Slice(buses, func(i, j int) bool { return buses[i].Bus < buses[j].Bus })
			return buses, nil
		}
	}
	return []BusInfo{}, nil
}

// Open opens /dev/i2c-<bus>. The result also implements Prober.
func (l *Linux) Open(bus int) (i2c.BusCloser, error) {
	if bus < 0 {
		return nil, fmt.Errorf("i2c: bus %d: open: bus number is negative", bus)
	}
	sm, err := openSMBus(bus)
	if err != nil {
		return nil, fmt.Errorf("i2c: bus %d: open: %w", bus, err)
	}
	pb, err := sysfs.NewI2C(bus)
	if err != nil {
		_ = sm.close()
		return nil, fmt.Errorf("i2c: bus %d: open: %w", bus, err)
	}
	return &linuxBus{periph: pb, sm: sm}, nil
}

// linuxBus is one open /dev/i2c-N: periph's bus for I2C transfers, and an
// SMBus handle for probes and for adapters that only speak SMBus.
type linuxBus struct {
	periph *sysfs.I2C
	sm     *smbusDev
}

var (
	_ i2c.BusCloser = (*linuxBus)(nil)
	_ Prober        = (*linuxBus)(nil)
)

func (l *linuxBus) String() string { return l.periph.String() }

// Tx goes through periph when the adapter can do plain I2C transfers and
// through the SMBus mapping otherwise (see Linux).
func (l *linuxBus) Tx(addr uint16, w, r []byte) error {
	if l.sm.plainI2C() {
		return l.periph.Tx(addr, w, r)
	}
	return l.sm.tx(addr, w, r)
}

func (l *linuxBus) SetSpeed(f physic.Frequency) error { return l.periph.SetSpeed(f) }

func (l *linuxBus) Probe(addr uint16, op ProbeOp) (Presence, error) { return l.sm.probe(addr, op) }

func (l *linuxBus) Close() error { return errors.Join(l.periph.Close(), l.sm.close()) }

//go:build linux

package i2c

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// stubBus finds an adapter of the kernel's i2c-stub (modprobe i2c-stub
// chip_addr=0x20,0x50), or skips: only the VM harness loads it.
func stubBus(t *testing.T) (bus int, chips []int) {
	t.Helper()
	names, _ := filepath.Glob("/sys/class/i2c-dev/i2c-*/name")
	for _, n := range names {
		body, err := os.ReadFile(n)
		if err != nil || strings.TrimSpace(string(body)) != "SMBus stub driver" {
			continue
		}
		bus, err = strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(n)), "i2c-"))
		if err != nil {
			continue
		}
		// The module parameter lists the chips ("32,80"); unset slots are 0.
		param, err := os.ReadFile("/sys/module/i2c_stub/parameters/chip_addr")
		if err != nil {
			t.Fatalf("i2c-stub bus %d, but no chip_addr parameter: %v", bus, err)
		}
		for _, f := range strings.Split(strings.TrimSpace(string(param)), ",") {
			if a, err := strconv.ParseInt(f, 0, 16); err == nil && a != 0 {
				chips = append(chips, int(a))
			}
		}
		return bus, chips
	}
	t.Skip("no i2c-stub adapter (modprobe i2c-stub chip_addr=0x20,0x50 to run this)")
	return 0, nil
}

func TestLinuxStub(t *testing.T) {
	bus, chips := stubBus(t)
	ctx := context.Background()
	l := NewLinux("/")
	buses, err := l.Buses(ctx)
	if err != nil || !slices.Contains(buses, BusInfo{bus, "SMBus stub driver"}) {
		t.Fatalf("Buses = %+v, %v; want bus %d", buses, err, bus)
	}
	b, err := l.Open(bus)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(Prober); !ok {
		t.Fatal("the Linux bus is not a Prober")
	}

	res, err := Scan(ctx, b, bus, "/")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, a := range chips {
		if _, bound := res.Drivers[a]; a >= scanFirst && a <= scanLast && !bound {
			want = append(want, a)
		}
	}
	slices.Sort(want)
	if !slices.Equal(res.Addresses, want) && !(len(want) == 0 && len(res.Addresses) == 0) {
		t.Errorf("Scan found %x, stub has %x", res.Addresses, chips)
	}
	t.Logf("bus %d: chips %x, scan %+v", bus, chips, res)

	var addr uint16
	for _, a := range chips {
		if a >= FirstAddr && a <= LastAddr {
			addr = uint16(a)
			break
		}
	}
	if addr == 0 {
		t.Skip("no stub chip in 0x03..0x77 to read and write")
	}
	// A block write then read (I2C block data), and a single byte (byte data).
	block := []byte{0xa5, 0x5a, 0x3c, 0xc3, 0x01}
	if err := WriteReg(b, addr, reg(0x40), block); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadReg(b, addr, reg(0x40), len(block)); err != nil || !bytes.Equal(got, block) {
		t.Errorf("ReadReg = % x, %v; want % x", got, err, block)
	}
	if err := WriteReg(b, addr, reg(0x10), []byte{0x77}); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadReg(b, addr, reg(0x10), 1); err != nil || got[0] != 0x77 {
		t.Errorf("ReadReg = % x, %v; want 77", got, err)
	}
	// A full 32-byte block.
	full := make([]byte, MaxTransfer)
	for i := range full {
		full[i] = byte(i * 7)
	}
	if err := WriteReg(b, addr, reg(0x80), full); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadReg(b, addr, reg(0x80), MaxTransfer); err != nil || !bytes.Equal(got, full) {
		t.Errorf("32-byte ReadReg = % x, %v", got, err)
	}
	// A plain one-byte read is an SMBus receive byte; two have no SMBus form.
	if _, err := ReadReg(b, addr, nil, 1); err != nil {
		t.Errorf("plain read: %v", err)
	}
	if _, err := ReadReg(b, addr, nil, 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("2-byte plain read on an SMBus-only adapter: %v, want ErrUnsupported", err)
	}
	// An address without a chip fails.
	for a := uint16(FirstAddr); a <= LastAddr; a++ {
		if !slices.Contains(chips, int(a)) {
			if _, err := ReadReg(b, a, reg(0), 1); err == nil {
				t.Errorf("read from empty address 0x%02x succeeded", a)
			}
			break
		}
	}
}

// struct i2c_smbus_ioctl_data is {__u8, __u8, __u32, union *}: the pointer
// sits at offset 8 on both 32- and 64-bit, after 2 bytes of padding.
func TestSMBusIoctlLayout(t *testing.T) {
	var d smbusIoctlData
	ptr := unsafe.Sizeof(uintptr(0))
	if unsafe.Offsetof(d.size) != 4 || unsafe.Offsetof(d.data) != 8 || unsafe.Sizeof(d) != 8+ptr {
		t.Errorf("layout: size at %d, data at %d, total %d", unsafe.Offsetof(d.size), unsafe.Offsetof(d.data), unsafe.Sizeof(d))
	}
	if unsafe.Sizeof(smbusData{}) != 34 {
		t.Errorf("union i2c_smbus_data is 34 bytes, got %d", unsafe.Sizeof(smbusData{}))
	}
}

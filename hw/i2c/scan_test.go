package i2c

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"periph.io/x/conn/v3/i2c"
)

// sysFixture builds sys/bus/i2c/devices with, on bus 1, a tmp102 driver
// bound at 0x48 and an unbound client at 0x50, plus a bound client on bus 2
// and the adapter's own entry.
func sysFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	devs := filepath.Join(root, "sys", "bus", "i2c", "devices")
	for _, d := range []string{"1-0048", "1-0050", "2-0020", "i2c-1"} {
		if err := os.MkdirAll(filepath.Join(devs, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for d, drv := range map[string]string{"1-0048": "tmp102", "2-0020": "pcf857x"} {
		// Dangling, as the fixture has no sys/bus/i2c/drivers: only the name counts.
		if err := os.Symlink("../../../../bus/i2c/drivers/"+drv, filepath.Join(devs, d, "driver")); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func scanBus() *SimBus {
	return NewSimBus(
		NewMemChip(0x03), // below the scan range
		NewMemChip(0x08),
		NewMemChip(0x20),
		NewMemChip(0x33), // EEPROM range
		NewTMP102(0x48),  // bound to a driver in the fixture
		NewMemChip(0x50), // EEPROM range
		NewMemChip(0x5F),
		NewBME280(0x76),
		NewMemChip(0x77),
		NewMemChip(0x78), // above the scan range
	)
}

func TestScanFindsExactlyTheChips(t *testing.T) {
	b := scanBus()
	res, err := Scan(context.Background(), b, 1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0x08, 0x20, 0x33, 0x48, 0x50, 0x5F, 0x76, 0x77}
	if res.Bus != 1 || !slices.Equal(res.Addresses, want) || len(res.Drivers) != 0 || len(res.Skipped) != 0 {
		t.Errorf("Scan = %+v, want addresses %x", res, want)
	}
}

func TestScanProbesLikeI2cdetect(t *testing.T) {
	b := scanBus()
	res, err := Scan(context.Background(), b, 1, sysFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []int{0x08, 0x20, 0x33, 0x50, 0x5F, 0x76, 0x77}
	if !slices.Equal(res.Addresses, want) {
		t.Errorf("Addresses = %x, want %x", res.Addresses, want)
	}
	if len(res.Drivers) != 1 || res.Drivers[0x48] != "tmp102" {
		t.Errorf("Drivers = %v, want 0x48: tmp102 only", res.Drivers)
	}
	// Every address 0x08..0x77 but the bound one probed once: a read in the
	// EEPROM ranges, a quick write elsewhere.
	seen := map[uint16]string{}
	for _, tx := range b.Transactions() {
		if _, dup := seen[tx.Addr]; dup {
			t.Errorf("0x%02x probed twice", tx.Addr)
		}
		seen[tx.Addr] = tx.Kind()
	}
	for a := uint16(0); a <= 0x7F; a++ {
		got, probed := seen[a]
		switch {
		case a < 0x08 || a > 0x77 || a == 0x48:
			if probed {
				t.Errorf("0x%02x was probed (%s)", a, got)
			}
		case (a >= 0x30 && a <= 0x37) || (a >= 0x50 && a <= 0x5F):
			if got != "read" {
				t.Errorf("0x%02x probed by %q, want read", a, got)
			}
		default:
			if got != "quick" {
				t.Errorf("0x%02x probed by %q, want quick", a, got)
			}
		}
	}
}

// plainBus hides SimBus's Prober, like a periph bus from elsewhere.
type plainBus struct{ i2c.Bus }

func TestScanWithoutProberReads(t *testing.T) {
	b := scanBus()
	res, err := Scan(context.Background(), plainBus{b}, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Addresses, []int{0x08, 0x20, 0x33, 0x48, 0x50, 0x5F, 0x76, 0x77}) {
		t.Errorf("Addresses = %x", res.Addresses)
	}
	for _, tx := range b.Transactions() {
		if tx.Kind() != "read" || tx.R != 1 {
			t.Fatalf("0x%02x probed by %s of %d bytes, want 1-byte reads only", tx.Addr, tx.Kind(), tx.R)
		}
	}
}

// limitedProber is an adapter lacking some SMBus operations, or whose
// kernel reports some addresses busy.
type limitedProber struct {
	*SimBus
	noQuick, noRead bool
	busy            uint16
	calls           map[ProbeOp]int
}

func (p *limitedProber) Probe(addr uint16, op ProbeOp) (Presence, error) {
	p.calls[op]++
	if (op == ProbeQuickWrite && p.noQuick) || (op == ProbeReadByte && p.noRead) {
		return Absent, errUnsupportedf("no %v", op)
	}
	if addr == p.busy {
		return Busy, nil
	}
	return p.SimBus.Probe(addr, op)
}

func TestScanFallbacks(t *testing.T) {
	t.Run("no quick write: read everything", func(t *testing.T) {
		p := &limitedProber{SimBus: scanBus(), noQuick: true, calls: map[ProbeOp]int{}}
		res, err := Scan(context.Background(), p, 1, "")
		if err != nil || len(res.Addresses) != 8 || len(res.Skipped) != 0 {
			t.Fatalf("Scan = %+v, %v", res, err)
		}
		if p.calls[ProbeQuickWrite] != 1 { // learnt once, not retried per address
			t.Errorf("%d quick-write attempts", p.calls[ProbeQuickWrite])
		}
	})
	t.Run("no read: EEPROM ranges skipped, never written", func(t *testing.T) {
		p := &limitedProber{SimBus: scanBus(), noRead: true, calls: map[ProbeOp]int{}}
		res, err := Scan(context.Background(), p, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Addresses, []int{0x08, 0x20, 0x48, 0x76, 0x77}) || len(res.Skipped) != 8+16 {
			t.Errorf("Scan = %+v", res)
		}
		for _, tx := range p.Transactions() {
			if readProbeRange(int(tx.Addr)) {
				t.Errorf("0x%02x was addressed by %s", tx.Addr, tx.Kind())
			}
		}
	})
	t.Run("neither", func(t *testing.T) {
		p := &limitedProber{SimBus: scanBus(), noQuick: true, noRead: true, calls: map[ProbeOp]int{}}
		if _, err := Scan(context.Background(), p, 1, ""); err == nil || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "i2c: bus 1 addr 0x08") {
			t.Errorf("Scan err = %v", err)
		}
	})
	t.Run("busy address is in use", func(t *testing.T) {
		p := &limitedProber{SimBus: scanBus(), busy: 0x20, calls: map[ProbeOp]int{}}
		res, err := Scan(context.Background(), p, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		if name, ok := res.Drivers[0x20]; !ok || name != "" || slices.Contains(res.Addresses, 0x20) {
			t.Errorf("Scan = %+v, want 0x20 in use", res)
		}
	})
}

func TestScanErrors(t *testing.T) {
	b := scanBus()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Scan(ctx, b, 1, ""); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "i2c: bus 1") {
		t.Errorf("cancelled: %v", err)
	}
	if n := len(b.Transactions()); n != 0 {
		t.Errorf("%d probes after cancellation", n)
	}
	fault := errors.New("bus stuck low")
	b.SetFault(fault)
	if _, err := Scan(context.Background(), b, 3, ""); !errors.Is(err, fault) || !strings.Contains(err.Error(), "i2c: bus 3 addr 0x08") {
		t.Errorf("fault: %v", err)
	}
	root := t.TempDir()
	devs := filepath.Join(root, "sys", "bus", "i2c")
	if err := os.MkdirAll(devs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(devs, "devices"), nil, 0o644); err != nil { // a file, not a directory
		t.Fatal(err)
	}
	b.SetFault(nil)
	if _, err := Scan(context.Background(), b, 1, root); err == nil {
		t.Error("unreadable sysfs was ignored")
	}
}

package i2c

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func writeFixture(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLinuxBuses(t *testing.T) {
	ctx := context.Background()
	t.Run("i2c-dev", func(t *testing.T) {
		root := t.TempDir()
		writeFixture(t, root, map[string]string{
			"sys/class/i2c-dev/i2c-20/name":        "fef04500.i2c\n",
			"sys/class/i2c-dev/i2c-1/name":         "bcm2835 (i2c@7e804000)\n",
			"sys/class/i2c-dev/i2c-2/name":         "",
			"sys/class/i2c-dev/i2c-x/name":         "junk",
			"sys/class/i2c-dev/i2c-01/name":        "junk",
			"sys/bus/i2c/devices/i2c-9/name":       "not i2c-dev",
			"sys/bus/i2c/devices/1-0048/name":      "tmp102",
			"sys/class/i2c-dev/i2c-21/device/name": "no name file of its own",
		})
		got, err := NewLinux(root).Buses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []BusInfo{{1, "bcm2835 (i2c@7e804000)"}, {2, ""}, {20, "fef04500.i2c"}, {21, ""}}
		if len(got) != len(want) {
			t.Fatalf("Buses = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("Buses[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
	t.Run("no i2c-dev: adapters of the I2C core", func(t *testing.T) {
		root := t.TempDir()
		writeFixture(t, root, map[string]string{
			"sys/bus/i2c/devices/i2c-11/name":  "SMBus stub driver\n",
			"sys/bus/i2c/devices/11-0050/name": "eeprom",
		})
		got, err := NewLinux(root).Buses(ctx)
		if err != nil || len(got) != 1 || got[0] != (BusInfo{11, "SMBus stub driver"}) {
			t.Errorf("Buses = %+v, %v", got, err)
		}
	})
	t.Run("no I2C", func(t *testing.T) {
		got, err := NewLinux(t.TempDir()).Buses(ctx)
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("Buses = %#v, %v; want an empty list", got, err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := NewLinux("").Buses(ctx); err == nil {
			t.Error("no error")
		}
	})
}

func TestLinuxOpenMissingBus(t *testing.T) {
	_, err := NewLinux("").Open(4242)
	if err == nil {
		t.Fatal("opened /dev/i2c-4242")
	}
	if want := "i2c: bus 4242: open: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("err = %v", err)
	}
	if _, err := NewLinux("").Open(-1); err == nil {
		t.Error("opened bus -1")
	}
}

//go:build linux

package gpio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/warthog618/go-gpiocdev"
)

// simLine finds the gpio-sim line named GPIO<pin> and its sysfs directory
// (/sys/devices/platform/gpio-sim.X/gpiochipY/sim_gpioZ, which has the
// read-only "value" and the writable "pull"). It skips the test unless the
// line is on a gpio-sim chip and is the one l resolves the pin to: this test
// creates nothing and must never drive a real board's pins.
func simLine(t *testing.T, l *Linux, pin int) (chip string, offset int, dir string) {
	t.Helper()
	name := fmt.Sprintf("GPIO%d", pin)
	chip, offset, err := gpiocdev.FindLine(name)
	if err != nil {
		t.Skipf("no line named %s (no gpio-sim chip): %v", name, err)
	}
	matches, _ := filepath.Glob(fmt.Sprintf("/sys/devices/platform/gpio-sim*/%s/sim_gpio%d", chip, offset))
	if len(matches) != 1 {
		t.Skipf("%s is %s line %d, not a gpio-sim line (%d sysfs matches); not touching hardware", name, chip, offset, len(matches))
	}
	st, err := l.State(t.Context(), pin)
	if err != nil {
		t.Fatalf("State(%d): %v", pin, err)
	}
	if st.Chip != chip || st.Line != offset {
		t.Skipf("pin %d resolves to %s line %d, not the gpio-sim line %s/%d; not touching hardware", pin, st.Chip, st.Line, chip, offset)
	}
	return chip, offset, matches[0]
}

func readSysfs(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeSysfs(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLinuxOnGPIOSim runs against the kernel's gpio-sim when a chip with
// lines named GPIO0..GPIO27 exists (the VM harness makes one) and skips
// otherwise.
func TestLinuxOnGPIOSim(t *testing.T) {
	if _, _, err := gpiocdev.FindLine("GPIO17"); err != nil {
		t.Skipf("no line named GPIO17 (no gpio-sim chip): %v", err)
	}
	const consumer = "raspi-mcp-test"
	l, err := NewLinux(consumer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := t.Context()

	chip17, off17, dir17 := simLine(t, l, 17)
	_, _, dir4 := simLine(t, l, 4)
	chip22, off22, _ := simLine(t, l, 22)
	simLine(t, l, 27)
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir4, "pull"), []byte("pull-down"), 0o644) }) // gpio-sim's default

	t.Run("output", func(t *testing.T) {
		st, err := l.Configure(ctx, 17, Output, PullNone, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := readSysfs(t, filepath.Join(dir17, "value")); got != "0" {
			t.Errorf("sim value after Configure(initial 0) = %q", got)
		}
		if err := l.Write(ctx, 17, 1); err != nil {
			t.Fatal(err)
		}
		if got := readSysfs(t, filepath.Join(dir17, "value")); got != "1" {
			t.Errorf("sim value after Write(1) = %q, want 1", got)
		}
		if v, err := l.Read(ctx, 17); err != nil || v != 1 {
			t.Errorf("Read(17) = %d, %v; want 1", v, err)
		}
		st, err = l.State(ctx, 17)
		if err != nil || st.Mode != "output" || st.Value == nil || *st.Value != 1 || st.Consumer != consumer || st.Chip != chip17 || st.Line != off17 {
			t.Errorf("State(17) = %s, %v", show(st), err)
		}
		// The kernel agrees on who holds the line.
		c, err := gpiocdev.NewChip(chip17)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if li, err := c.LineInfo(off17); err != nil || !li.Used || li.Consumer != consumer {
			t.Errorf("kernel line info of %s/%d = %+v, %v", chip17, off17, li, err)
		}
	})

	t.Run("pull", func(t *testing.T) {
		writeSysfs(t, filepath.Join(dir4, "pull"), "pull-up")
		if v, err := l.Read(ctx, 4); err != nil || v != 1 {
			t.Errorf("Read(4) with sim pull-up = %d, %v; want 1", v, err)
		}
		writeSysfs(t, filepath.Join(dir4, "pull"), "pull-down")
		if v, err := l.Read(ctx, 4); err != nil || v != 0 {
			t.Errorf("Read(4) with sim pull-down = %d, %v; want 0", v, err)
		}
		// Read did not keep the line.
		if st, err := l.State(ctx, 4); err != nil || st.Consumer != "" || st.Value != nil {
			t.Errorf("State(4) after Read = %s, %v; want free", show(st), err)
		}
		// Configure's pull reaches the simulated resistor.
		if _, err := l.Configure(ctx, 4, Input, PullUp, 0); err != nil {
			t.Fatal(err)
		}
		if v, err := l.Read(ctx, 4); err != nil || v != 1 {
			t.Errorf("Read(4) configured pull-up = %d, %v; want 1", v, err)
		}
		if got := readSysfs(t, filepath.Join(dir4, "pull")); got != "pull-up" {
			t.Errorf("sim pull after Configure(up) = %q", got)
		}
		if _, err := l.Configure(ctx, 4, Input, PullDown, 0); err != nil {
			t.Fatal(err)
		}
		if v, err := l.Read(ctx, 4); err != nil || v != 0 {
			t.Errorf("Read(4) configured pull-down = %d, %v; want 0", v, err)
		}
	})

	t.Run("busy", func(t *testing.T) {
		other, err := NewLinux("other-consumer")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.Configure(ctx, 27, Output, PullNone, 0); err != nil {
			t.Fatal(err)
		}
		_, err = l.Configure(ctx, 27, Output, PullNone, 1)
		var be *BusyError
		if !errors.Is(err, ErrBusy) || !errors.As(err, &be) || be.Consumer != "other-consumer" || !strings.Contains(err.Error(), `held by "other-consumer"`) {
			t.Errorf("Configure(27) held by other-consumer: %v", err)
		}
		if err := l.Write(ctx, 27, 1); !errors.Is(err, ErrBusy) {
			t.Errorf("Write(27) held by other-consumer: %v", err)
		}
		if st, err := l.State(ctx, 27); err != nil || st.Consumer != "other-consumer" || st.Value != nil {
			t.Errorf("State(27) = %s, %v", show(st), err)
		}
		if _, err := other.Configure(ctx, 17, Input, PullNone, 0); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `"`+consumer+`"`) {
			t.Errorf("other.Configure(17) held by us: %v", err)
		}

		// A request straight through the kernel, as another program makes it.
		raw, err := gpiocdev.RequestLine(chip22, off22, gpiocdev.WithConsumer("third-party"), gpiocdev.AsInput)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := l.Read(ctx, 22); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `gpio: pin 22: line busy: held by "third-party"`) {
			t.Errorf("Read(22) held by third-party: %v", err)
		}
	})

	t.Run("close", func(t *testing.T) {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Released, the sim line falls back to its pull (pull-down): this is
		// why Linux holds outputs instead of setting and letting go.
		if got := readSysfs(t, filepath.Join(dir17, "value")); got != "0" {
			t.Errorf("sim value after Close = %q, want 0", got)
		}
		other, err := NewLinux("other-consumer")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if st, err := other.State(ctx, 17); err != nil || st.Consumer != "" {
			t.Errorf("State(17) after Close = %s, %v; want free", show(st), err)
		}
		if _, err := other.Configure(ctx, 17, Output, PullNone, 1); err != nil {
			t.Errorf("another consumer cannot take pin 17 after Close: %v", err)
		}
	})
}

func TestToLineInfo(t *testing.T) {
	for _, tc := range []struct {
		in   gpiocdev.LineInfo
		want lineInfo
	}{
		{gpiocdev.LineInfo{}, lineInfo{Mode: Unknown, Pull: Unknown}},
		{gpiocdev.LineInfo{Used: true, Consumer: "x", Config: gpiocdev.LineConfig{Direction: gpiocdev.LineDirectionOutput, Bias: gpiocdev.LineBiasDisabled}},
			lineInfo{Used: true, Consumer: "x", Mode: "output", Pull: "none"}},
		{gpiocdev.LineInfo{Config: gpiocdev.LineConfig{Direction: gpiocdev.LineDirectionInput, Bias: gpiocdev.LineBiasPullUp}},
			lineInfo{Mode: "input", Pull: "up"}},
		{gpiocdev.LineInfo{Config: gpiocdev.LineConfig{Direction: gpiocdev.LineDirectionInput, Bias: gpiocdev.LineBiasPullDown}},
			lineInfo{Mode: "input", Pull: "down"}},
	} {
		if got := toLineInfo(tc.in); got != tc.want {
			t.Errorf("toLineInfo(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestConfigOptions(t *testing.T) {
	for _, tc := range []struct {
		cfg  lineConfig
		want []option
	}{
		{lineConfig{Mode: Input}, []option{gpiocdev.AsInput}}, // bias as is
		{lineConfig{Mode: Input, Pull: PullUp}, []option{gpiocdev.AsInput, gpiocdev.WithPullUp}},
		{lineConfig{Mode: Input, Pull: PullDown}, []option{gpiocdev.AsInput, gpiocdev.WithPullDown}},
		{lineConfig{Mode: Output, Pull: PullNone, Initial: 1}, []option{gpiocdev.AsOutput(1), gpiocdev.WithBiasDisabled}},
		{lineConfig{Mode: Output, Pull: PullNone}, []option{gpiocdev.AsOutput(0), gpiocdev.WithBiasDisabled}},
	} {
		if got := configOptions(tc.cfg); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("configOptions(%+v) = %#v, want %#v", tc.cfg, got, tc.want)
		}
	}
}

package pwm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The device uevents of the PWM blocks, as the kernel writes them.
const (
	ueventPi4      = "DRIVER=bcm2835-pwm\nOF_NAME=pwm\nOF_FULLNAME=/soc/pwm@7e20c000\nOF_COMPATIBLE_0=brcm,bcm2835-pwm\nOF_COMPATIBLE_N=1\nMODALIAS=of:NpwmT(null)Cbrcm,bcm2835-pwm\n"
	ueventPi4Audio = "DRIVER=bcm2835-pwm\nOF_NAME=pwm\nOF_FULLNAME=/soc/pwm@7e20c800\nOF_COMPATIBLE_0=brcm,bcm2835-pwm\nOF_COMPATIBLE_N=1\n"
	ueventRP1PWM0  = "DRIVER=pwm-rp1\nOF_NAME=pwm\nOF_FULLNAME=/axi/pcie@120000/rp1/pwm@98000\nOF_COMPATIBLE_0=raspberrypi,rp1-pwm\nOF_COMPATIBLE_N=1\n"
	ueventRP1Fan   = "DRIVER=pwm-rp1\nOF_NAME=pwm\nOF_FULLNAME=/axi/pcie@120000/rp1/pwm@9c000\nOF_COMPATIBLE_0=raspberrypi,rp1-pwm\nOF_COMPATIBLE_N=1\n"
)

// fixture is a /sys/class/pwm tree in a temporary directory, with a Sysfs
// whose writes are logged and checked like the kernel checks them.
type fixture struct {
	t      *testing.T
	root   string
	s      *Sysfs
	writes []string // "pwmchip0/pwm0/period=1000000", relative to /sys/class/pwm
	fail   string   // a write to a path ending in this fails with EIO
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, root: t.TempDir()}
	f.s = NewSysfs(f.root)
	f.s.write = f.write
	return f
}

func (f *fixture) class() string { return filepath.Join(f.root, "sys", "class", "pwm") }

func (f *fixture) file(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.class(), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.class(), rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

// chip adds pwmchipN with its device uevent.
func (f *fixture) chip(name, uevent string, npwm int) {
	f.file(name+"/export", "")
	f.file(name+"/unexport", "")
	f.file(name+"/npwm", fmt.Sprintln(npwm))
	f.file(name+"/device/uevent", uevent)
}

// channel adds an exported channel with the given setting, as the kernel
// shows it (values end in a newline).
func (f *fixture) channel(chip string, n int, period, duty int64, enable int) {
	d := fmt.Sprintf("%s/pwm%d/", chip, n)
	f.file(d+"period", fmt.Sprintln(period))
	f.file(d+"duty_cycle", fmt.Sprintln(duty))
	f.file(d+"enable", fmt.Sprintln(enable))
	f.file(d+"polarity", "normal\n")
}

// write logs the write, applies the kernel's checks (duty never above the
// period, no enabling without a period), performs it through the real
// writeAttr, and emulates export creating pwmM/.
func (f *fixture) write(path, value string) error {
	rel, err := filepath.Rel(f.class(), path)
	if err != nil {
		return err
	}
	f.writes = append(f.writes, rel+"="+value)
	if f.fail != "" && strings.HasSuffix(rel, f.fail) {
		return syscall.EIO
	}
	dir, attr := filepath.Dir(path), filepath.Base(path)
	num := func(a string) int64 {
		b, _ := os.ReadFile(filepath.Join(dir, a))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	v, _ := strconv.ParseInt(value, 10, 64)
	switch attr {
	case "period":
		if num("duty_cycle") > v {
			return syscall.EINVAL
		}
	case "duty_cycle":
		if v > num("period") {
			return syscall.EINVAL
		}
	case "enable":
		if v == 1 && num("period") == 0 {
			return syscall.EINVAL
		}
	case "export":
		if err := writeAttr(path, value); err != nil {
			return err
		}
		chip, _ := filepath.Rel(f.class(), dir)
		f.channel(chip, int(v), 0, 0, 0)
		return nil
	}
	return writeAttr(path, value)
}

func (f *fixture) wantWrites(want ...string) {
	f.t.Helper()
	if !slices.Equal(f.writes, want) {
		f.t.Errorf("writes\n got %q\nwant %q", f.writes, want)
	}
	f.writes = nil
}

func (f *fixture) wantFile(rel, want string) {
	f.t.Helper()
	if got := f.read(rel); got != want {
		f.t.Errorf("%s = %q, want %q", rel, got, want)
	}
}

func wantState(t *testing.T, got, want State) {
	t.Helper()
	if got != want {
		t.Errorf("state\n got %+v\nwant %+v", got, want)
	}
}

func TestSysfsSetExportsAndEnables(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	st, err := f.s.Set(t.Context(), 18, 1000, 25)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 18, FrequencyHz: 1000, DutyCyclePercent: 25, Enabled: true, Chip: "pwmchip0", Channel: 0})
	f.wantWrites("pwmchip0/export=0", "pwmchip0/pwm0/period=1000000", "pwmchip0/pwm0/duty_cycle=250000", "pwmchip0/pwm0/enable=1")
	f.wantFile("pwmchip0/export", "0")
	f.wantFile("pwmchip0/pwm0/period", "1000000")
	f.wantFile("pwmchip0/pwm0/duty_cycle", "250000")
	f.wantFile("pwmchip0/pwm0/enable", "1")

	// GPIO19 is channel 1 of the same chip.
	st, err = f.s.Set(t.Context(), 19, 50, 7.5)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 19, FrequencyHz: 50, DutyCyclePercent: 7.5, Enabled: true, Chip: "pwmchip0", Channel: 1})
	f.wantWrites("pwmchip0/export=1", "pwmchip0/pwm1/period=20000000", "pwmchip0/pwm1/duty_cycle=1500000", "pwmchip0/pwm1/enable=1")
}

func TestSysfsWriteOrder(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	f.channel("pwmchip0", 1, 1000000, 800000, 1) // 1 kHz, 80 %, running

	// 10 kHz: the new period (100000) is shorter than the current duty
	// (800000), so the duty goes first.
	st, err := f.s.Set(t.Context(), 13, 10000, 50)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 13, FrequencyHz: 10000, DutyCyclePercent: 50, Enabled: true, Chip: "pwmchip0", Channel: 1})
	f.wantWrites("pwmchip0/pwm1/duty_cycle=50000", "pwmchip0/pwm1/period=100000")

	// Back to 100 Hz: period first, then the longer duty.
	if _, err := f.s.Set(t.Context(), 13, 100, 50); err != nil {
		t.Fatal(err)
	}
	f.wantWrites("pwmchip0/pwm1/period=10000000", "pwmchip0/pwm1/duty_cycle=5000000")

	// Shorter period but still above the current duty: period first.
	if _, err := f.s.Set(t.Context(), 13, 150, 100); err != nil {
		t.Fatal(err)
	}
	f.wantWrites("pwmchip0/pwm1/period=6666667", "pwmchip0/pwm1/duty_cycle=6666667")
	f.wantFile("pwmchip0/pwm1/period", "6666667")
	f.wantFile("pwmchip0/pwm1/duty_cycle", "6666667")

	// Duty 0 keeps the channel enabled, driving low.
	st, err = f.s.Set(t.Context(), 13, 150, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 13, FrequencyHz: 150, DutyCyclePercent: 0, Enabled: true, Chip: "pwmchip0", Channel: 1})
	f.wantWrites("pwmchip0/pwm1/period=6666667", "pwmchip0/pwm1/duty_cycle=0")
}

func TestSysfsEveryOrderIsAccepted(t *testing.T) {
	// Walk through settings in both directions; the fixture refuses any
	// write the kernel would refuse.
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	freqs := []float64{1, 50000, 3, 25000, 1000, 1, 50000}
	duties := []float64{100, 0, 100, 50, 99.9, 100, 100}
	for i := range freqs {
		st, err := f.s.Set(t.Context(), 12, freqs[i], duties[i])
		if err != nil {
			t.Fatalf("Set(12, %v Hz, %v%%) after step %d: %v", freqs[i], duties[i], i, err)
		}
		if st.FrequencyHz != freqs[i] || st.DutyCyclePercent != duties[i] {
			t.Errorf("Set(12, %v, %v) = %+v", freqs[i], duties[i], st)
		}
	}
}

func TestSysfsPi5(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventRP1Fan, 4) // the fan's PWM1 comes first
	f.chip("pwmchip2", ueventRP1PWM0, 4)
	for _, tc := range []struct{ pin, ch int }{{18, 2}, {19, 3}, {12, 0}, {13, 1}} {
		st, err := f.s.Set(t.Context(), tc.pin, 25000, 40)
		if err != nil {
			t.Fatal(err)
		}
		wantState(t, st, State{Pin: tc.pin, FrequencyHz: 25000, DutyCyclePercent: 40, Enabled: true, Chip: "pwmchip2", Channel: tc.ch})
		f.wantWrites(fmt.Sprintf("pwmchip2/export=%d", tc.ch), fmt.Sprintf("pwmchip2/pwm%d/period=40000", tc.ch),
			fmt.Sprintf("pwmchip2/pwm%d/duty_cycle=16000", tc.ch), fmt.Sprintf("pwmchip2/pwm%d/enable=1", tc.ch))
	}
}

func TestSysfsIdentity(t *testing.T) {
	for _, tc := range []struct {
		name, uevent string
		found        bool
	}{
		{"pi4", ueventPi4, true},
		{"mainline rp1 name", strings.Replace(ueventRP1PWM0, "pwm@98000", "pwm@40098000", 1), true},
		{"no node name: compatible alone", "OF_COMPATIBLE_0=brcm,bcm2835-pwm\nOF_COMPATIBLE_N=1\n", true},
		{"second compatible", "OF_FULLNAME=/soc/pwm@7e20c000\nOF_COMPATIBLE_0=brcm,bcm2711-pwm\nOF_COMPATIBLE_1=brcm,bcm2835-pwm\nOF_COMPATIBLE_N=2\n", true},
		{"bcm2711 audio block", ueventPi4Audio, false},
		{"rp1 fan block", ueventRP1Fan, false},
		{"other driver", "DRIVER=pwm-sifive\nOF_FULLNAME=/soc/pwm@10020000\nOF_COMPATIBLE_0=sifive,pwm0\n", false},
		{"no uevent", "", false},
	} {
		f := newFixture(t)
		f.chip("pwmchip3", tc.uevent, 2)
		if tc.uevent == "" {
			os.Remove(filepath.Join(f.class(), "pwmchip3", "device", "uevent"))
		}
		_, err := f.s.Get(t.Context(), 18)
		if tc.found && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.found && !errors.Is(err, ErrNoPWM) {
			t.Errorf("%s: %v, want ErrNoPWM", tc.name, err)
		}
	}
}

func TestSysfsChipOrder(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip10", ueventPi4, 2)
	f.chip("pwmchip2", ueventPi4, 2)
	f.chip("pwmchipX", ueventPi4, 2) // not a chip name
	st, err := f.s.Get(t.Context(), 12)
	if err != nil || st.Chip != "pwmchip2" {
		t.Errorf("Get = %+v, %v; want pwmchip2 (numeric order)", st, err)
	}
}

func TestSysfsNoPWM(t *testing.T) {
	hint := `add the line "dtoverlay=pwm-2chan,pin=18,func=2,pin2=19,func2=2" to /boot/firmware/config.txt and reboot`
	check := func(name string, f *fixture, detail string) {
		t.Helper()
		_, serr := f.s.Set(t.Context(), 18, 1000, 50)
		_, gerr := f.s.Get(t.Context(), 18)
		derr := f.s.Disable(t.Context(), 18)
		for i, err := range []error{serr, gerr, derr} {
			if !errors.Is(err, ErrNoPWM) || !strings.HasPrefix(err.Error(), "pwm: pin 18: no PWM controller present: "+hint) || !strings.Contains(err.Error(), detail) {
				t.Errorf("%s, call %d: %v", name, i, err)
			}
		}
		f.wantWrites()
	}
	f := newFixture(t)
	check("no /sys/class/pwm", f, "(no pwmchip in "+f.class()+")")
	f.file("README", "") // the class directory exists, with no chip
	check("empty class", f, "(no pwmchip in ")
	f.chip("pwmchip0", ueventRP1Fan, 4)
	check("only the fan", f, "(none of pwmchip0 (raspberrypi,rp1-pwm /axi/pcie@120000/rp1/pwm@9c000) reaches it)")
	if !strings.Contains(ErrNoPWM.Error(), EnableHint) {
		t.Errorf("ErrNoPWM = %q lacks the hint", ErrNoPWM)
	}
}

func TestSysfsNotPWMPin(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	for _, pin := range []int{17, 0, -1, 40, 53} {
		_, serr := f.s.Set(t.Context(), pin, 1000, 50)
		_, gerr := f.s.Get(t.Context(), pin)
		derr := f.s.Disable(t.Context(), pin)
		want := fmt.Sprintf("pwm: pin %d: no hardware PWM channel (PWM pins: 12, 13, 18, 19)", pin)
		for i, err := range []error{serr, gerr, derr} {
			if !errors.Is(err, ErrNotPWMPin) || err.Error() != want {
				t.Errorf("pin %d call %d: %v, want %q", pin, i, err, want)
			}
		}
	}
	f.wantWrites()
}

func TestSysfsBadArguments(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	for _, tc := range []struct {
		freq, duty float64
		want       string
	}{
		{0, 50, "pwm: pin 18: frequency 0 Hz is outside 1..50000"},
		{0.5, 50, "pwm: pin 18: frequency 0.5 Hz is outside 1..50000"},
		{50001, 50, "pwm: pin 18: frequency 50001 Hz is outside 1..50000"},
		{math.NaN(), 50, "pwm: pin 18: frequency NaN Hz is outside 1..50000"},
		{math.Inf(1), 50, "pwm: pin 18: frequency +Inf Hz is outside 1..50000"},
		{1000, -1, "pwm: pin 18: duty cycle -1% is outside 0..100"},
		{1000, 100.5, "pwm: pin 18: duty cycle 100.5% is outside 0..100"},
		{1000, math.NaN(), "pwm: pin 18: duty cycle NaN% is outside 0..100"},
	} {
		if _, err := f.s.Set(t.Context(), 18, tc.freq, tc.duty); err == nil || err.Error() != tc.want {
			t.Errorf("Set(18, %v, %v) = %v, want %q", tc.freq, tc.duty, err, tc.want)
		}
	}
	f.wantWrites()
}

func TestSysfsGet(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	st, err := f.s.Get(t.Context(), 18)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 18, Chip: "pwmchip0", Channel: 0})
	if exists(filepath.Join(f.class(), "pwmchip0", "pwm0")) {
		t.Error("Get exported the channel")
	}
	f.channel("pwmchip0", 0, 333333333, 111111111, 0)
	st, err = f.s.Get(t.Context(), 12) // shares channel 0 with 18
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 12, FrequencyHz: 3, DutyCyclePercent: 33.333, Enabled: false, Chip: "pwmchip0", Channel: 0})
	f.wantWrites()

	f.file("pwmchip0/pwm0/period", "garbage\n")
	if _, err := f.s.Get(t.Context(), 12); err == nil || !strings.HasPrefix(err.Error(), "pwm: pin 12: "+f.class()+"/pwmchip0/pwm0/period") {
		t.Errorf("Get with an unreadable period: %v", err)
	}
}

func TestSysfsDisable(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	if err := f.s.Disable(t.Context(), 18); err != nil {
		t.Fatal(err)
	}
	f.wantWrites() // never exported: nothing to do

	if _, err := f.s.Set(t.Context(), 18, 1000, 50); err != nil {
		t.Fatal(err)
	}
	f.wantWrites("pwmchip0/export=0", "pwmchip0/pwm0/period=1000000", "pwmchip0/pwm0/duty_cycle=500000", "pwmchip0/pwm0/enable=1")
	if err := f.s.Disable(t.Context(), 18); err != nil {
		t.Fatal(err)
	}
	f.wantWrites("pwmchip0/pwm0/enable=0")
	f.wantFile("pwmchip0/pwm0/enable", "0")
	st, err := f.s.Get(t.Context(), 18)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, State{Pin: 18, FrequencyHz: 1000, DutyCyclePercent: 50, Enabled: false, Chip: "pwmchip0", Channel: 0})
	if err := f.s.Disable(t.Context(), 18); err != nil {
		t.Fatal(err)
	}
	f.wantWrites() // already disabled

	// Set enables it again.
	if _, err := f.s.Set(t.Context(), 18, 1000, 50); err != nil {
		t.Fatal(err)
	}
	f.wantWrites("pwmchip0/pwm0/period=1000000", "pwmchip0/pwm0/duty_cycle=500000", "pwmchip0/pwm0/enable=1")
}

func TestSysfsWriteErrors(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	f.fail = "/period"
	_, err := f.s.Set(t.Context(), 18, 1000, 50)
	want := "pwm: pin 18: write 1000000 to " + f.class() + "/pwmchip0/pwm0/period: input/output error"
	if err == nil || err.Error() != want || !errors.Is(err, syscall.EIO) {
		t.Errorf("Set = %v, want %q", err, want)
	}
	f.wantWrites("pwmchip0/export=0", "pwmchip0/pwm0/period=1000000") // stopped at the failure

	// An export that creates nothing.
	f = newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	f.s.write = writeAttr
	_, err = f.s.Set(t.Context(), 19, 1000, 50)
	if err == nil || !strings.Contains(err.Error(), "pwm: pin 19: exported channel 1 of pwmchip0 but ") {
		t.Errorf("Set with a dead export = %v", err)
	}

	// The real writeAttr refuses to create files and reports the bare cause.
	err = writeAttr(filepath.Join(t.TempDir(), "missing"), "1")
	if !errors.Is(err, syscall.ENOENT) || err.Error() != "no such file or directory" {
		t.Errorf("writeAttr on a missing file = %v", err)
	}
}

func TestSysfsCanceledContext(t *testing.T) {
	f := newFixture(t)
	f.chip("pwmchip0", ueventPi4, 2)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, serr := f.s.Set(ctx, 18, 1000, 50)
	_, gerr := f.s.Get(ctx, 18)
	derr := f.s.Disable(ctx, 18)
	for i, err := range []error{serr, gerr, derr} {
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("call %d: %v", i, err)
		}
	}
	f.wantWrites()
}

func TestPins(t *testing.T) {
	if got := Pins(); !slices.Equal(got, []int{12, 13, 18, 19}) {
		t.Errorf("Pins() = %v", got)
	}
}

func TestNanos(t *testing.T) {
	for _, tc := range []struct {
		freq, duty   float64
		period, dns  int64
		backF, backD float64
	}{
		{1, 50, 1e9, 5e8, 1, 50},
		{50000, 33, 20000, 6600, 50000, 33},
		{3, 100, 333333333, 333333333, 3, 100},
		{7, 12.345, 142857143, 17635714, 7, 12.345},
	} {
		p, d := nanos(tc.freq, tc.duty)
		if p != tc.period || d != tc.dns {
			t.Errorf("nanos(%v, %v) = %d, %d; want %d, %d", tc.freq, tc.duty, p, d, tc.period, tc.dns)
		}
		st := stateOf(18, "pwmchip0", 0, p, d, true)
		if st.FrequencyHz != tc.backF || st.DutyCyclePercent != tc.backD {
			t.Errorf("stateOf(%d, %d) = %v Hz, %v%%; want %v, %v", p, d, st.FrequencyHz, st.DutyCyclePercent, tc.backF, tc.backD)
		}
	}
}

package pwm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Sysfs is the Controller over the kernel's PWM class:
// /sys/class/pwm/pwmchipN/{export, pwmM/{period, duty_cycle, enable}}.
// It finds the pwmchip of a pin on every call, by the device tree identity
// in pwmchipN/device/uevent, since the chip number differs between boards
// and kernels (and overlays can add chips at run time).
type Sysfs struct {
	root string
	// write stores one attribute. It is the only way Sysfs changes
	// anything, so tests can record the order of writes and emulate the
	// kernel's reaction to them (export creating pwmM/).
	write func(path, value string) error

	mu sync.Mutex // one pin's multi-file update at a time
}

var _ Controller = (*Sysfs)(nil)

// NewSysfs returns a Sysfs under root: "/" on a board, a fixture directory
// in tests.
func NewSysfs(root string) *Sysfs {
	return &Sysfs{root: root, write: writeAttr}
}

// channel is where a pin's PWM lives.
type channel struct {
	pin     int
	chip    string // "pwmchip0"
	chipDir string
	num     int
}

func (c channel) dir() string { return filepath.Join(c.chipDir, "pwm"+strconv.Itoa(c.num)) }

// Set programs and enables the pin's channel, exporting it first if needed.
//
// The kernel rejects a duty cycle longer than the period at every step, so
// the order of the two writes depends on the current setting: when the new
// period is shorter than the current duty, the duty goes first (it is then
// within both the old and the new period), otherwise the period does.
func (s *Sysfs) Set(ctx context.Context, pin int, freqHz, dutyPercent float64) (State, error) {
	if err := checkSet(pin, freqHz, dutyPercent); err != nil {
		return State{}, err
	}
	if err := ctxErr(ctx, pin, "set"); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(pin)
	if err != nil {
		return State{}, err
	}
	if err := s.export(c); err != nil {
		return State{}, err
	}
	cur, err := s.read(c)
	if err != nil {
		return State{}, err
	}
	period, duty := nanos(freqHz, dutyPercent)
	writes := [][2]string{{"period", strconv.FormatInt(period, 10)}, {"duty_cycle", strconv.FormatInt(duty, 10)}}
	if period < cur.duty {
		writes[0], writes[1] = writes[1], writes[0]
	}
	if !cur.enabled {
		writes = append(writes, [2]string{"enable", "1"})
	}
	for _, w := range writes {
		if err := s.store(c, w[0], w[1]); err != nil {
			return State{}, err
		}
	}
	return s.state(c)
}

// Get reads the pin's channel. A channel not exported reads as disabled
// with no frequency; Get does not export it.
func (s *Sysfs) Get(ctx context.Context, pin int) (State, error) {
	if !isPWMPin(pin) {
		return State{}, notPWMPin(pin)
	}
	if err := ctxErr(ctx, pin, "get"); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(pin)
	if err != nil {
		return State{}, err
	}
	return s.state(c)
}

// Disable writes 0 to the channel's enable if it is enabled. The channel
// stays exported, so its period and duty remain visible to Get.
func (s *Sysfs) Disable(ctx context.Context, pin int) error {
	if !isPWMPin(pin) {
		return notPWMPin(pin)
	}
	if err := ctxErr(ctx, pin, "disable"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.find(pin)
	if err != nil {
		return err
	}
	if !exists(c.dir()) {
		return nil
	}
	cur, err := s.read(c)
	if err != nil || !cur.enabled {
		return err
	}
	return s.store(c, "enable", "0")
}

// find locates the pwmchip and channel of a PWM pin: the first chip, in
// numeric order, that is a known controller reaching the pin.
func (s *Sysfs) find(pin int) (channel, error) {
	class := filepath.Join(s.root, "sys", "class", "pwm")
	entries, err := os.ReadDir(class)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return channel{}, fmt.Errorf("pwm: pin %d: %w", pin, err)
	}
	var chips []string
	for _, e := range entries {
		if _, ok := chipNumber(e.Name()); ok {
			chips = append(chips, e.Name())
		}
	}
	slices.SortFunc(chips, func(a, b string) int {
		na, _ := chipNumber(a)
		nb, _ := chipNumber(b)
		return na - nb
	})
	var seen []string
	for _, chip := range chips {
		dir := filepath.Join(class, chip)
		id := readIdentity(filepath.Join(dir, "device", "uevent"))
		seen = append(seen, chip+" "+id.String())
		for _, ctl := range controllers() {
			num, ok := ctl.channels[pin]
			if ok && id.is(ctl) {
				return channel{pin: pin, chip: chip, chipDir: dir, num: num}, nil
			}
		}
	}
	if len(seen) == 0 {
		return channel{}, fmt.Errorf("pwm: pin %d: %w (no pwmchip in %s)", pin, ErrNoPWM, class)
	}
	return channel{}, fmt.Errorf("pwm: pin %d: %w (none of %s reaches it)", pin, ErrNoPWM, strings.Join(seen, ", "))
}

// chipNumber parses "pwmchipN".
func chipNumber(name string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(name, "pwmchip"))
	return n, err == nil && strings.HasPrefix(name, "pwmchip") && n >= 0
}

// identity is a pwmchip's device tree identity, from its device's uevent
// (OF_COMPATIBLE_n and OF_FULLNAME, which the kernel puts there for every
// device tree platform device).
type identity struct {
	compatible []string
	fullname   string // "/soc/pwm@7e20c000"; "" if absent
}

func readIdentity(ueventPath string) identity {
	var id identity
	b, err := os.ReadFile(ueventPath)
	if err != nil {
		return id
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		switch {
		case !ok:
		case k == "OF_FULLNAME":
			id.fullname = v
		case strings.HasPrefix(k, "OF_COMPATIBLE_") && k != "OF_COMPATIBLE_N":
			id.compatible = append(id.compatible, v)
		}
	}
	return id
}

// is reports whether the chip is ctl: a compatible matches and, when the
// node name is known, its unit address ends with ctl.unit.
func (id identity) is(ctl controller) bool {
	if !slices.Contains(id.compatible, ctl.compatible) {
		return false
	}
	if id.fullname == "" {
		return true
	}
	_, unit, _ := strings.Cut(path.Base(id.fullname), "@")
	return strings.HasSuffix(unit, ctl.unit)
}

func (id identity) String() string {
	if len(id.compatible) == 0 {
		return "(unknown device)"
	}
	s := "(" + strings.Join(id.compatible, ",")
	if id.fullname != "" {
		s += " " + id.fullname
	}
	return s + ")"
}

// export makes pwmM/ appear. The kernel creates it before the write to
// export returns.
func (s *Sysfs) export(c channel) error {
	if exists(c.dir()) {
		return nil
	}
	p := filepath.Join(c.chipDir, "export")
	v := strconv.Itoa(c.num)
	if err := s.write(p, v); err != nil {
		return fmt.Errorf("pwm: pin %d: write %s to %s: %w", c.pin, v, p, err)
	}
	if !exists(c.dir()) {
		return fmt.Errorf("pwm: pin %d: exported channel %d of %s but %s did not appear", c.pin, c.num, c.chip, c.dir())
	}
	return nil
}

// current is a channel's setting as sysfs shows it.
type current struct {
	period, duty int64
	enabled      bool
}

func (s *Sysfs) read(c channel) (current, error) {
	var cur current
	var err error
	if cur.period, err = readInt(c, "period"); err != nil {
		return cur, err
	}
	if cur.duty, err = readInt(c, "duty_cycle"); err != nil {
		return cur, err
	}
	en, err := readInt(c, "enable")
	cur.enabled = en == 1
	return cur, err
}

func (s *Sysfs) state(c channel) (State, error) {
	if !exists(c.dir()) {
		return stateOf(c.pin, c.chip, c.num, 0, 0, false), nil
	}
	cur, err := s.read(c)
	if err != nil {
		return State{}, err
	}
	return stateOf(c.pin, c.chip, c.num, cur.period, cur.duty, cur.enabled), nil
}

func readInt(c channel, attr string) (int64, error) {
	p := filepath.Join(c.dir(), attr)
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("pwm: pin %d: %w", c.pin, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("pwm: pin %d: %s: %w", c.pin, p, err)
	}
	return n, nil
}

// store writes one attribute of the channel.
func (s *Sysfs) store(c channel, attr, value string) error {
	p := filepath.Join(c.dir(), attr)
	if err := s.write(p, value); err != nil {
		return fmt.Errorf("pwm: pin %d: write %s to %s: %w", c.pin, value, p, err)
	}
	return nil
}

// writeAttr writes a sysfs attribute in one write(2), without creating or
// appending: a missing attribute is an error, not a new file. The error is
// the bare cause (EINVAL, ENOENT...): callers name the path and value.
func writeAttr(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

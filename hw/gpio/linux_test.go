package gpio

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeKernel is a backend that behaves like the GPIO character device: one
// requester per line, line info readable by anyone, the bias reported only
// while a line is requested (the kernel clears it on release) but kept by
// the simulated hardware, as on gpio-sim.
type fakeKernel struct {
	mu       sync.Mutex
	chips    []chipLines
	lines    map[lineRef]*fakeLine
	scans    int
	requests []string // "chip/offset consumer mode pull" per request
	closeErr error    // returned by the next close
	reqErr   error    // returned by the next request instead of taking the line
}

// fakeLine is one line's kernel state.
type fakeLine struct {
	used      bool
	consumer  string
	mode      string
	bias      string // as the kernel reports it
	hwPull    Pull   // what the resistor does
	external  int    // Floating, 0 or 1
	value     int    // driven, while output
	handle    *fakeHandle
	reconfigs int
}

func newFakeKernel(chips ...chipLines) *fakeKernel {
	k := &fakeKernel{lines: map[lineRef]*fakeLine{}}
	k.setChips(chips...)
	return k
}

func (k *fakeKernel) setChips(chips ...chipLines) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.chips = chips
	for _, c := range chips {
		for off := range c.Lines {
			ref := lineRef{Chip: c.Name, Offset: off}
			if k.lines[ref] == nil {
				k.lines[ref] = &fakeLine{mode: string(Input), bias: Unknown, hwPull: PullNone, external: Floating}
			}
		}
	}
}

// line returns the state of a line by chip and offset; the label is not
// part of the key, as in the kernel.
func (k *fakeKernel) line(chip string, off int) *fakeLine {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lines[lineRef{Chip: chip, Offset: off}]
}

func (k *fakeKernel) scan() ([]chipLines, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.scans++
	return slices.Clone(k.chips), nil
}

func (k *fakeKernel) info(ref lineRef) (lineInfo, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.lines[lineRef{Chip: ref.Chip, Offset: ref.Offset}]
	if l == nil {
		return lineInfo{}, errors.New("invalid offset")
	}
	return lineInfo{Used: l.used, Consumer: l.consumer, Mode: l.mode, Pull: l.bias}, nil
}

func (k *fakeKernel) request(ref lineRef, consumer string, cfg lineConfig) (requestedLine, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.requests = append(k.requests, fmt.Sprintf("%s/%d %s %s %q", ref.Chip, ref.Offset, consumer, cfg.Mode, cfg.Pull))
	if err := k.reqErr; err != nil {
		k.reqErr = nil
		return nil, err
	}
	l := k.lines[lineRef{Chip: ref.Chip, Offset: ref.Offset}]
	if l == nil {
		return nil, errors.New("invalid offset")
	}
	if l.used {
		return nil, ErrBusy
	}
	l.used, l.consumer = true, consumer
	l.apply(cfg)
	l.handle = &fakeHandle{k: k, l: l}
	return l.handle, nil
}

// apply is a request's or reconfiguration's effect on the line.
func (l *fakeLine) apply(cfg lineConfig) {
	l.mode = string(cfg.Mode)
	if cfg.Mode == Output {
		l.value = cfg.Initial
	}
	l.bias = Unknown
	if cfg.Pull != "" {
		l.bias, l.hwPull = string(cfg.Pull), cfg.Pull
	}
}

// hold makes another process hold the line.
func (k *fakeKernel) hold(chip string, off int, consumer string) {
	l := k.line(chip, off)
	k.mu.Lock()
	defer k.mu.Unlock()
	l.used, l.consumer = true, consumer
}

type fakeHandle struct {
	k      *fakeKernel
	l      *fakeLine
	closed bool
}

func (h *fakeHandle) value() (int, error) {
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	if h.closed {
		return 0, errors.New("already closed")
	}
	switch {
	case h.l.mode == string(Output):
		return h.l.value, nil
	case h.l.external != Floating:
		return h.l.external, nil
	case h.l.hwPull == PullUp:
		return 1, nil
	}
	return 0, nil
}

func (h *fakeHandle) setValue(v int) error {
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	if h.closed || h.l.mode != string(Output) {
		return errors.New("permission denied")
	}
	h.l.value = v
	return nil
}

func (h *fakeHandle) reconfigure(cfg lineConfig) error {
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	if h.closed {
		return errors.New("already closed")
	}
	h.l.apply(cfg)
	h.l.reconfigs++
	return nil
}

func (h *fakeHandle) close() error {
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	if h.closed {
		return errors.New("already closed")
	}
	h.closed = true
	h.l.used, h.l.consumer, h.l.bias, h.l.handle = false, "", Unknown, nil
	if err := h.k.closeErr; err != nil {
		h.k.closeErr = nil
		return err
	}
	return nil
}

// Chip layouts as the kernel names them.

func namedLines(n int, name func(int) string) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = name(i)
	}
	return lines
}

func gpioNames(n int) []string {
	return namedLines(n, func(i int) string { return fmt.Sprintf("GPIO%d", i) })
}

// pi4Legacy is gpiochip0 of a Pi 4 on a kernel with the schematic names
// (bcm2711-rpi-4-b.dts).
func pi4Legacy() chipLines {
	header := []string{"ID_SDA", "ID_SCL", "SDA1", "SCL1", "GPIO_GCLK", "GPIO5", "GPIO6", "SPI_CE1_N",
		"SPI_CE0_N", "SPI_MISO", "SPI_MOSI", "SPI_SCLK", "GPIO12", "GPIO13", "TXD1", "RXD1"}
	for i := 16; i <= 27; i++ {
		header = append(header, fmt.Sprintf("GPIO%d", i))
	}
	rest := []string{"RGMII_MDIO", "RGMIO_MDC", "CTS0", "RTS0", "TXD0", "RXD0", "SD1_CLK", "SD1_CMD"}
	lines := append(header, rest...)
	for len(lines) < 58 {
		lines = append(lines, "")
	}
	return chipLines{Name: "gpiochip0", Label: "pinctrl-bcm2711", Lines: lines}
}

// pi5 is the Pi 5's chips: brcmstb GPIOs first, the header on pinctrl-rp1.
func pi5() []chipLines {
	rp1 := append([]string{"ID_SDA", "ID_SCL"}, gpioNames(28)[2:]...)
	rp1 = append(rp1, "PCIE_RP1_WAKE", "FAN_TACH", "HOST_SDA", "HOST_SCL")
	return []chipLines{
		{Name: "gpiochip0", Label: "gpio-brcmstb@107d508500", Lines: []string{"", "2712_BOOT_CS_N", "2712_BOOT_MISO", "WL_ON", "BT_ON"}},
		{Name: "gpiochip1", Label: "gpio-brcmstb@107d508520", Lines: []string{"HDMI0_SCL", "HDMI0_SDA"}},
		{Name: "gpiochip4", Label: "pinctrl-rp1", Lines: rp1},
	}
}

func TestLineMapLookup(t *testing.T) {
	pi3 := pi4Legacy()
	pi3.Label = "pinctrl-bcm2835"
	pi3.Lines = slices.Clone(pi3.Lines)
	pi3.Lines[14], pi3.Lines[15] = "TXD0", "RXD0" // older trees; line 32 is TXD0 too
	sim := chipLines{Name: "gpiochip0", Label: "gpio-sim.0-node0", Lines: gpioNames(28)}
	expander := chipLines{Name: "gpiochip0", Label: "mcp23017", Lines: gpioNames(24)}
	header := chipLines{Name: "gpiochip1", Label: "pinctrl-bcm2711", Lines: gpioNames(54)}
	odd := chipLines{Name: "gpiochip3", Label: "some-expander", Lines: []string{"", "", "SDA1", "SCL1"}}

	for _, tc := range []struct {
		name  string
		chips []chipLines
		pins  map[int]string // pin -> "chip/offset", "" for not found
	}{
		{"pi4 legacy names", []chipLines{pi4Legacy(), {Name: "gpiochip1", Label: "raspberrypi-exp-gpio", Lines: []string{"BT_ON", "WL_ON"}}},
			map[int]string{0: "gpiochip0/0", 1: "gpiochip0/1", 2: "gpiochip0/2", 4: "gpiochip0/4", 7: "gpiochip0/7",
				11: "gpiochip0/11", 14: "gpiochip0/14", 15: "gpiochip0/15", 17: "gpiochip0/17", 27: "gpiochip0/27",
				28: "", 32: "", 53: "", -1: ""}},
		{"pi3 TXD0 at 14 and 32", []chipLines{pi3}, map[int]string{14: "gpiochip0/14", 15: "gpiochip0/15", 32: ""}},
		{"pi5 rp1", pi5(), map[int]string{0: "gpiochip4/0", 2: "gpiochip4/2", 17: "gpiochip4/17", 27: "gpiochip4/27", 28: ""}},
		{"gpio-sim", []chipLines{sim}, map[int]string{0: "gpiochip0/0", 17: "gpiochip0/17", 27: "gpiochip0/27", 28: ""}},
		{"header beats an earlier expander", []chipLines{expander, header}, map[int]string{17: "gpiochip1/17", 23: "gpiochip1/23", 40: "gpiochip1/40"}},
		{"first chip wins among others", []chipLines{sim, {Name: "gpiochip1", Label: "gpio-sim.1-node0", Lines: gpioNames(28)}}, map[int]string{17: "gpiochip0/17"}},
		{"legacy names only on a header controller", []chipLines{odd}, map[int]string{2: "", 3: ""}},
		{"no chips", nil, map[int]string{0: "", 17: ""}},
	} {
		m := newLineMap(tc.chips)
		for pin, want := range tc.pins {
			got := ""
			if ref, ok := m.lookup(pin); ok {
				got = fmt.Sprintf("%s/%d", ref.Chip, ref.Offset)
			}
			if got != want {
				t.Errorf("%s: pin %d -> %q, want %q", tc.name, pin, got, want)
			}
		}
	}
}

func simChip() chipLines {
	return chipLines{Name: "gpiochip0", Label: "gpio-sim.0-node0", Lines: gpioNames(28)}
}

func newFakeLinux(t *testing.T, chips ...chipLines) (*Linux, *fakeKernel) {
	t.Helper()
	k := newFakeKernel(chips...)
	l, err := newLinux(DefaultConsumer, k)
	if err != nil {
		t.Fatal(err)
	}
	return l, k
}

func TestNewLinuxConsumer(t *testing.T) {
	for _, c := range []string{"", strings.Repeat("x", 32)} {
		if _, err := newLinux(c, newFakeKernel()); err == nil || !strings.HasPrefix(err.Error(), "gpio: consumer label") {
			t.Errorf("consumer %q: %v, want an error", c, err)
		}
	}
	l, err := newLinux(strings.Repeat("x", 31), newFakeKernel())
	if err != nil || l.Consumer() != strings.Repeat("x", 31) {
		t.Errorf("31-byte consumer: %v", err)
	}
}

func TestLinuxFindsPinOnPi5(t *testing.T) {
	l, k := newFakeLinux(t, pi5()...)
	st := mustConfigure(t, l, 17, Output, PullNone, 1)
	wantState(t, st, `{pin 17 mode output value 1 pull none consumer "raspi-mcp" chip gpiochip4 line 17}`)
	if got := k.line("gpiochip4", 17); !got.used || got.value != 1 {
		t.Errorf("kernel line gpiochip4/17 = %+v", got)
	}
}

func TestLinuxConfigureHoldsAndWrite(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	st := mustConfigure(t, l, 17, Output, PullNone, 1)
	wantState(t, st, `{pin 17 mode output value 1 pull none consumer "raspi-mcp" chip gpiochip0 line 17}`)
	line := k.line("gpiochip0", 17)
	if !line.used || line.consumer != "raspi-mcp" || line.value != 1 || line.bias != "none" {
		t.Fatalf("kernel line after Configure: %+v", line)
	}
	for _, v := range []int{0, 1, 0} {
		if err := l.Write(t.Context(), 17, v); err != nil {
			t.Fatal(err)
		}
		if line.value != v {
			t.Errorf("kernel value %d after Write %d", line.value, v)
		}
		if got := mustRead(t, l, 17); got != v {
			t.Errorf("Read = %d after Write %d", got, v)
		}
		if st := mustState(t, l, 17); st.Value == nil || *st.Value != v || st.Consumer != "raspi-mcp" {
			t.Errorf("State = %s after Write %d", show(st), v)
		}
	}
	// The line was requested once and is still held: values persist.
	if want := []string{`gpiochip0/17 raspi-mcp output "none"`}; !slices.Equal(k.requests, want) {
		t.Errorf("requests = %q, want %q", k.requests, want)
	}
}

func TestLinuxReconfigureInPlace(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	mustConfigure(t, l, 4, Output, PullNone, 1)
	st := mustConfigure(t, l, 4, Input, PullUp, 0)
	wantState(t, st, `{pin 4 mode input value 1 pull up consumer "raspi-mcp" chip gpiochip0 line 4}`)
	st = mustConfigure(t, l, 4, Input, PullDown, 0)
	wantState(t, st, `{pin 4 mode input value 0 pull down consumer "raspi-mcp" chip gpiochip0 line 4}`)
	line := k.line("gpiochip0", 4)
	if len(k.requests) != 1 || line.reconfigs != 2 || !line.used {
		t.Errorf("requests %q, reconfigs %d: want one request reconfigured twice", k.requests, line.reconfigs)
	}
	if err := l.Write(t.Context(), 4, 1); !errors.Is(err, ErrNotOutput) || !strings.Contains(err.Error(), "gpio: pin 4: not configured as output (it is configured as input)") {
		t.Errorf("Write to a held input: %v", err)
	}
}

func TestLinuxReadFreeLineIsTransient(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	line := k.line("gpiochip0", 4)
	line.hwPull = PullUp // as if set from outside (gpio-sim's pull file)
	if got := mustRead(t, l, 4); got != 1 {
		t.Errorf("Read of a pulled-up free line = %d, want 1", got)
	}
	// Requested as input with the bias left alone, then released.
	if want := []string{`gpiochip0/4 raspi-mcp input ""`}; !slices.Equal(k.requests, want) {
		t.Errorf("requests = %q, want %q", k.requests, want)
	}
	if line.used || line.hwPull != PullUp {
		t.Errorf("line after Read: %+v; want free with its pull intact", line)
	}
	line.external = 0
	if got := mustRead(t, l, 4); got != 0 {
		t.Errorf("Read with the pin driven low = %d", got)
	}
}

func TestLinuxStateDoesNotRequest(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	wantState(t, mustState(t, l, 5), `{pin 5 mode input value nil pull unknown consumer "" chip gpiochip0 line 5}`)

	k.hold("gpiochip0", 6, "pigpiod")
	k.line("gpiochip0", 6).mode = "output"
	k.line("gpiochip0", 6).bias = "up"
	wantState(t, mustState(t, l, 6), `{pin 6 mode output value nil pull up consumer "pigpiod" chip gpiochip0 line 6}`)

	k.hold("gpiochip0", 2, "") // muxed to I2C: used, no label
	wantState(t, mustState(t, l, 2), `{pin 2 mode alt value nil pull unknown consumer "" chip gpiochip0 line 2}`)

	if len(k.requests) != 0 {
		t.Errorf("State requested lines: %q", k.requests)
	}
}

func TestLinuxBusy(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	k.hold("gpiochip0", 22, "other-proc")
	_, cerr := l.Configure(t.Context(), 22, Output, PullNone, 1)
	_, rerr := l.Read(t.Context(), 22)
	werr := l.Write(t.Context(), 22, 1)
	for name, err := range map[string]error{"Configure": cerr, "Read": rerr, "Write": werr} {
		var be *BusyError
		if !errors.Is(err, ErrBusy) || !errors.As(err, &be) || be.Consumer != "other-proc" {
			t.Errorf("%s: %v, want a BusyError naming other-proc", name, err)
		} else if want := `gpio: pin 22: line busy: held by "other-proc"`; err.Error() != want {
			t.Errorf("%s: %q, want %q", name, err, want)
		}
	}
	if got := k.line("gpiochip0", 22); got.consumer != "other-proc" || got.value != 0 {
		t.Errorf("the other process's line changed: %+v", got)
	}

	k.hold("gpiochip0", 3, "")
	_, err := l.Configure(t.Context(), 3, Input, PullUp, 0)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "gpio: pin 3: line busy: held by the kernel (pin muxed to another function") {
		t.Errorf("muxed pin: %v", err)
	}

	// Two controllers in one process compete like two processes.
	other, err := newLinux("other-consumer", k)
	if err != nil {
		t.Fatal(err)
	}
	mustConfigure(t, l, 17, Output, PullNone, 1)
	if _, err := other.Configure(t.Context(), 17, Output, PullNone, 0); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), `"raspi-mcp"`) {
		t.Errorf("second controller on our line: %v", err)
	}
}

func TestLinuxWriteNeedsConfigure(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	err := l.Write(t.Context(), 17, 1)
	if !errors.Is(err, ErrNotOutput) || err.Error() != "gpio: pin 17: not configured as output (it is not configured); configure it as output first" {
		t.Errorf("Write to a free pin: %v", err)
	}
	if len(k.requests) != 0 || k.line("gpiochip0", 17).used {
		t.Errorf("Write took the line: %q", k.requests)
	}
	if err := l.Write(t.Context(), 17, 3); err == nil || err.Error() != "gpio: pin 17: value 3 is not 0 or 1" {
		t.Errorf("Write(17, 3) = %v", err)
	}
}

func TestLinuxNoSuchPinRescans(t *testing.T) {
	l, k := newFakeLinux(t)
	if _, err := l.State(t.Context(), 17); !errors.Is(err, ErrNoSuchPin) || err.Error() != "gpio: pin 17: no such pin: no line named GPIO17 on any gpiochip" {
		t.Errorf("State with no chips: %v", err)
	}
	for _, pin := range []int{-1, 99} {
		_, serr := l.State(t.Context(), pin)
		_, cerr := l.Configure(t.Context(), pin, Output, PullNone, 0)
		_, rerr := l.Read(t.Context(), pin)
		werr := l.Write(t.Context(), pin, 0)
		for i, err := range []error{serr, cerr, rerr, werr} {
			if !errors.Is(err, ErrNoSuchPin) || !strings.Contains(err.Error(), fmt.Sprintf("gpio: pin %d:", pin)) {
				t.Errorf("pin %d call %d: %v", pin, i, err)
			}
		}
	}
	// A chip that appears later (gpio-sim created, overlay loaded) is found.
	k.setChips(simChip())
	st := mustConfigure(t, l, 17, Output, PullNone, 1)
	if st.Chip != "gpiochip0" || st.Line != 17 {
		t.Errorf("after rescan: %s", show(st))
	}
	before := k.scans
	mustState(t, l, 16)
	if k.scans != before {
		t.Errorf("a hit rescanned (%d -> %d scans)", before, k.scans)
	}
}

func TestLinuxRequestError(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	k.reqErr = errors.New("permission denied")
	_, err := l.Configure(t.Context(), 17, Output, PullNone, 1)
	if err == nil || err.Error() != "gpio: pin 17: request gpiochip0 line 17 as output: permission denied" {
		t.Errorf("Configure = %v", err)
	}
	if _, err := l.Read(t.Context(), 17); err != nil {
		t.Errorf("the failed request left state behind: %v", err)
	}
}

func TestLinuxCloseReleasesEverything(t *testing.T) {
	l, k := newFakeLinux(t, simChip())
	mustConfigure(t, l, 17, Output, PullNone, 1)
	mustConfigure(t, l, 4, Input, PullUp, 0)
	mustConfigure(t, l, 27, Output, PullNone, 0)
	k.hold("gpiochip0", 22, "other-proc")
	k.closeErr = errors.New("bad file descriptor") // the first release (pin 4) fails
	err := l.Close()
	if err == nil || err.Error() != "gpio: pin 4: release gpiochip0 line 4: bad file descriptor" {
		t.Errorf("Close = %v", err)
	}
	for _, off := range []int{4, 17, 27} {
		if line := k.line("gpiochip0", off); line.used {
			t.Errorf("line %d still held after Close: %+v", off, line)
		}
	}
	if line := k.line("gpiochip0", 22); line.consumer != "other-proc" {
		t.Errorf("Close released another process's line")
	}
	if err := l.Write(t.Context(), 17, 1); !errors.Is(err, ErrNotOutput) {
		t.Errorf("Write after Close: %v", err)
	}
	if st := mustState(t, l, 17); st.Value != nil || st.Consumer != "" {
		t.Errorf("State after Close: %s", show(st))
	}
	// Usable again; Close with nothing held is a no-op.
	mustConfigure(t, l, 17, Output, PullNone, 1)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLinuxConcurrent(t *testing.T) {
	l, _ := newFakeLinux(t, simChip())
	var wg sync.WaitGroup
	for pin := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Configure(t.Context(), pin, Output, PullNone, 0); err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				if err := l.Write(t.Context(), pin, i%2); err != nil {
					t.Error(err)
				}
				if _, err := l.State(t.Context(), pin); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

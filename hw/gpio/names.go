package gpio

import "strconv"

// chipLines is one gpiochip as scanned: its names and the name of each line.
type chipLines struct {
	Name  string   // device name, e.g. "gpiochip0"
	Label string   // driver label, e.g. "pinctrl-bcm2711", "pinctrl-rp1", "gpio-sim.0-node0"
	Lines []string // line names by offset, "" when unnamed
}

// lineRef locates a line.
type lineRef struct {
	Chip   string
	Label  string
	Offset int
}

// isHeaderController reports whether a chip label is the Pi's own GPIO
// block, whose offsets are BCM numbers: the header lines are offsets 0-27 of
// pinctrl-bcm2835 (Pi 1-3, Zero), pinctrl-bcm2711 (Pi 4, 400, CM4) and
// bank 0 of pinctrl-rp1 (Pi 5, CM5).
func isHeaderController(label string) bool {
	switch label {
	case "pinctrl-bcm2835", "pinctrl-bcm2711", "pinctrl-rp1":
		return true
	}
	return false
}

// legacyNames are the names the Raspberry Pi device trees give header lines
// instead of "GPIO<n>": the gpio-line-names of bcm2835-rpi-*.dts and
// bcm2711-rpi-4-b.dts (from the board schematics; e.g. line 2 is "SDA1",
// 14 is "TXD1" or, on older trees, "TXD0"), and "ID_SDA"/"ID_SCL" which the
// Pi 5's rp1 tree keeps for lines 0 and 1. Newer Raspberry Pi OS kernels
// call most header lines GPIO<n>, but not all of them and not all kernels,
// so these are accepted too, only on a header controller and only at offset
// n, which keeps "TXD0" (line 32 of the Pi 4, wired to Bluetooth) from
// being taken for pin 14.
func legacyNames(pin int) []string {
	switch pin {
	case 0:
		return []string{"ID_SDA"}
	case 1:
		return []string{"ID_SCL"}
	case 2:
		return []string{"SDA1"}
	case 3:
		return []string{"SCL1"}
	case 4:
		return []string{"GPIO_GCLK"}
	case 7:
		return []string{"SPI_CE1_N"}
	case 8:
		return []string{"SPI_CE0_N"}
	case 9:
		return []string{"SPI_MISO"}
	case 10:
		return []string{"SPI_MOSI"}
	case 11:
		return []string{"SPI_SCLK"}
	case 14:
		return []string{"TXD1", "TXD0"}
	case 15:
		return []string{"RXD1", "RXD0"}
	}
	return nil
}

// lineMap finds the line of a BCM pin by name across all chips.
type lineMap struct {
	byName map[string][]lineRef // in scan order: chips in natural order, then offsets
}

func newLineMap(chips []chipLines) *lineMap {
	m := &lineMap{byName: map[string][]lineRef{}}
	for _, c := range chips {
		for off, name := range c.Lines {
			if name == "" {
				continue
			}
			m.byName[name] = append(m.byName[name], lineRef{Chip: c.Name, Label: c.Label, Offset: off})
		}
	}
	return m
}

// lookup returns the line of pin, preferring, in order:
//  1. a line named GPIO<n> on a header controller;
//  2. a legacy name of pin n (see legacyNames) on a header controller at
//     offset n;
//  3. the first line named GPIO<n> on any chip (gpio-sim, other boards).
//
// The ranking keeps an add-on board whose driver also names a line "GPIO17"
// from shadowing the header's GPIO17.
func (m *lineMap) lookup(pin int) (lineRef, bool) {
	if pin < 0 {
		return lineRef{}, false
	}
	refs := m.byName["GPIO"+strconv.Itoa(pin)]
	for _, r := range refs {
		if isHeaderController(r.Label) {
			return r, true
		}
	}
	for _, name := range legacyNames(pin) {
		for _, r := range m.byName[name] {
			if isHeaderController(r.Label) && r.Offset == pin {
				return r, true
			}
		}
	}
	if len(refs) > 0 {
		return refs[0], true
	}
	return lineRef{}, false
}

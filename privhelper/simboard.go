package privhelper

import (
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	hwi2c "github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
)

// SimBoard is the simulated board's hardware, one definition for laptop
// mode's helper, `raspi-mcp selftest` and the tests: 28 GPIO lines,
// hardware PWM, and I²C bus 1 with a BME280 at 0x76 and a TMP102 at 0x48.
// The devices are exported for a caller that checks what a call did; they
// outlive any one Server, as a real board's pins outlive a helper restart.
type SimBoard struct {
	GPIO   *gpio.Sim
	PWM    *pwm.Sim
	Bus    *hwi2c.SimBus // bus 1
	BME280 *hwi2c.BME280 // at 0x76 on Bus, whose weather a test may set
	// Buttons is the approval button's wiring: the helper opens it from
	// [guard.button], and Buttons.Current is the button a finger presses.
	Buttons *gpio.SimButtons
	i2c     *I2CAdapter
}

// NewSimBoard builds the board; extra chips join bus 1 (the tests add
// plain registers at 0x50 to write to).
func NewSimBoard(extra ...hwi2c.Chip) *SimBoard {
	b := &SimBoard{GPIO: gpio.NewSim(28), PWM: pwm.NewSim(), BME280: hwi2c.NewBME280(0x76), Buttons: gpio.NewSimButtons(28)}
	b.Bus = hwi2c.NewSimBus(append([]hwi2c.Chip{b.BME280, hwi2c.NewTMP102(0x48)}, extra...)...)
	// No /sys: the simulated chips have no kernel driver bound.
	b.i2c = I2CFrom(hwi2c.NewSimOpener(map[int]*hwi2c.SimBus{1: b.Bus}), "/nonexistent")
	return b
}

// Hardware is the helper's view of the board (the camera is a Backends
// member of its own).
func (b *SimBoard) Hardware() Hardware {
	return Hardware{GPIO: GPIOFrom(b.GPIO), PWM: PWMFrom(b.PWM), I2C: b.i2c, Button: b.Buttons}
}

// Close releases the lines and the bus.
func (b *SimBoard) Close() {
	b.GPIO.Close()
	b.i2c.Close()
}

// OpenSimOps opens the helper's own handles on the simulated board's
// systemd and process table, in the state files it shares with the agent
// (`raspi-mcp-simhelper --sim-units --sim-procs`). An empty path leaves
// that backend out: then no unit is controlled, or no process signalled,
// and never one of this machine. accounts resolves protected users among
// the board's own accounts, which its processes run as; it is nil without
// a process table.
func OpenSimOps(unitsPath, procsPath string) (ops Ops, accounts func(name string) (uid int, ok bool), err error) {
	var u *units.Sim
	if unitsPath != "" {
		if u, err = units.NewSim(unitsPath); err != nil {
			return Ops{}, nil, err
		}
		ops.Units = UnitsFrom(u)
	}
	if procsPath != "" {
		sp, err := NewSimProcesses(procsPath, u)
		if err != nil {
			return Ops{}, nil, err
		}
		ops.Processes = SimProcessesFrom(sp)
		accounts = func(name string) (int, bool) { return procs.UserID(sp.FS(), name) }
	}
	return ops, accounts, nil
}

// Command raspi-mcp-helper is the root helper: the only raspi-mcp process
// that touches power, hardware and systemd units. It serves a Unix socket
// that only the agent's user and root may use, and re-checks every request
// against its own reading of the root-owned config. It drives the device's
// real backends only: the simulated board is raspi-mcp-simhelper's.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/daemon"
)

// version is set at link time (-X main.version=...).
var version = "0.1.0-dev"

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "self-update" {
		err = runSelfUpdate(os.Args[2:])
	} else {
		err = daemon.Run(daemon.Options{Name: "raspi-mcp-helper", Version: version, Flags: flag.CommandLine, Args: os.Args[1:], Open: openDevice})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp-helper:", err)
		os.Exit(1)
	}
}

// openDevice opens the device's backends: logind for power, the kernel's
// GPIO, I²C and PWM devices, rpicam for the camera, systemd over D-Bus and
// the real /proc, and the self-updater. A backend that cannot open is left
// out with a warning and its methods are not served.
func openDevice(cfg *config.Config, cfgPath string, log *slog.Logger) (privhelper.Backends, func(), error) {
	b := privhelper.Backends{Backend: "linux", Camera: camera.NewRpicam(camera.RpicamOptions{MediaRoot: cfg.Camera.MediaRoot})}
	var closers []func()
	if l, err := power.NewLogind(); err != nil {
		// Power tools will fail with a clear error; everything else still works.
		log.Warn("logind unavailable; power actions will fail", "err", err)
	} else {
		b.Power = l
		closers = append(closers, func() { l.Close() })
	}
	hw, closeHW := hardware(log)
	b.Hardware = hw
	closers = append(closers, closeHW)
	ops, closeOps := operations(log)
	b.Ops = ops
	closers = append(closers, closeOps)
	updates, closeUpdates := selfUpdates(cfg, cfgPath, log)
	b.Updates = updates
	closers = append(closers, closeUpdates)
	return b, func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}, nil
}

// hardware opens the kernel's GPIO character devices, I²C buses and
// /sys/class/pwm. Without a gpiochip on this machine the gpio methods are
// not served.
func hardware(log *slog.Logger) (privhelper.Hardware, func()) {
	ic := privhelper.I2CFrom(i2c.NewLinux("/"), "/")
	// The approval button is served even without a gpiochip: button.status
	// then says it is missing, which is what its owner needs to read.
	hw := privhelper.Hardware{PWM: privhelper.PWMFrom(pwm.NewSysfs("/")), I2C: ic, Button: gpio.LinuxButtons{}}
	g, err := gpio.NewLinux(gpio.DefaultConsumer)
	if err != nil {
		log.Warn("no GPIO controller; gpio methods are off", "err", err)
		return hw, func() { ic.Close() }
	}
	hw.GPIO = privhelper.GPIOFrom(g)
	return hw, func() { g.Close(); ic.Close() }
}

// operations opens the process signaller on the real /proc and systemd
// over D-Bus. Without a system bus the service and package methods are not
// served; signals always are.
func operations(log *slog.Logger) (privhelper.Ops, func()) {
	ops := privhelper.Ops{Processes: privhelper.ProcessesFrom("/")}
	d, err := units.NewDBus(context.Background())
	if err != nil {
		log.Warn("systemd over D-Bus unavailable; service methods are off", "err", err)
		return ops, func() {}
	}
	ops.Units = privhelper.UnitsFrom(d)
	// apt runs as transient units of the same systemd, outside the
	// helper's sandbox.
	ops.Apt = privhelper.NewAptRunner(d)
	return ops, d.Close
}

//go:build pins

// Package pins keeps the hardware libraries of later issues (go-gpiocdev,
// periph, go-systemd's D-Bus client) at their reviewed versions in go.mod
// before any package imports them. The build tag keeps them out of every
// binary; `go mod tidy` still sees them.
package pins

import (
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/warthog618/go-gpiocdev"
	_ "periph.io/x/conn/v3/i2c"
	_ "periph.io/x/devices/v3/bmxx80"
	_ "periph.io/x/host/v3"
)

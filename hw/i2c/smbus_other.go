//go:build !linux

package i2c

import (
	"errors"
	"fmt"
)

// i2c-dev exists only on Linux. Elsewhere (a developer's Mac) the package
// still builds, Buses and Scan still read fixtures, and Open fails here.

type smbusDev struct{}

func openSMBus(bus int) (*smbusDev, error) {
	return nil, fmt.Errorf("/dev/i2c-%d: %w", bus, errors.ErrUnsupported)
}

func (*smbusDev) plainI2C() bool { return false }

func (*smbusDev) close() error { return nil }

func (*smbusDev) probe(addr uint16, op ProbeOp) (Presence, error) {
	return Absent, errors.ErrUnsupported
}

func (*smbusDev) tx(addr uint16, w, r []byte) error { return errors.ErrUnsupported }

//go:build !linux

package gpio

import (
	"errors"
	"fmt"
)

// LinuxButtons needs the Linux GPIO character device; elsewhere every
// button is missing and the simulated board's stands in.
type LinuxButtons struct{}

// OpenButton fails: there is no GPIO character device here.
func (LinuxButtons) OpenButton(cfg ButtonConfig) (Button, error) {
	return nil, fmt.Errorf("gpio: button pin %d: GPIO character device: %w", cfg.Pin, errors.ErrUnsupported)
}

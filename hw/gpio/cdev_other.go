//go:build !linux

package gpio

import (
	"errors"
	"fmt"
)

// NewLinux needs the Linux GPIO character device; elsewhere (a developer's
// Mac) it fails and Sim stands in.
func NewLinux(consumer string) (*Linux, error) {
	return nil, fmt.Errorf("gpio: GPIO character device: %w", errors.ErrUnsupported)
}

//go:build !linux

package agent

import "errors"

// kernelClockSynced has no portable source off Linux; laptop mode never
// asks (its board is simulated).
func kernelClockSynced() (bool, error) {
	return false, errors.New("no kernel NTP state on this system")
}

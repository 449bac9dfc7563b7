package agent

import "golang.org/x/sys/unix"

// kernelClockSynced reads the kernel's NTP state without changing it: any
// NTP daemon (timesyncd, chrony, ntpd) clears "unsynchronised" when it has
// disciplined the clock.
func kernelClockSynced() (bool, error) {
	var tx unix.Timex // Modes 0: read only
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return false, err
	}
	return state != unix.TIME_ERROR && tx.Status&unix.STA_UNSYNC == 0, nil
}

//go:build !windows

package laptop

// ProfileDir is only needed on Windows (SSHEnv).
func ProfileDir() string { return "" }

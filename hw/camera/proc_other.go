//go:build !unix

package camera

import "os/exec"

// ownProcessGroup is a no-op where process groups do not exist; the
// camera tools only run on Linux, so this only keeps the package building.
func ownProcessGroup(cmd *exec.Cmd) {}

package main

import (
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// tuneGC applies the agent's collector and processor settings; GOGC,
// GOMEMLIMIT and GOMAXPROCS in the environment win, so one run can try
// another setting without a config.
func tuneGC(a config.Agent) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(a.GCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && a.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(a.MemoryLimitMiB) << 20)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && a.MaxProcs > 0 {
		runtime.GOMAXPROCS(a.MaxProcs)
	}
}

// bridgeStdin is stdin read through the runtime's poller when it is a
// pipe or socket (as under sshd), so a read waiting for the next message
// parks a goroutine, not a thread in a system call. A terminal or file is
// read as it is: making a terminal non-blocking would leave it so for the
// shell after we exit.
func bridgeStdin() *os.File {
	st, err := os.Stdin.Stat()
	if err != nil || st.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) == 0 {
		return os.Stdin
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}

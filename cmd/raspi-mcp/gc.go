package main

import (
	"os"
	"runtime"
	"runtime/debug"

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

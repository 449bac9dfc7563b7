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
//
// Until the returned func runs (when start-up is over), the collector runs
// at startupGCPercent instead of the configured percent: registering the
// tools (resolving their JSON Schemas, mostly inside the SDK) makes about
// 12 MB of garbage against a live heap of 3, and a heap that grew to that
// peak leaves pages behind that FreeOSMemory cannot give back. Collecting
// often while starting keeps about 2 MiB off the idle agent's RSS for some
// milliseconds of start-up CPU.
func tuneGC(a config.Agent) (started func()) {
	_, envGC := os.LookupEnv("GOGC")
	if !envGC {
		debug.SetGCPercent(startupGCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && a.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(a.MemoryLimitMiB) << 20)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set && a.MaxProcs > 0 {
		runtime.GOMAXPROCS(a.MaxProcs)
	}
	return func() {
		if !envGC {
			debug.SetGCPercent(a.GCPercent)
		}
		debug.FreeOSMemory()
	}
}

// startupGCPercent is the collector's setting while the agent starts (see
// tuneGC): measured idle RSS after start-up, GOGC 400 all along 25.5 MiB,
// 100 24.6, 25 23.8, 10 23.9.
const startupGCPercent = 25

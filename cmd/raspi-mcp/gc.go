package main

import (
	"os"
	"runtime"
	"runtime/debug"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// tuneGC applies the agent's collector settings; GOGC and GOMEMLIMIT in the
// environment win, so one run can try another setting without a config.
func tuneGC(a config.Agent) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(a.GCPercent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && a.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(a.MemoryLimitMiB) << 20)
	}
}

// bridgeHeap is the soft limit of `raspi-mcp stdio`: it holds one line at a
// time, so a small heap costs it little CPU and keeps one SSH session's
// memory to a few MiB.
const bridgeHeap = 4 << 20

// tuneBridge keeps `raspi-mcp stdio` small and quiet: one runs per SSH
// session, on a Pi Zero with 512 MiB and one core. Its heap is one line at
// a time, so a soft limit costs it little; and it copies one line at a time
// between two goroutines, so a second P only adds wake-ups (an idle P
// spinning up a thread to look for work) without adding throughput.
func tuneBridge() {
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(bridgeHeap)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}
}

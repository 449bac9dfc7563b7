// raspi-mcp-exporter writes the agent's /metrics pages in Prometheus's
// formats with Prometheus's client library. The agent (raspi-mcp serve)
// starts it at the first scrape and sends it each scrape's values over its
// stdin; it answers on stdout and exits when stdin closes. It is a separate
// binary so that the library, and the protobuf runtime it brings, are
// mapped only on Pis that are scraped, not in every agent. It is installed
// in /usr/lib/raspi-mcp/, not on $PATH: nobody runs it by hand.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/raspi-mcp/raspi-mcp/internal/promexp"
	"github.com/raspi-mcp/raspi-mcp/internal/scrape"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "raspi-mcp-exporter takes no arguments: raspi-mcp serve starts it and talks to it over its stdin and stdout")
		os.Exit(2)
	}
	// One scrape at a time needs no second processor; fewer threads keep
	// the process small on a Pi.
	runtime.GOMAXPROCS(1)
	// A scrape allocates a few hundred KB on a small live heap (the
	// library's registry and descriptors): collecting at a quarter of it
	// rather than the default doubling keeps the process 2-3 MiB smaller
	// for no measurable CPU at a scrape every few seconds.
	debug.SetGCPercent(25)
	if err := scrape.Serve(os.Stdin, os.Stdout, promexp.New()); err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp-exporter:", err)
		os.Exit(1)
	}
}

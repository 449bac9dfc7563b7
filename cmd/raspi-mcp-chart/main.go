// raspi-mcp-chart draws a metric's history as a PNG for the agent's
// metrics_get_chart tool: a chart request as JSON on stdin, the PNG on
// stdout, then it exits. It is a separate binary because the plotting
// library and the fonts it embeds are megabytes, which the armv6 agent's
// size budget has no room for, and a chart is rare: only an agent asked
// for one starts it. It is installed in /usr/lib/raspi-mcp/, not on $PATH:
// nobody runs it by hand.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/raspi-mcp/raspi-mcp/internal/chart"
	"github.com/raspi-mcp/raspi-mcp/internal/chartpng"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "raspi-mcp-chart takes no arguments: raspi-mcp serve starts it with a chart request on its stdin")
		os.Exit(2)
	}
	// One chart needs one processor; a Pi Zero has no second one anyway.
	runtime.GOMAXPROCS(1)
	// A 1600x1200 canvas is 7.7 MB of pixels; a bound well above it stops
	// a runaway draw before it takes the Pi's memory.
	debug.SetMemoryLimit(64 << 20)
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "raspi-mcp-chart:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	b, err := io.ReadAll(io.LimitReader(in, chart.MaxRequestBytes+1))
	if err != nil {
		return err
	}
	if len(b) > chart.MaxRequestBytes {
		return fmt.Errorf("the request is over %d bytes", chart.MaxRequestBytes)
	}
	var r chart.Request
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("the request: %w", err)
	}
	png, _, err := chartpng.Draw(&r)
	if err != nil {
		return err
	}
	_, err = out.Write(png)
	return err
}

package promtext

import (
	"math"
	"testing"
)

func TestWriter(t *testing.T) {
	var w Writer
	w.Family("x_total", Counter, "calls, by \\ path\nand line")
	w.Uint("x_total", 18446744073709551615, "tool", `a"b\c`+"\n", "decision", "allow")
	w.Family("y", Gauge, "a level")
	w.Float("y", 0.5)
	w.Float("y", math.NaN(), "k", "nan")
	w.Float("y", math.Inf(1), "k", "inf")
	w.Float("y", math.Inf(-1), "k", "-inf")
	w.Float("y", 1e21, "k", "big")
	w.Bool("y", true, "k", "yes")
	w.Bool("y", false, "k", "no")
	want := `# HELP x_total calls, by \\ path\nand line
# TYPE x_total counter
x_total{tool="a\"b\\c\n",decision="allow"} 18446744073709551615
# HELP y a level
# TYPE y gauge
y 0.5
y{k="nan"} NaN
y{k="inf"} +Inf
y{k="-inf"} -Inf
y{k="big"} 1e+21
y{k="yes"} 1
y{k="no"} 0
`
	if got := string(w.Bytes()); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	w.Reset()
	if len(w.Bytes()) != 0 {
		t.Fatalf("Reset left %q", w.Bytes())
	}
}

// Once the buffer has grown, writing a sample allocates nothing.
func TestWriterNoAllocs(t *testing.T) {
	var w Writer
	n := testing.AllocsPerRun(100, func() {
		w.Reset()
		w.Family("raspi_network_receive_bytes_total", Counter, "bytes received")
		w.Uint("raspi_network_receive_bytes_total", 123456789, "interface", "eth0")
		w.Float("raspi_temperature_celsius", 48.3)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

func BenchmarkWriter100Samples(b *testing.B) {
	var w Writer
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		w.Family("raspi_mcp_tool_calls_total", Counter, "tool calls by tool and decision")
		for i := range 100 {
			w.Uint("raspi_mcp_tool_calls_total", uint64(i), "tool", "system.get_health", "decision", "allow")
		}
	}
	b.ReportMetric(float64(len(w.Bytes())), "bytes/op")
}

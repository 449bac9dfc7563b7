package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"strings"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/chart"
)

// A request on stdin gives a PNG of its size on stdout; a bad one gives
// an error and no output.
func TestRunWritesThePNG(t *testing.T) {
	req := chart.Request{Width: 640, Height: 300, Start: 1000, End: 4600,
		Series: []chart.Series{{Name: "cpu_percent", Unit: "%", Times: []int64{1000, 2000, 4600}, Vals: []float64{5, 50, 20}}}}
	in, _ := json.Marshal(req)
	var out bytes.Buffer
	if err := run(bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(&out)
	if err != nil || cfg.Width != 640 || cfg.Height != 300 {
		t.Fatalf("%+v, %v: want a 640x300 PNG", cfg, err)
	}
	for name, in := range map[string]string{
		"not JSON":  "{",
		"too wide":  strings.Replace(string(in), `"width":640`, `"width":99999`, 1),
		"too large": `{"series":[{"name":"` + strings.Repeat("x", chart.MaxRequestBytes) + `"}]}`,
	} {
		out.Reset()
		if err := run(strings.NewReader(in), &out); err == nil || out.Len() != 0 {
			t.Errorf("%s: err %v, %d bytes out", name, err, out.Len())
		}
	}
}

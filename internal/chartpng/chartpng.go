// Package chartpng draws a chart.Request as a PNG with gonum.org/v1/plot:
// one panel a series, one above the other, on a shared time axis. It is
// what raspi-mcp-chart runs, and what the tests draw with in process; the
// agent's binary never links it (cmd/raspi-mcp/deps_test.go).
package chartpng

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/raspi-mcp/raspi-mcp/internal/chart"
)

// Color is series i's line colour: distinct from the axes' black and the
// grid's grey, so a test can find each line's pixels.
func Color(i int) color.RGBA {
	return [chart.MaxSeries]color.RGBA{
		{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
		{R: 0x1f, G: 0x5f, B: 0xd4, A: 0xff}, // blue
		{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
		{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	}[i%chart.MaxSeries]
}

// Panel is where one series was drawn: its data area in the image's pixels
// and the value range that area spans, so a reader of the PNG can map a
// point to its pixel (the tests read the image back this way).
type Panel struct {
	Data       image.Rectangle
	Start, End int64 // the time axis, Unix seconds
	Min, Max   float64
}

// Renderer draws in process (chart.Renderer).
type Renderer struct{}

// Render is Draw without the layout.
func (Renderer) Render(_ context.Context, r *chart.Request) ([]byte, error) {
	b, _, err := Draw(r)
	return b, err
}

// lineWidth is thick enough that a line's middle pixel has its exact
// colour after anti-aliasing.
const lineWidth = 2

// Draw renders r at 72 dots per inch (a point is a pixel) and says where
// each panel's data went.
func Draw(r *chart.Request) ([]byte, []Panel, error) {
	if err := r.Validate(); err != nil {
		return nil, nil, err
	}
	plots := make([][]*plot.Plot, len(r.Series))
	for i, s := range r.Series {
		p, err := panel(r, i, s)
		if err != nil {
			return nil, nil, err
		}
		plots[i] = []*plot.Plot{p}
	}
	w, h := vg.Length(r.Width), vg.Length(r.Height)
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(72), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: 4, PadBottom: 4, PadLeft: 4, PadRight: 12, PadY: 6}
	canvases := plot.Align(plots, tiles, dc)
	panels := make([]Panel, len(plots))
	for i, row := range plots {
		p := row[0]
		p.Draw(canvases[i][0])
		da := p.DataCanvas(canvases[i][0])
		// vg's origin is the bottom left; the image's the top left.
		panels[i] = Panel{
			Data:  image.Rect(int(math.Round(float64(da.Min.X))), r.Height-int(math.Round(float64(da.Max.Y))), int(math.Round(float64(da.Max.X))), r.Height-int(math.Round(float64(da.Min.Y)))),
			Start: r.Start, End: r.End, Min: p.Y.Min, Max: p.Y.Max,
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, nil, fmt.Errorf("chartpng: %w", err)
	}
	return buf.Bytes(), panels, nil
}

// panel is series i's plot: its line, its title with the unit, the value
// axis fixed where the series fixes it and padded around the data
// otherwise, and the time axis from r.Start to r.End.
func panel(r *chart.Request, i int, s chart.Series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = s.Name
	if s.Unit != "" {
		p.Title.Text += " (" + s.Unit + ")"
	}
	if len(s.Vals) == 0 {
		p.Title.Text += ": no samples"
	}
	p.Title.TextStyle.Font.Size = 11
	p.X.Min, p.X.Max = float64(r.Start), float64(r.End)
	p.X.Tick.Marker = plot.TimeTicks{Format: "15:04"}
	if i == len(r.Series)-1 {
		p.X.Label.Text = "time (UTC)"
	}
	lo, hi := bounds(s)
	p.Y.Min, p.Y.Max = lo, hi
	p.Add(plotter.NewGrid())
	if len(s.Vals) > 0 {
		xy := make(plotter.XYs, len(s.Vals))
		for j := range s.Vals {
			xy[j] = plotter.XY{X: float64(s.Times[j]), Y: s.Vals[j]}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("chartpng: series %q: %w", s.Name, err)
		}
		l.Color, l.Width = Color(i), lineWidth
		if s.Step {
			l.StepStyle = plotter.PostStep
		}
		p.Add(l)
	}
	// Adding plotters widens the axes to their data; the request's axes
	// are the ones drawn.
	p.X.Min, p.X.Max = float64(r.Start), float64(r.End)
	p.Y.Min, p.Y.Max = lo, hi
	return p, nil
}

// bounds is the value axis: the series' own where it gives them, else the
// data's range with a tenth of it either side (one unit for a flat line).
func bounds(s chart.Series) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range s.Vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(s.Vals) == 0 {
		lo, hi = 0, 1
	}
	pad := (hi - lo) / 10
	if pad == 0 {
		pad = 1
	}
	lo, hi = lo-pad, hi+pad
	if s.Min != nil {
		lo = *s.Min
	}
	if s.Max != nil {
		hi = *s.Max
	}
	if lo >= hi { // a fixed bound on one side only, the data beyond it
		hi = lo + 1
	}
	return lo, hi
}

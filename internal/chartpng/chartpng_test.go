package chartpng

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"testing"

	"github.com/raspi-mcp/raspi-mcp/internal/chart"
)

func f(v float64) *float64 { return &v }

// knownChart is a temperature ramp with a fixed value axis over a fixed
// hour, and a throttled flag that turns on halfway.
func knownChart() *chart.Request {
	t0 := int64(1_700_000_000)
	return &chart.Request{Width: 800, Height: 420, Start: t0, End: t0 + 3600, Series: []chart.Series{
		{Name: "cpu_temperature_celsius", Unit: "°C", Times: []int64{t0 + 300, t0 + 900, t0 + 1800, t0 + 2700, t0 + 3300}, Vals: []float64{40, 55, 70, 62, 80}, Min: f(30), Max: f(90)},
		{Name: "throttled", Times: []int64{t0, t0 + 1200, t0 + 1800, t0 + 3600}, Vals: []float64{0, 0, 1, 1}, Min: f(0), Max: f(1), Step: true},
	}}
}

// pixelOf maps a data point to the image through the panel's axes.
func pixelOf(p Panel, t int64, v float64) image.Point {
	x := float64(p.Data.Min.X) + float64(t-p.Start)/float64(p.End-p.Start)*float64(p.Data.Dx())
	y := float64(p.Data.Max.Y) - (v-p.Min)/(p.Max-p.Min)*float64(p.Data.Dy())
	return image.Pt(int(math.Round(x)), int(math.Round(y)))
}

// near reports whether a pixel of colour c lies within r pixels of at.
func near(img image.Image, at image.Point, r int, c color.RGBA) bool {
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			if color.RGBAModel.Convert(img.At(at.X+dx, at.Y+dy)).(color.RGBA) == c {
				return true
			}
		}
	}
	return false
}

// box is the bounding box of the pixels of exactly colour c.
func box(img image.Image, c color.RGBA) image.Rectangle {
	var b image.Rectangle
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				b = b.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	return b
}

// The PNG read back: its size is the request's, each point's pixel has its
// series' colour where the panel's axes put it, and each line spans
// exactly the data's time and value range, inside its panel.
func TestDrawAxesMatchTheData(t *testing.T) {
	req := knownChart()
	b, panels, err := Draw(req)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the PNG does not decode: %v", err)
	}
	if got := img.Bounds().Size(); got != image.Pt(req.Width, req.Height) {
		t.Fatalf("image %v, want %dx%d", got, req.Width, req.Height)
	}
	if len(panels) != 2 || !(panels[0].Data.Max.Y <= panels[1].Data.Min.Y) {
		t.Fatalf("panels %+v: want two, the first above the second", panels)
	}
	for i, s := range req.Series {
		p := panels[i]
		if p.Min != *s.Min || p.Max != *s.Max || p.Start != req.Start || p.End != req.End {
			t.Errorf("%s: axes %+v, want the request's", s.Name, p)
		}
		if !p.Data.In(img.Bounds()) || p.Data.Dx() < req.Width/2 || p.Data.Dy() < 50 {
			t.Errorf("%s: data area %v is not a fair part of the %v image", s.Name, p.Data, img.Bounds())
		}
		c := Color(i)
		for j, tm := range s.Times {
			if at := pixelOf(p, tm, s.Vals[j]); !near(img, at, 2, c) {
				t.Errorf("%s: point %d (%d, %g) should be drawn at %v: no pixel of %v within 2 px", s.Name, j, tm, s.Vals[j], at, c)
			}
		}
		lo, hi := slicesMinMax(s.Vals)
		want := image.Rectangle{Min: pixelOf(p, s.Times[0], hi), Max: pixelOf(p, s.Times[len(s.Times)-1], lo)}
		got := box(img, c)
		const slack = 2 // half the line's width, and rounding
		if abs(got.Min.X-want.Min.X) > slack || abs(got.Max.X-want.Max.X) > slack || abs(got.Min.Y-want.Min.Y) > slack || abs(got.Max.Y-want.Max.Y) > slack {
			t.Errorf("%s: the line covers %v, the data spans %v", s.Name, got, want)
		}
	}
	// Where the flag is 0 nothing of its colour is drawn at 1, and after it
	// turned on nothing at 0: a step, not a ramp.
	p, c := panels[1], Color(1)
	if near(img, pixelOf(p, req.Start+600, 1), 1, c) || near(img, pixelOf(p, req.Start+2400, 0), 1, c) {
		t.Error("the throttled flag is not drawn as a step")
	}
}

// Without fixed bounds the value axis pads the data by a tenth of its
// range either side, so the extremes are inside the panel, not on its edge.
func TestDrawPadsFreeAxes(t *testing.T) {
	req := knownChart()
	req.Series = req.Series[:1]
	req.Series[0].Min, req.Series[0].Max = nil, nil
	_, panels, err := Draw(req)
	if err != nil {
		t.Fatal(err)
	}
	if p := panels[0]; p.Min != 36 || p.Max != 84 {
		t.Fatalf("axis %g..%g, want 36..84 (data 40..80 padded by 4)", p.Min, p.Max)
	}
	req.Series[0].Vals = []float64{50, 50, 50, 50, 50}
	if _, panels, _ = Draw(req); panels[0].Min != 49 || panels[0].Max != 51 {
		t.Fatalf("flat line: axis %g..%g, want 49..51", panels[0].Min, panels[0].Max)
	}
}

// A series without samples still draws its panel, saying so.
func TestDrawEmptySeries(t *testing.T) {
	req := knownChart()
	req.Series[0].Times, req.Series[0].Vals = nil, nil
	b, _, err := Draw(req)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if box(img, Color(0)) != (image.Rectangle{}) {
		t.Error("an empty series drew a line")
	}
}

func TestDrawRefusesOutOfBounds(t *testing.T) {
	for name, mod := range map[string]func(*chart.Request){
		"too wide":        func(r *chart.Request) { r.Width = chart.MaxWidth + 1 },
		"too short":       func(r *chart.Request) { r.Height = chart.MinHeight - 1 },
		"no series":       func(r *chart.Request) { r.Series = nil },
		"end before":      func(r *chart.Request) { r.End = r.Start },
		"time outside":    func(r *chart.Request) { r.Series[0].Times[0] = r.Start - 1 },
		"times unordered": func(r *chart.Request) { r.Series[0].Times[1] = r.Series[0].Times[0] - 1 },
		"NaN":             func(r *chart.Request) { r.Series[0].Vals[0] = math.NaN() },
		"lengths differ":  func(r *chart.Request) { r.Series[0].Vals = r.Series[0].Vals[1:] },
		"min above max":   func(r *chart.Request) { r.Series[0].Min = f(100) },
	} {
		r := knownChart()
		mod(r)
		if _, _, err := Draw(r); err == nil {
			t.Errorf("%s: drawn", name)
		}
	}
}

func slicesMinMax(v []float64) (float64, float64) {
	lo, hi := v[0], v[0]
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// Package chart carries a metric's history from the agent to whatever draws
// it as a PNG, without linking the drawing. The plotting library
// (gonum.org/v1/plot, with the fonts it embeds) is megabytes, more than an
// armv6 agent's size budget has left, so it lives in raspi-mcp-chart, a
// small program the agent starts for each chart (Process): a Request as
// JSON on its stdin, the PNG on its stdout. The tests draw in process
// (internal/chartpng). This package is the standard library only.
package chart

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Bounds of one chart: what the agent asks for and what raspi-mcp-chart
// accepts, so a request the agent did not check still costs little.
const (
	MinWidth, MaxWidth   = 320, 1600
	MinHeight, MaxHeight = 200, 1200
	MaxSeries            = 4
	MaxPoints            = 2000 // per series
	MaxRequestBytes      = 1 << 20
	MaxPNGBytes          = 2 << 20
)

// Request is one chart: series drawn one above the other on a shared time
// axis from Start to End.
type Request struct {
	Width  int      `json:"width"`
	Height int      `json:"height"`
	Start  int64    `json:"start"` // Unix seconds, the time axis's left end
	End    int64    `json:"end"`   // Unix seconds, its right end
	Series []Series `json:"series"`
}

// Series is one panel: its name and unit (the panel's title and axis
// label), its points, and optionally fixed bounds of its value axis (a 0/1
// flag is drawn from 0 to 1 whatever it did).
type Series struct {
	Name  string    `json:"name"`
	Unit  string    `json:"unit,omitempty"`
	Times []int64   `json:"times"` // Unix seconds, ascending, within [Start, End]
	Vals  []float64 `json:"values"`
	Min   *float64  `json:"min,omitempty"`
	Max   *float64  `json:"max,omitempty"`
	Step  bool      `json:"step,omitempty"` // a state (drawn as steps), not a measurement
}

// Validate refuses a request outside the bounds, or whose points do not
// fit its axis.
func (r *Request) Validate() error {
	switch {
	case r.Width < MinWidth || r.Width > MaxWidth:
		return fmt.Errorf("chart: width %d is not within %d..%d", r.Width, MinWidth, MaxWidth)
	case r.Height < MinHeight || r.Height > MaxHeight:
		return fmt.Errorf("chart: height %d is not within %d..%d", r.Height, MinHeight, MaxHeight)
	case r.End <= r.Start:
		return fmt.Errorf("chart: end %d is not after start %d", r.End, r.Start)
	case len(r.Series) == 0 || len(r.Series) > MaxSeries:
		return fmt.Errorf("chart: %d series, want 1..%d", len(r.Series), MaxSeries)
	}
	for _, s := range r.Series {
		if len(s.Times) != len(s.Vals) || len(s.Times) > MaxPoints {
			return fmt.Errorf("chart: series %q has %d times and %d values (at most %d)", s.Name, len(s.Times), len(s.Vals), MaxPoints)
		}
		if len(s.Name) > 64 || len(s.Unit) > 16 {
			return fmt.Errorf("chart: series name %q or unit %q is too long", s.Name, s.Unit)
		}
		for i, t := range s.Times {
			if t < r.Start || t > r.End || (i > 0 && t < s.Times[i-1]) {
				return fmt.Errorf("chart: series %q: time %d is out of order or outside %d..%d", s.Name, t, r.Start, r.End)
			}
			if v := s.Vals[i]; math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("chart: series %q: value %d is not a number", s.Name, i)
			}
		}
		if s.Min != nil && s.Max != nil && !(*s.Min < *s.Max) {
			return fmt.Errorf("chart: series %q: min %g is not below max %g", s.Name, *s.Min, *s.Max)
		}
	}
	return nil
}

// Renderer draws a request as a PNG.
type Renderer interface {
	Render(ctx context.Context, r *Request) ([]byte, error)
}

// Unavailable is the Renderer of an agent that has none: every chart fails
// with its text (that raspi-mcp-chart is not installed, say).
type Unavailable string

func (u Unavailable) Render(context.Context, *Request) ([]byte, error) {
	return nil, fmt.Errorf("%w: %s", ErrUnavailable, string(u))
}

// ErrUnavailable is a chart that could not be drawn because the drawing
// program is missing or failed, not because the request was wrong.
var ErrUnavailable = errors.New("chart: no renderer")

// Package camsim is the simulated camera of laptop mode and the tests. It
// is a package of its own because image/jpeg and image/png register their
// decoders when imported: only the binaries that simulate a board (the
// helper's --sim, the tests) should carry them, not the agent, which only
// reads the files a camera wrote.
package camsim

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/camera"
)

// Sim is a Camera for development machines and tests: it follows the same
// rules as Rpicam (validated sizes, generated names, one capture at a time)
// but renders a fixed test card instead of touching hardware.
type Sim struct {
	root string
	mu   sync.Mutex // held for the whole capture; TryLock gives ErrBusy
}

var _ camera.Camera = (*Sim)(nil)

// New returns a Sim writing into mediaRoot, which is created on first
// capture if missing.
func New(mediaRoot string) *Sim {
	return &Sim{root: mediaRoot}
}

// Capture renders the test card at the requested size and format. The image
// depends only on the request, so tests can compare output byte for byte.
func (s *Sim) Capture(ctx context.Context, r camera.Request) (camera.Photo, error) {
	r, err := camera.Normalize(r)
	if err != nil {
		return camera.Photo{}, err
	}
	if !s.mu.TryLock() {
		return camera.Photo{}, fmt.Errorf("%w: capture already running", camera.ErrBusy)
	}
	defer s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return camera.Photo{}, fmt.Errorf("camsim: capture: %w", err)
	}

	taken := time.Now()
	f, err := camera.Reserve(s.root, taken, r.Format)
	if err != nil {
		return camera.Photo{}, err
	}
	path := f.Name()
	img := testCard(r.Width, r.Height)
	if r.Format == "png" {
		err = png.Encode(f, img)
	} else {
		err = jpeg.Encode(f, img, &jpeg.Options{Quality: r.Quality})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return camera.Photo{}, fmt.Errorf("camsim: encode %s %dx%d to %q: %w", r.Format, r.Width, r.Height, path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		os.Remove(path)
		return camera.Photo{}, fmt.Errorf("camsim: stat %q: %w", path, err)
	}
	return camera.Photo{Path: path, Width: r.Width, Height: r.Height, Format: r.Format, SizeBytes: fi.Size(), Taken: taken}, nil
}

// testCard draws colour bars over the top two thirds and a grey ramp with a
// checkerboard below, so orientation, colour order and scaling are all
// visible at a glance. It deliberately contains no clock so it is
// deterministic.
func testCard(w, h int) *image.RGBA {
	// 75% SMPTE-style bars, left to right.
	bars := [...]color.RGBA{
		{191, 191, 191, 255}, // grey
		{191, 191, 0, 255},   // yellow
		{0, 191, 191, 255},   // cyan
		{0, 191, 0, 255},     // green
		{191, 0, 191, 255},   // magenta
		{191, 0, 0, 255},     // red
		{0, 0, 191, 255},     // blue
		{16, 16, 16, 255},    // black
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	barsEnd := h * 2 / 3
	rampEnd := h * 5 / 6
	cell := max(h/24, 1)
	for y := range h {
		for x := range w {
			var c color.RGBA
			switch {
			case y < barsEnd:
				c = bars[x*len(bars)/w]
			case y < rampEnd:
				v := uint8(x * 255 / max(w-1, 1))
				c = color.RGBA{v, v, v, 255}
			case (x/cell+y/cell)%2 == 0:
				c = color.RGBA{235, 235, 235, 255}
			default:
				c = color.RGBA{16, 16, 16, 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	return img
}

package pairing

import (
	"fmt"
	"io"
	"strings"

	"rsc.io/qr/coding"
)

// quiet is the light border around a QR code, in modules: the standard's
// four, which phone cameras need to find the code on a busy screen.
const quiet = 4

// WriteQR draws text as a QR code with half-block characters, two modules
// a character cell, so a pairing line's code (version 10 to 13, 57 to 69
// modules) fits an 80-column terminal. With ansi, it sets black on white
// so the code reads the right way round on a dark terminal; without, dark
// modules are drawn, light ones left blank (right on a light background;
// most phone scanners also read the inverse). It returns the code's width
// in columns.
func WriteQR(w io.Writer, text string, ansi bool) (int, error) {
	c, err := encodeQR(text)
	if err != nil {
		return 0, err
	}
	n := c.Size + 2*quiet
	dark := func(x, y int) bool { return c.Black(x-quiet, y-quiet) } // false outside the code
	var b strings.Builder
	for y := 0; y < n; y += 2 {
		if ansi {
			b.WriteString("\x1b[30;47m")
		}
		for x := 0; x < n; x++ {
			top, bottom := dark(x, y), y+1 < n && dark(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteByte(' ')
			}
		}
		if ansi {
			b.WriteString("\x1b[0m")
		}
		b.WriteByte('\n')
	}
	_, err = io.WriteString(w, b.String())
	return n, err
}

// encodeQR makes the smallest code of text at level L, the least error
// correction: a terminal is a clean, flat source, and each step up in
// level makes a pairing line's code a version or two wider. It uses
// rsc.io/qr's coding package, not its top-level one, which brings the
// image package into the agent.
func encodeQR(text string) (*coding.Code, error) {
	enc := coding.String(text) // byte mode: a pairing line is mixed case
	for v := coding.Version(coding.MinVersion); v <= coding.MaxVersion; v++ {
		if enc.Bits(v) > v.DataBytes(coding.L)*8 {
			continue
		}
		p, err := coding.NewPlan(v, coding.L, 0)
		if err != nil {
			return nil, fmt.Errorf("pairing: qr: %w", err)
		}
		c, err := p.Encode(enc)
		if err != nil {
			return nil, fmt.Errorf("pairing: qr: %w", err)
		}
		return c, nil
	}
	return nil, fmt.Errorf("pairing: qr: %d bytes are too many for a QR code", len(text))
}
